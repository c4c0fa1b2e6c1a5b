# dtrain on a Nebius GPU cluster: cluster_size nodes on one InfiniBand fabric, each with its own
# boot disk, all sharing one filesystem for snapshots and logs. Node 0 is the master: its private
# address is reserved up front so that every node's start-up script can name it.

locals {
  master_port       = 29500
  install_dir       = "/opt/dtrain"
  shared_mount_tag  = "dtrain-shared"
  shared_mount_path = "/mnt/shared"
  job_dir           = "${local.shared_mount_path}/${var.name}"

  node_names  = [for rank in range(var.cluster_size) : rank == 0 ? "${var.name}-master" : "${var.name}-worker-${rank}"]
  master_addr = split("/", nebius_vpc_v1_allocation.master.status.details.allocated_cidr)[0]
}

data "nebius_vpc_v1_subnet" "this" {
  parent_id = var.project_id
  name      = var.subnet_name
}

# The job secret every launcher presents at rendezvous. It lives in the Terraform state and in
# each node's user data (/etc/dtrain/job.env, root only), and is output only as sensitive.
resource "random_password" "token" {
  length  = 48
  special = false
}

resource "nebius_compute_v1_gpu_cluster" "this" {
  parent_id         = var.project_id
  name              = "${var.name}-gpu-cluster"
  infiniband_fabric = var.infiniband_fabric
}

resource "nebius_compute_v1_filesystem" "shared" {
  parent_id        = var.project_id
  name             = "${var.name}-shared"
  type             = "NETWORK_SSD"
  block_size_bytes = 4096
  size_gibibytes   = var.shared_fs_size_gib
}

resource "nebius_vpc_v1_allocation" "master" {
  parent_id = var.project_id
  name      = "${var.name}-master-ip"

  ipv4_private = {
    subnet_id = data.nebius_vpc_v1_subnet.this.id
  }
}

resource "nebius_compute_v1_disk" "boot" {
  count = var.cluster_size

  parent_id        = var.project_id
  name             = "${local.node_names[count.index]}-boot"
  type             = "NETWORK_SSD"
  block_size_bytes = 4096
  size_gibibytes   = count.index == 0 ? var.master_boot_disk_gib : var.worker_boot_disk_gib

  source_image_family = {
    image_family = var.image_family
  }
}

resource "nebius_compute_v1_instance" "node" {
  count = var.cluster_size

  parent_id = var.project_id
  name      = local.node_names[count.index]
  hostname  = local.node_names[count.index]

  resources = {
    platform = var.platform
    preset   = var.node_preset
  }

  gpu_cluster = {
    id = nebius_compute_v1_gpu_cluster.this.id
  }

  boot_disk = {
    attach_mode = "READ_WRITE"
    existing_disk = {
      id = nebius_compute_v1_disk.boot[count.index].id
    }
  }

  filesystems = [
    {
      attach_mode = "READ_WRITE"
      mount_tag   = local.shared_mount_tag
      existing_filesystem = {
        id = nebius_compute_v1_filesystem.shared.id
      }
    }
  ]

  network_interfaces = [
    {
      name      = "eth0"
      subnet_id = data.nebius_vpc_v1_subnet.this.id
      ip_address = {
        allocation_id = count.index == 0 ? nebius_vpc_v1_allocation.master.id : null
      }
      public_ip_address = {}
    }
  ]

  cloud_init_user_data = templatefile("${path.module}/../templates/cloud-init.yaml.tftpl", {
    ssh_user          = var.ssh_user
    ssh_public_key    = trimspace(file(pathexpand(var.ssh_public_key_path)))
    repo_url          = var.repo_url
    repo_ref          = var.repo_ref
    install_dir       = local.install_dir
    shared_mount_tag  = local.shared_mount_tag
    shared_mount_path = local.shared_mount_path
    dtrain_token      = random_password.token.result
    start_training = base64encode(templatefile("${path.module}/../templates/start-training.sh.tftpl", {
      install_dir        = local.install_dir
      nnodes             = var.cluster_size
      node_rank          = count.index
      nproc_per_node     = var.gpus_per_node
      master_addr        = local.master_addr
      master_port        = local.master_port
      connect_attempts   = 90
      connect_interval_s = 10
      max_restarts       = var.max_restarts
      log_dir            = "${local.job_dir}/logs/node-${count.index}"
      device             = "cuda"
      epochs             = var.epochs
      save_every         = var.save_every
      batch_size         = var.batch_size
      snapshot_path      = "${local.job_dir}/snapshot.safetensors"
    }))
  })
}
