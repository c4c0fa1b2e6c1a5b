# dtrain on a Google Cloud GPU cluster: cluster_size A3 VMs (8 x H100 each) under a compact
# placement policy, each with one gVNIC per GPU network, and one Filestore share for snapshots
# and logs. Node 0 is the master: its internal address is reserved up front, so that every
# node's start-up script can name it.

locals {
  gpu_nics = var.machine_type == "a3-megagpu-8g" ? 8 : 4
}

data "google_compute_subnetwork" "this" {
  name   = var.subnetwork
  region = var.region
}

resource "google_compute_address" "master" {
  name         = "${var.name}-master"
  region       = var.region
  subnetwork   = data.google_compute_subnetwork.this.self_link
  address_type = "INTERNAL"
}

resource "google_compute_resource_policy" "placement" {
  name   = "${var.name}-placement"
  region = var.region

  group_placement_policy {
    collocation = "COLLOCATED"
  }
}

# A3's GPU-to-GPU traffic goes over networks of its own, one per GPU NIC, with jumbo frames.
resource "google_compute_network" "gpu" {
  count = local.gpu_nics

  name                    = "${var.name}-gpu-${count.index}"
  auto_create_subnetworks = false
  mtu                     = 8244
}

resource "google_compute_subnetwork" "gpu" {
  count = local.gpu_nics

  name          = "${var.name}-gpu-${count.index}"
  region        = var.region
  network       = google_compute_network.gpu[count.index].id
  ip_cidr_range = "${var.gpu_network_prefix}.${count.index}.0/24"
}

resource "google_compute_firewall" "gpu" {
  count = local.gpu_nics

  name          = "${var.name}-gpu-${count.index}-internal"
  network       = google_compute_network.gpu[count.index].id
  source_ranges = ["${var.gpu_network_prefix}.${count.index}.0/24"]

  allow {
    protocol = "all"
  }
}

resource "google_compute_firewall" "primary" {
  name          = "${var.name}-internal"
  network       = data.google_compute_subnetwork.this.network
  source_ranges = [data.google_compute_subnetwork.this.ip_cidr_range]

  allow {
    protocol = "all"
  }
}

resource "google_compute_firewall" "ssh" {
  name          = "${var.name}-ssh"
  network       = data.google_compute_subnetwork.this.network
  source_ranges = [var.ssh_cidr]

  allow {
    protocol = "tcp"
    ports    = ["22"]
  }
}

resource "google_filestore_instance" "shared" {
  name     = "${var.name}-shared"
  location = var.zone
  tier     = "BASIC_SSD"

  file_shares {
    name        = "dtrain"
    capacity_gb = var.shared_fs_size_gib
  }

  networks {
    network = data.google_compute_subnetwork.this.network
    modes   = ["MODE_IPV4"]
  }
}

module "nodes" {
  source = "../node_group"

  job                  = local.job
  token                = random_password.token.result
  size                 = var.cluster_size
  nproc_per_node       = 8
  master_addr          = google_compute_address.master.address
  zone                 = var.zone
  machine_type         = var.machine_type
  image                = var.image
  subnetwork           = data.google_compute_subnetwork.this.self_link
  gpu_subnetworks      = google_compute_subnetwork.gpu[*].self_link
  placement_policy     = google_compute_resource_policy.placement.self_link
  master_boot_disk_gib = var.master_boot_disk_gib
  worker_boot_disk_gib = var.worker_boot_disk_gib
  shared_fs = {
    source   = "${google_filestore_instance.shared.networks[0].ip_addresses[0]}:/dtrain"
    type     = "nfs"
    options  = "defaults,_netdev,nofail"
    packages = "nfs-common"
  }
}
