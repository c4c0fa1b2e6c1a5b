# dtrain on an AWS GPU cluster: cluster_size H100 instances in one cluster placement group, all
# traffic between them allowed (EFA needs it), one FSx for Lustre filesystem for snapshots and
# logs. Node 0 is the master: its EFA interface, and so its private address, is made first, so
# that every node's start-up script can name it.

data "aws_subnet" "this" {
  id = var.subnet_id
}

resource "aws_placement_group" "cluster" {
  name     = "${var.name}-cluster"
  strategy = "cluster"
}

resource "aws_security_group" "cluster" {
  name        = "${var.name}-cluster"
  description = "dtrain nodes and their filesystem: all traffic among them, SSH from ssh_cidr."
  vpc_id      = data.aws_subnet.this.vpc_id
}

resource "aws_vpc_security_group_ingress_rule" "within" {
  security_group_id            = aws_security_group.cluster.id
  referenced_security_group_id = aws_security_group.cluster.id
  ip_protocol                  = "-1"
}

resource "aws_vpc_security_group_egress_rule" "within" {
  security_group_id            = aws_security_group.cluster.id
  referenced_security_group_id = aws_security_group.cluster.id
  ip_protocol                  = "-1"
}

resource "aws_vpc_security_group_egress_rule" "internet" {
  security_group_id = aws_security_group.cluster.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  security_group_id = aws_security_group.cluster.id
  cidr_ipv4         = var.ssh_cidr
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
}

resource "aws_fsx_lustre_file_system" "shared" {
  storage_capacity            = var.shared_fs_size_gib
  subnet_ids                  = [var.subnet_id]
  security_group_ids          = [aws_security_group.cluster.id]
  deployment_type             = "PERSISTENT_2"
  per_unit_storage_throughput = 250
  file_system_type_version    = "2.15"
  tags                        = { Name = "${var.name}-shared" }
}

resource "aws_network_interface" "master" {
  subnet_id       = var.subnet_id
  security_groups = [aws_security_group.cluster.id]
  interface_type  = "efa"
  tags            = { Name = "${var.name}-master-efa-0" }
}

resource "aws_eip" "master" {
  domain            = "vpc"
  network_interface = aws_network_interface.master.id
  tags              = { Name = "${var.name}-master" }
}

module "nodes" {
  source = "../node_group"

  job                         = local.job
  token                       = random_password.token.result
  size                        = var.cluster_size
  nproc_per_node              = 8
  master_addr                 = aws_network_interface.master.private_ip
  master_network_interface_id = aws_network_interface.master.id
  subnet_id                   = var.subnet_id
  security_group_id           = aws_security_group.cluster.id
  placement_group             = aws_placement_group.cluster.name
  instance_type               = var.instance_type
  ami_id                      = var.ami_id
  efa_interfaces              = var.efa_interfaces
  master_boot_disk_gib        = var.master_boot_disk_gib
  worker_boot_disk_gib        = var.worker_boot_disk_gib
  shared_fs = {
    source   = "${aws_fsx_lustre_file_system.shared.dns_name}@tcp:/${aws_fsx_lustre_file_system.shared.mount_name}"
    type     = "lustre"
    options  = "defaults,noatime,flock,_netdev,nofail"
    packages = ""
  }
}
