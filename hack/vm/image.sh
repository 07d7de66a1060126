#!/usr/bin/env bash
# Builds the root filesystem of the VM test's guest, once per set of inputs, and prints
# the path of its tarball:
#
#   hack/vm/image.sh CACHE_DIR
#
# The guest is Debian bookworm from the apt mirror the host uses, with systemd as PID 1,
# D-Bus and logind (node shutdown takes logind's inhibitor lock), containerd
# configured for the systemd cgroup driver, and apparmor (apparmor_parser: staticpod
# loads containerd's default profile with it, the test a Localhost profile). The kernel and its modules come from the
# host's linux-image-amd64 package; the guest gets the modules, the host's /boot has the
# kernel and initrd qemu boots. What varies per run (staticpod, the test) is added by
# hack/vm/test.sh, so a cached root serves every build of staticpod.
#
# The tarball is cached as CACHE_DIR/<key>/root.tar, beside kernel-version, the
# version of the kernel in /boot to boot it with; the key a hash of this script, the
# guest files beside it, the kernel version and the mirror: the same inputs never
# debootstrap twice.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: $0 CACHE_DIR}

# kernel_version is the version of the installed linux-image-amd64's kernel.
kernel_version() {
	dpkg-query -W -f='${Depends}' linux-image-amd64 | grep -o 'linux-image-[0-9][^ ,]*' | head -1 | sed 's/^linux-image-//'
}

# mirror is the Debian mirror apt uses here.
mirror() {
	local m
	m=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
		grep -o 'https\?://[^ ]*/debian/\?$\|https\?://[^ ]*/debian ' | head -1 | tr -d ' ')
	echo "${m:-http://deb.debian.org/debian}"
}

kver=$(kernel_version)
[ -n "$kver" ] && [ -d "/lib/modules/$kver" ] && [ -f "/boot/vmlinuz-$kver" ] || {
	echo "hack/vm/image.sh: linux-image-amd64 is not installed (apt-get install linux-image-amd64)" >&2
	exit 1
}
packages=systemd,systemd-sysv,dbus,containerd,runc,busybox-static,iproute2,procps,kmod,apparmor
key=$( (cat "$0" "$here"/guest/*; echo "$kver $(mirror) $packages") | sha256sum | cut -c1-16)
dir=$cache/$key
if [ -f "$dir/root.tar" ] && [ -f "$dir/kernel-version" ]; then
	echo "$dir/root.tar"
	exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
echo "hack/vm/image.sh: debootstrap bookworm from $(mirror) (kernel $kver)" >&2
# --no-merged-usr: debootstrap 1.0.128 stops with "file already exists" without it.
debootstrap --no-merged-usr --variant=minbase --include=$packages bookworm "$root" "$(mirror)" >"$tmp/debootstrap.log" 2>&1 || {
	tail -30 "$tmp/debootstrap.log" >&2
	exit 1
}
mkdir -p "$root/lib/modules"
cp -a "/lib/modules/$kver" "$root/lib/modules/"
echo staticpod-vm >"$root/etc/hostname"
echo "127.0.0.1 localhost staticpod-vm" >"$root/etc/hosts"
: >"$root/etc/fstab"
passwd -R "$root" -d root >/dev/null
install -D -m 0644 "$here/guest/containerd.toml" "$root/etc/containerd/config.toml"
install -D -m 0644 "$here/guest/vm-test.service" "$root/etc/systemd/system/vm-test.service"
ln -sf /etc/systemd/system/vm-test.service "$root/etc/systemd/system/multi-user.target.wants/vm-test.service"
# Persistent journal: the second boot reads the first one's shutdown.
mkdir -p "$root/var/log/journal"
# No getty on the serial console: the test's output is all it shows.
rm -f "$root/etc/systemd/system/getty.target.wants/"*
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
mkdir -p "$dir"
tar -C "$root" -cf "$dir/root.tar.tmp" .
echo "$kver" >"$dir/kernel-version"
mv "$dir/root.tar.tmp" "$dir/root.tar"
# Roots built from other inputs are not used again: about 700 MiB each.
for old in "$cache"/*/root.tar; do
	[ "$old" = "$dir/root.tar" ] || rm -rf "$(dirname "$old")"
done
echo "$dir/root.tar"
