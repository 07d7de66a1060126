#!/usr/bin/env bash
# make vm-test: proves staticpod on a real systemd host with the unified cgroup
# hierarchy, in a Debian bookworm guest under qemu (software emulation: no KVM).
#
#   hack/vm/test.sh CACHE_DIR [ARCH]
#   VM_DEB=staticpod_..._ARCH.deb hack/vm/test.sh CACHE_DIR [ARCH]
#
# ARCH is amd64 (the default; qemu-system-x86_64) or arm64 (qemu-system-aarch64, its
# machine virt). The guest's root comes from hack/vm/image.sh (cached in CACHE_DIR);
# staticpod goes in with `make install DESTDIR=...`, built for ARCH, or, when VM_DEB
# names a package, with apt-get install of it in the guest's root (chrooted; for arm64
# under qemu-user); its flags in /etc/default/staticpod, the busybox image (built from
# the guest's own busybox, of ARCH) in its --image-dir, and the test (hack/vm/run.sh,
# the pods in hack/vm/pods) in /usr/local/lib/vm-test, run at boot by vm-test.service. The guest boots twice on the
# same disk: the first boot runs the checks and powers off with a pod that must get
# its preStop hook and grace period; the second checks what the first left on disk and
# in the journal. The test's lines ("VMTEST ...") come on the serial console; the rest
# of the console goes to CACHE_DIR/last-console.log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:?usage: $0 CACHE_DIR [ARCH]}
arch=${2:-amd64}
GO=${GO:-go}
deb=${VM_DEB:-}
case $arch in
amd64)
	qemu=(qemu-system-x86_64)
	tty=ttyS0
	defaultTimeout=900
	;;
arm64)
	# No KVM for another architecture: TCG, a few times slower than amd64's.
	qemu=(qemu-system-aarch64 -machine virt -cpu cortex-a57)
	tty=ttyAMA0
	defaultTimeout=3600
	;;
*)
	echo "$0: architecture $arch: want amd64 or arm64" >&2
	exit 2
	;;
esac
bootTimeout=${VM_BOOT_TIMEOUT:-$defaultTimeout} # seconds one boot may take, test included
maxPoweroff=${VM_MAX_POWEROFF_SECONDS:-75} # systemd's stall alone would be 90 s
if [ -n "$deb" ]; then
	deb=$(realpath "$deb")
	[ -f "$deb" ] || {
		echo "$0: VM_DEB: no file $deb" >&2
		exit 2
	}
fi

started=$(date +%s)
tar=$("$here/image.sh" "$cache" "$arch")
image=$(dirname "$tar")
echo "vm-test: $arch guest root $tar ($(($(date +%s) - started)) s), kernel $(cat "$image/kernel-version")"

work=$(mktemp -d /var/tmp/staticpod-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir "$root"
tar -C "$root" -xf "$tar"
if [ -n "$deb" ]; then
	# Offline: the package's dependencies (containerd, runc) are in the root already.
	# policy-rc.d keeps its scripts from starting anything in the chroot.
	cp "$deb" "$root/tmp/staticpod.deb"
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 0755 "$root/usr/sbin/policy-rc.d"
	chroot "$root" apt-get install -y -q --no-install-recommends /tmp/staticpod.deb >"$work/apt.log" 2>&1 || {
		cat "$work/apt.log" >&2
		exit 1
	}
	rm -f "$root/tmp/staticpod.deb" "$root/usr/sbin/policy-rc.d"
	echo "vm-test: installed $(basename "$deb")"
else
	# Built into $work, not bin/: ARCH need not be this machine's.
	GOARCH=$arch make -C "$repo" --no-print-directory install DESTDIR="$root" GO="$GO" \
		BIN="$work/staticpod" MAN_DIR="$work/man" >/dev/null
fi
install -D -m 0755 "$here/run.sh" "$root/usr/local/lib/vm-test/run.sh"
mkdir -p "$root/usr/local/lib/vm-test/pods" "$root/var/lib/staticpod/images"
cp "$here"/pods/*.yaml "$root/usr/local/lib/vm-test/pods/"
(cd "$repo" && "$GO" run ./internal/testenv/cmd/mkimage -ref localhost/busybox:static -busybox "$image/busybox" -o "$root/var/lib/staticpod/images/busybox.tar")
cat >"$root/etc/default/staticpod" <<'EOF'
STATICPOD_IMAGE_DIR=/var/lib/staticpod/images
STATICPOD_SHUTDOWN_GRACE_PERIOD=30s
STATICPOD_SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS=10s
STATICPOD_POD_MAX_PIDS=256
STATICPOD_LISTEN=127.0.0.1:10250
STATICPOD_API_TOKEN_FILE=/etc/staticpod/api-token
EOF
# The API's token over the loopback listener: run.sh reads /stats/summary and
# /metrics/resource with busybox's wget, the guest's one HTTP client.
install -d -m 0700 "$root/etc/staticpod"
(umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$root/etc/staticpod/api-token")
disk=$work/disk.img
mkfs.ext4 -q -F -L root -d "$root" "$disk" 3G >/dev/null
rm -rf "$root"
echo "vm-test: disk ready ($(($(date +%s) - started)) s)"

console=$cache/last-console.log
: >"$console"

# boot N: boots the guest once, its console stamped with the host's seconds into
# $console, the VMTEST lines shown as they come.
boot() {
	echo "vm-test: boot $1"
	timeout "$bootTimeout" "${qemu[@]}" -m 2048 -smp 2 -nographic -no-reboot \
		-kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
		-append "root=/dev/vda rw console=$tty systemd.unified_cgroup_hierarchy=1 panic=-1" \
		-drive "file=$disk,format=raw,if=virtio" -nic none </dev/null 2>&1 |
		while IFS= read -r line; do
			line=${line%$'\r'}
			printf '%(%s)T boot%s %s\n' -1 "$1" "$line" >>"$console"
			case $line in *VMTEST*) echo "  ${line#*VMTEST }" ;; esac
		done
	echo "vm-test: boot $1 ended ($(($(date +%s) - started)) s)"
}

boot 1
if grep -q "VMTEST POWEROFF" "$console"; then
	poweroffAt=$(grep -m1 "VMTEST POWEROFF" "$console" | cut -d' ' -f1)
	endedAt=$(tail -1 "$console" | cut -d' ' -f1)
	took=$((endedAt - poweroffAt))
	if [ "$took" -le "$maxPoweroff" ]; then
		echo "VMTEST PASS power-off took $took s (no 90 s stall)" | tee -a "$console" | sed 's/^VMTEST /  /'
	else
		echo "VMTEST FAIL power-off: took $took s, over $maxPoweroff s" | tee -a "$console" | sed 's/^VMTEST /  /'
	fi
	boot 2
fi
passed=$(grep -c "VMTEST PASS" "$console" || true)
failed=$(grep -c "VMTEST FAIL" "$console" || true)
echo "vm-test: $(($(date +%s) - started)) s in all; console in $console"
if ! grep -q "boot2.*VMTEST END failed=0" "$console"; then
	failed=$((failed == 0 ? 1 : failed))
	if ! grep -q "VMTEST END" "$console"; then
		echo "vm-test: the guest did not finish the test; the console's end:" >&2
		tail -40 "$console" | cut -d' ' -f3- >&2
	fi
fi
echo "vm-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
