#!/bin/sh
# install.sh installs staticpod from the directory it is in, a release tarball
# (staticpod-linux-ARCH.tar.gz) unpacked:
#
#   ./install.sh [--root DIR] [--prefix DIR] [--init systemd|openrc|none] [--uninstall]
#
# It checks every file against the directory's SHA256SUMS first, then installs the binary
# into PREFIX/bin (/usr/local/bin), the service of the machine's init system (the systemd
# unit into /etc/systemd/system, or the OpenRC script into /etc/init.d), the defaults file
# /etc/default/staticpod (only where there is none: an edited one is never overwritten),
# and the directories staticpod uses. It enables and starts nothing, and running it again
# changes only what differs. --uninstall stops and disables the service and removes what
# install put there, but for a defaults file that was edited, the manifests, the images
# and the pods' data and logs (docs/operating.md, "Removing staticpod"). --root installs
# into another root (an image, a test) and leaves the running system alone.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=/
prefix=/usr/local
init=auto
action=install

usage() {
	echo "usage: $0 [--root DIR] [--prefix DIR] [--init systemd|openrc|none] [--uninstall]" >&2
	exit 2
}
die() {
	echo "install.sh: $*" >&2
	exit 1
}
say() {
	echo "$*"
}

while [ $# -gt 0 ]; do
	case $1 in
	--root) [ $# -ge 2 ] || usage; root=$2; shift ;;
	--root=*) root=${1#*=} ;;
	--prefix) [ $# -ge 2 ] || usage; prefix=$2; shift ;;
	--prefix=*) prefix=${1#*=} ;;
	--init) [ $# -ge 2 ] || usage; init=$2; shift ;;
	--init=*) init=${1#*=} ;;
	--uninstall) action=uninstall ;;
	-h | --help) usage ;;
	*) echo "install.sh: unknown argument $1" >&2; usage ;;
	esac
	shift
done
case $root in
/*) ;;
*) die "--root $root: not an absolute path" ;;
esac
case $prefix in
/*) ;;
*) die "--prefix $prefix: not an absolute path" ;;
esac
# R is prepended to every path: empty for the running system.
R=${root%/}
live=false
[ -z "$R" ] && live=true
bindir=$prefix/bin
unit=/etc/systemd/system/staticpod.service
openrc=/etc/init.d/staticpod
defaults=/etc/default/staticpod

if [ "$init" = auto ]; then
	if $live && [ -d /run/systemd/system ]; then
		init=systemd
	elif [ -x "$R/sbin/openrc-run" ] || [ -x "$R/usr/sbin/openrc-run" ]; then
		init=openrc
	elif [ -d "$R/lib/systemd/system" ] || [ -d "$R/usr/lib/systemd/system" ] || [ -d "$R/etc/systemd/system" ]; then
		init=systemd
	else
		init=none
	fi
fi
case $init in
systemd | openrc | none) ;;
*) die "--init $init: not systemd, openrc or none" ;;
esac

# put SRC DST MODE writes SRC to $R/DST unless it holds the same bytes already, through a
# file beside it and a rename: a running staticpod is replaced, not written over.
put() {
	if [ -f "$R$2" ] && cmp -s "$1" "$R$2"; then
		say "unchanged $R$2"
		return
	fi
	mkdir -p "$(dirname "$R$2")"
	cp "$1" "$R$2.new.$$"
	chmod "$3" "$R$2.new.$$"
	mv -f "$R$2.new.$$" "$R$2"
	say "installed $R$2"
}

# service FILE prints the service file with the binary's directory put in.
service() {
	sed -e "s|@BINDIR@|$bindir|g" -e "s|^command=\"/usr/local/bin/staticpod\"|command=\"$bindir/staticpod\"|" "$here/$1"
}

remove() {
	if [ -e "$R$1" ]; then
		rm -f "$R$1"
		say "removed $R$1"
	fi
}

install_all() {
	[ -f "$here/SHA256SUMS" ] || die "no SHA256SUMS in $here"
	command -v sha256sum >/dev/null 2>&1 || die "sha256sum is needed to check the files"
	for f in staticpod staticpod.service staticpod.openrc staticpod.default; do
		grep -Eq "^[0-9a-f]{64} [ *]$f\$" "$here/SHA256SUMS" || die "$here/SHA256SUMS lists no $f"
	done
	if ! out=$(cd "$here" && sha256sum -c SHA256SUMS 2>&1); then
		echo "$out" >&2
		die "the files in $here do not match their SHA256SUMS: download them again"
	fi
	say "checked $here against SHA256SUMS"
	if $live && ! "$here/staticpod" version >/dev/null 2>&1; then
		die "$here/staticpod does not run on this machine ($(uname -m)): take the tarball of its architecture"
	fi

	put "$here/staticpod" "$bindir/staticpod" 0755
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	case $init in
	systemd)
		service staticpod.service >"$tmp"
		put "$tmp" "$unit" 0644
		;;
	openrc)
		service staticpod.openrc >"$tmp"
		put "$tmp" "$openrc" 0755
		;;
	none) say "no init system found (--init): staticpod is not set up as a service" ;;
	esac
	if [ ! -e "$R$defaults" ]; then
		put "$here/staticpod.default" "$defaults" 0644
	elif cmp -s "$here/staticpod.default" "$R$defaults"; then
		say "unchanged $R$defaults"
	else
		say "kept $R$defaults: it was edited"
	fi
	for d in /etc/kubernetes/manifests /var/lib/staticpod /var/log/pods /var/log/containers; do
		mkdir -p "$R$d"
	done
	case $init in
	systemd)
		if $live && [ -d /run/systemd/system ]; then
			systemctl daemon-reload
		fi
		say "start it with: systemctl enable --now staticpod"
		;;
	openrc) say "start it with: rc-update add staticpod default && rc-service staticpod start" ;;
	esac
}

uninstall_all() {
	if $live; then
		if [ -e "$unit" ] && [ -d /run/systemd/system ]; then
			systemctl disable --now staticpod.service || true
		fi
		if [ -e "$openrc" ] && command -v rc-service >/dev/null 2>&1; then
			rc-service staticpod stop || true
			rc-update del staticpod default >/dev/null 2>&1 || true
		fi
	fi
	remove "$bindir/staticpod"
	remove "$unit"
	remove "$openrc"
	if [ -e "$R$defaults" ]; then
		if [ -f "$here/staticpod.default" ] && cmp -s "$here/staticpod.default" "$R$defaults"; then
			remove "$defaults"
		else
			say "kept $R$defaults: it was edited"
		fi
	fi
	if $live && [ -d /run/systemd/system ]; then
		systemctl daemon-reload
	fi
	say "the pods, if any, still run; /etc/kubernetes/manifests, /var/lib/staticpod and the logs are kept (docs/operating.md: Removing staticpod)"
}

case $action in
install) install_all ;;
uninstall) uninstall_all ;;
esac
