#!/usr/bin/env bash
# Builds the root filesystem of the VM test's guest, once per set of inputs, and prints
# the path of its tarball:
#
#   hack/vm/image.sh CACHE_DIR [ARCH]
#
# ARCH is amd64 (the default) or arm64. The guest is Debian bookworm for ARCH from the
# apt mirror the host uses, with systemd as PID 1,
# D-Bus and logind (node shutdown takes logind's inhibitor lock), containerd
# configured for the systemd cgroup driver, and apparmor (apparmor_parser: staticpod
# loads containerd's default profile with it, the test a Localhost profile). For amd64 the
# kernel and its modules come from the host's linux-image-amd64 package: the guest gets
# the modules, the host's /boot the kernel and initrd qemu boots. For arm64 debootstrap
# runs the guest's own programs under qemu-user (qemu-user-static, its binfmt_misc
# entry enabled here when it is not), and the kernel is the guest's linux-image-arm64,
# its initrd made in the guest. What varies per run (staticpod, the test) is added by
# hack/vm/test.sh, so a cached root serves every build of staticpod.
#
# The tarball is cached as CACHE_DIR/<key>/root.tar, beside vmlinuz and initrd.img,
# the kernel qemu boots it with, kernel-version, and busybox, the guest's static busybox
# (the test image is built from it: the guest's architecture); the key a hash of this
# script, the guest files beside it, the architecture, the kernel version and the
# mirror: the same inputs never debootstrap twice.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: $0 CACHE_DIR [ARCH]}
arch=${2:-amd64}

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

packages=systemd,systemd-sysv,dbus,containerd,runc,busybox-static,iproute2,procps,kmod,apparmor
case $arch in
amd64)
	kver=$(kernel_version)
	[ -n "$kver" ] && [ -d "/lib/modules/$kver" ] && [ -f "/boot/vmlinuz-$kver" ] || {
		echo "hack/vm/image.sh: linux-image-amd64 is not installed (apt-get install linux-image-amd64)" >&2
		exit 1
	}
	;;
arm64)
	kver=guest
	packages=$packages,linux-image-arm64
	# qemu-user runs the guest's programs in its chroot: binfmt_misc's entry for
	# aarch64 with the F flag (the interpreter opened at registration, so it needs no
	# copy in the chroot), as qemu-user-static registers it.
	[ -x /usr/bin/qemu-aarch64-static ] || {
		echo "hack/vm/image.sh: qemu-user-static is not installed (apt-get install qemu-user-static binfmt-support)" >&2
		exit 1
	}
	if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
		[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
		update-binfmts --enable qemu-aarch64
	fi
	;;
*)
	echo "hack/vm/image.sh: architecture $arch: want amd64 or arm64" >&2
	exit 2
	;;
esac
key=$( (cat "$0" "$here"/guest/*; echo "$arch $kver $(mirror) $packages") | sha256sum | cut -c1-16)
dir=$cache/$key
if [ -f "$dir/root.tar" ] && [ -f "$dir/vmlinuz" ] && [ -f "$dir/initrd.img" ] && [ -f "$dir/busybox" ]; then
	echo "$dir/root.tar"
	exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/build.XXXXXX")
# A debootstrap cut short can leave the root's /proc mounted: never removed through.
trap 'rm -rf --one-file-system "$tmp"' EXIT
root=$tmp/root
echo "hack/vm/image.sh: debootstrap bookworm $arch from $(mirror) (kernel $kver)" >&2
# --no-merged-usr: debootstrap 1.0.128 stops with "file already exists" without it.
bootstrap=(debootstrap --arch="$arch" --no-merged-usr --variant=minbase --include="$packages")
case $arch in
amd64)
	"${bootstrap[@]}" bookworm "$root" "$(mirror)" >"$tmp/debootstrap.log" 2>&1 || {
		tail -30 "$tmp/debootstrap.log" >&2
		exit 1
	}
	;;
arm64)
	# In two stages, the initrd's modules set in between: initramfs-tools' default
	# (MODULES=most, a thousand modules, each copied by programs run under qemu-user)
	# takes most of an hour here; the guest needs three, loaded at boot.
	"${bootstrap[@]}" --foreign bookworm "$root" "$(mirror)" >"$tmp/debootstrap.log" 2>&1 || {
		tail -30 "$tmp/debootstrap.log" >&2
		exit 1
	}
	mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/etc/initramfs-tools/hooks"
	echo MODULES=list >"$root/etc/initramfs-tools/conf.d/vm-test"
	cat >"$root/etc/initramfs-tools/hooks/vm-test" <<'HOOK'
#!/bin/sh
# The VM test's guest: its disk is virtio-blk on PCI, its root ext4.
[ "$1" = prereqs ] && exit 0
. /usr/share/initramfs-tools/hook-functions
for m in virtio_pci virtio_blk ext4; do force_load "$m"; done
HOOK
	chmod 0755 "$root/etc/initramfs-tools/hooks/vm-test"
	chroot "$root" /debootstrap/debootstrap --second-stage >>"$tmp/debootstrap.log" 2>&1 || {
		tail -30 "$tmp/debootstrap.log" >&2
		exit 1
	}
	;;
esac
mkdir -p "$dir"
case $arch in
amd64)
	mkdir -p "$root/lib/modules"
	cp -a "/lib/modules/$kver" "$root/lib/modules/"
	cp "/boot/vmlinuz-$kver" "$dir/vmlinuz"
	cp "/boot/initrd.img-$kver" "$dir/initrd.img"
	;;
arm64)
	kver=$(basename "$(ls -d "$root"/lib/modules/* | head -1)")
	cp "$root/boot/vmlinuz-$kver" "$dir/vmlinuz"
	cp "$root/boot/initrd.img-$kver" "$dir/initrd.img"
	;;
esac
cp "$root/bin/busybox" "$dir/busybox"
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
tar -C "$root" -cf "$dir/root.tar.tmp" .
echo "$kver" >"$dir/kernel-version"
mv "$dir/root.tar.tmp" "$dir/root.tar"
# Roots built from other inputs are not used again: about 700 MiB each.
for old in "$cache"/*/root.tar; do
	[ "$old" = "$dir/root.tar" ] || rm -rf "$(dirname "$old")"
done
echo "$dir/root.tar"
