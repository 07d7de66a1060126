#!/usr/bin/env bash
# Installs what staticpod needs on a Debian machine, through apt, when it is missing:
# containerd and runc to run containers (and crun, the tests' second runtime handler),
# busybox-static for the example and test images,
# and containernetworking-plugins for pod networks (CNI plugins, in /usr/lib/cni).
# `deps.sh test` also puts promtool, with which the tests check the alerting rules in
# contrib/prometheus, in .cache/bin (see test_tools).
#
# busybox must be static: the images are busybox alone, with no libc beside it. Debian's
# busybox package (which initramfs-tools pulls in on most machines) is dynamic;
# busybox-static replaces it.
set -euo pipefail

# elf_uint FILE OFFSET SIZE BIG: the unsigned integer of SIZE bytes at OFFSET of FILE,
# big-endian when BIG is 2 (ELF's EI_DATA), else little-endian.
elf_uint() {
	local bytes value=0 b
	read -r -a bytes <<<"$(od -An -tu1 -v -j "$2" -N "$3" "$1")"
	[ "${#bytes[@]}" -eq "$3" ] || return 1
	if [ "$4" = 2 ]; then
		for b in "${bytes[@]}"; do value=$((value * 256 + b)); done
	else
		for ((b = ${#bytes[@]} - 1; b >= 0; b--)); do value=$((value * 256 + bytes[b])); done
	fi
	echo "$value"
}

# static_elf FILE succeeds when FILE is an ELF executable without a program interpreter
# (PT_INTERP): one that runs with no dynamic loader and no libc beside it.
static_elf() {
	local f=$1 ident class data phoff phentsize phnum i
	[ -f "$f" ] && [ -r "$f" ] || return 1
	read -r -a ident <<<"$(od -An -tu1 -v -N 6 "$f")"
	[ "${#ident[@]}" -eq 6 ] && [ "${ident[*]:0:4}" = "127 69 76 70" ] || return 1 # \x7fELF
	class=${ident[4]} data=${ident[5]}
	if [ "$class" = 2 ]; then # 64-bit
		phoff=$(elf_uint "$f" 32 8 "$data") && phentsize=$(elf_uint "$f" 54 2 "$data") && phnum=$(elf_uint "$f" 56 2 "$data") || return 1
	elif [ "$class" = 1 ]; then
		phoff=$(elf_uint "$f" 28 4 "$data") && phentsize=$(elf_uint "$f" 42 2 "$data") && phnum=$(elf_uint "$f" 44 2 "$data") || return 1
	else
		return 1
	fi
	for ((i = 0; i < phnum; i++)); do
		[ "$(elf_uint "$f" $((phoff + i * phentsize)) 4 "$data")" != 3 ] || return 1 # PT_INTERP
	done
}

main() {
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[ -x /usr/bin/crun ] || missing+=(crun)
	static_elf /bin/busybox || missing+=(busybox-static)
	[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || missing+=(containernetworking-plugins)
	if [ ${#missing[@]} -eq 0 ]; then
		[ "${1:-}" != test ] || test_tools
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
	if ! static_elf /bin/busybox; then
		echo "/bin/busybox is still not a static binary after installing busybox-static" >&2
		exit 1
	fi
	[ "${1:-}" != test ] || test_tools
}

# test_tools installs man-db when the machine has neither man nor groff (the man page
# test reads the pages through man), and puts promtool in .cache/bin (which make test
# puts first on PATH) unless one is on PATH: taken out of Debian's prometheus package
# rather than installing it, whose service would start a Prometheus server on port 9090
# of the machine.
test_tools() {
	local bin tmp
	if ! command -v man >/dev/null && ! command -v groff >/dev/null; then
		echo "installing man-db with apt-get, for the man page test"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq man-db || return 1
	fi
	bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/bin"
	if command -v promtool >/dev/null || [ -x "$bin/promtool" ]; then
		return 0
	fi
	echo "taking promtool out of Debian's prometheus package into $bin"
	tmp=$(mktemp -d)
	chown _apt "$tmp" 2>/dev/null || true # apt downloads as its own user where it has one
	(cd "$tmp" && apt-get update -qq && apt-get download -qq prometheus) &&
		dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool &&
		mkdir -p "$bin" && install -m 0755 "$tmp/usr/bin/promtool" "$bin/promtool"
	local rc=$?
	rm -rf "$tmp"
	return $rc
}

# Sourced (by the tests), it only defines its functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
