# dtrain on one Nebius GPU VM: the cluster's job with a single node and a single GPU, using the
# same cloud-init and start-up script. The snapshot lives on a shared filesystem, so it outlives
# the VM: destroy the VM alone (`-target`) and a new one resumes the run.

locals {
  master_port       = 29500
  install_dir       = "/opt/dtrain"
  shared_mount_tag  = "dtrain-shared"
  shared_mount_path = "/mnt/shared"
  job_dir           = "${local.shared_mount_path}/${var.name}"
}

data "nebius_vpc_v1_subnet" "this" {
  parent_id = var.project_id
  name      = var.subnet_name
}

resource "random_password" "token" {
  length  = 48
  special = false
}

resource "nebius_compute_v1_filesystem" "shared" {
  parent_id        = var.project_id
  name             = "${var.name}-shared"
  type             = "NETWORK_SSD"
  block_size_bytes = 4096
  size_gibibytes   = var.shared_fs_size_gib
}

resource "nebius_compute_v1_disk" "boot" {
  parent_id        = var.project_id
  name             = "${var.name}-boot"
  type             = "NETWORK_SSD"
  block_size_bytes = 4096
  size_gibibytes   = var.boot_disk_gib

  source_image_family = {
    image_family = var.image_family
  }
}

resource "nebius_compute_v1_instance" "vm" {
  parent_id = var.project_id
  name      = var.name
  hostname  = var.name

  resources = {
    platform = var.platform
    preset   = var.preset
  }

  boot_disk = {
    attach_mode = "READ_WRITE"
    existing_disk = {
      id = nebius_compute_v1_disk.boot.id
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
      name              = "eth0"
      subnet_id         = data.nebius_vpc_v1_subnet.this.id
      ip_address        = {}
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
      nnodes             = 1
      node_rank          = 0
      nproc_per_node     = 1
      master_addr        = "127.0.0.1"
      master_port        = local.master_port
      connect_attempts   = 1
      connect_interval_s = 1
      max_restarts       = var.max_restarts
      log_dir            = "${local.job_dir}/logs/node-0"
      device             = "cuda"
      epochs             = var.epochs
      save_every         = var.save_every
      batch_size         = var.batch_size
      snapshot_path      = "${local.job_dir}/snapshot.safetensors"
    }))
  })
}
