#!/usr/bin/env bash
# Installs what staticpod needs on a Debian machine, through apt, when it is missing:
# containerd and runc to run containers, busybox-static for the example and test images,
# containernetworking-plugins for pod networks (CNI plugins, in /usr/lib/cni).
set -euo pipefail
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 || missing+=(busybox-static)
[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || missing+=(containernetworking-plugins)
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "staticpod needs ${missing[*]}; run as root, or: sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
