# dtrain on one Nebius GPU VM: the cluster's node group with a single node and a single GPU, so
# the same cloud-init and start-up script. The snapshot lives on a shared filesystem, so it
# outlives the VM: destroy the VM alone (`-target`) and a new one resumes the run.

data "nebius_vpc_v1_subnet" "this" {
  parent_id = var.project_id
  name      = var.subnet_name
}

resource "nebius_compute_v1_filesystem" "shared" {
  parent_id        = var.project_id
  name             = "${var.name}-shared"
  type             = "NETWORK_SSD"
  block_size_bytes = 4096
  size_gibibytes   = var.shared_fs_size_gib
}

module "vm" {
  source = "../node_group"

  job                  = local.job
  token                = random_password.token.result
  size                 = 1
  nproc_per_node       = 1
  master_addr          = "127.0.0.1"
  project_id           = var.project_id
  subnet_id            = data.nebius_vpc_v1_subnet.this.id
  platform             = var.platform
  preset               = var.preset
  image_family         = var.image_family
  master_boot_disk_gib = var.boot_disk_gib
  worker_boot_disk_gib = var.boot_disk_gib
  filesystem_id        = nebius_compute_v1_filesystem.shared.id
  shared_fs            = local.shared_fs
}

# Deployments made before the node group became a module keep their disk and VM.
moved {
  from = nebius_compute_v1_disk.boot
  to   = module.vm.nebius_compute_v1_disk.boot[0]
}

moved {
  from = nebius_compute_v1_instance.vm
  to   = module.vm.nebius_compute_v1_instance.node[0]
}
