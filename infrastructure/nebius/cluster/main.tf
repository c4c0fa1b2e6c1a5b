# dtrain on a Nebius GPU cluster: cluster_size nodes on one InfiniBand fabric, each with its own
# boot disk, all sharing one filesystem for snapshots and logs. Node 0 is the master: its private
# address is reserved up front so that every node's start-up script can name it.

locals {
  master_addr = split("/", nebius_vpc_v1_allocation.master.status.details.allocated_cidr)[0]
}

data "nebius_vpc_v1_subnet" "this" {
  parent_id = var.project_id
  name      = var.subnet_name
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

module "nodes" {
  source = "../node_group"

  job                  = local.job
  token                = random_password.token.result
  size                 = var.cluster_size
  nproc_per_node       = var.gpus_per_node
  master_addr          = local.master_addr
  master_allocation_id = nebius_vpc_v1_allocation.master.id
  project_id           = var.project_id
  subnet_id            = data.nebius_vpc_v1_subnet.this.id
  platform             = var.platform
  preset               = var.node_preset
  image_family         = var.image_family
  master_boot_disk_gib = var.master_boot_disk_gib
  worker_boot_disk_gib = var.worker_boot_disk_gib
  gpu_cluster_id       = nebius_compute_v1_gpu_cluster.this.id
  filesystem_id        = nebius_compute_v1_filesystem.shared.id
  shared_fs            = local.shared_fs
}

# Deployments made before the node group became a module keep their disks and VMs.
moved {
  from = nebius_compute_v1_disk.boot
  to   = module.nodes.nebius_compute_v1_disk.boot
}

moved {
  from = nebius_compute_v1_instance.node
  to   = module.nodes.nebius_compute_v1_instance.node
}
