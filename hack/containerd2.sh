#!/usr/bin/env bash
# make test-containerd2: the containerd-backed tests again, against a containerd 2.x
# daemon and its runc shim, so that CI gates on 2.x as well as on the distribution's 1.6.
#
#   hack/containerd2.sh build   # build (or reuse) the binaries; prints their directory
#   hack/containerd2.sh test    # build or reuse them, then run the tests against them
#
# The daemon and shim are built from the Go module proxy with `go install ...@VERSION`
# (containerd's own build tags for a host without btrfs, devmapper or ZFS libraries; the
# shim static, as containerd's releases build it) into CACHE/VERSION/bin, once per
# version: later runs on the same machine reuse them. A build goes to a temporary
# directory first and is renamed into place whole, so an interrupted build leaves
# nothing that a later run would take for a finished one.
#
# The tests run are those of every package whose tests start a containerd: through
# internal/testenv (testenv.Shared, testenv.Start, testenv.StartDaemon), or the one on
# PATH (exec.LookPath("containerd"), `staticpod --start-containerd`). They get the 2.x
# binary through STATICPOD_TEST_CONTAINERD and its shim first on PATH, where containerd
# looks shims up. promtool (which containerdrt's stats test runs) comes from .cache/bin,
# where `hack/deps.sh test` puts it, as for make test.
#
# Environment: CONTAINERD2_VERSION (default v2.4.2), CONTAINERD2_CACHE (default
# /var/cache/staticpod-containerd), GO (default go), GOTESTFLAGS (added to go test).
set -euo pipefail
shopt -s inherit_errexit # a failed build fails bin=$(build) too
repo=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
version=${CONTAINERD2_VERSION:-v2.4.2}
cache=${CONTAINERD2_CACHE:-/var/cache/staticpod-containerd}
module=github.com/containerd/containerd/v2
tags="no_btrfs no_devmapper no_zfs"

# build prints the directory holding containerd and containerd-shim-runc-v2 of version,
# building them first unless a finished build is in the cache. Its progress goes to
# stderr.
build() {
	local bin=$cache/$version/bin started tmp
	mkdir -p "$cache"
	exec 9>"$cache/lock" # one build at a time per cache
	flock 9
	if [ -x "$bin/containerd" ] && [ -x "$bin/containerd-shim-runc-v2" ]; then
		echo "containerd $version: cached in $bin" >&2
	else
		started=$(date +%s)
		echo "containerd $version: building into $bin" >&2
		tmp=$(mktemp -d "$cache/$version.build.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		GOBIN=$tmp/bin "$GO" install -trimpath -tags "$tags" \
			-ldflags "-X $module/version.Version=$version" "$module/cmd/containerd@$version"
		GOBIN=$tmp/bin CGO_ENABLED=0 "$GO" install -trimpath -tags "$tags" \
			-ldflags "-X $module/version.Version=$version" "$module/cmd/containerd-shim-runc-v2@$version"
		mkdir -p "$cache/$version"
		rm -rf "$bin"
		mv "$tmp/bin" "$bin"
		rm -rf "$tmp"
		trap - EXIT
		echo "containerd $version: built in $(($(date +%s) - started)) s" >&2
	fi
	# A cache entry must hold the version it is named for.
	local got
	got=$("$bin/containerd" --version)
	echo "$got" >&2
	case $got in
	*" $version "* | *" $version") ;;
	*)
		echo "containerd $version: $bin/containerd says \"$got\"; remove $cache/$version" >&2
		exit 1
		;;
	esac
	exec 9>&-
	echo "$bin"
}

# packages lists the packages whose tests start a containerd, as ./dir.
packages() {
	cd "$repo"
	git ls-files -co --exclude-standard '*_test.go' | xargs grep -lE \
		'testenv\.(Shared|Start|StartWith|StartDaemon|StartDaemonWith)\b|LookPath\("containerd"\)|"--start-containerd"' |
		xargs -n1 dirname | sed 's|^|./|' | sort -u
}

case ${1:-} in
build)
	build
	;;
test)
	started=$(date +%s)
	bin=$(build)
	echo "containerd $version: ready in $(($(date +%s) - started)) s"
	mapfile -t pkgs < <(packages)
	if [ "${#pkgs[@]}" -eq 0 ]; then
		echo "containerd $version: found no package whose tests start a containerd" >&2
		exit 1
	fi
	echo "containerd $version: testing ${pkgs[*]}"
	started=$(date +%s)
	status=0
	cd "$repo"
	# e2e took 568 s on 2.4.2 on a loaded 2-core machine: near go test's default bound
	# of 10 minutes per package, which would end it as a failure though nothing hangs.
	# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
	PATH="$bin:$repo/.cache/bin:$PATH" STATICPOD_TEST_CONTAINERD="$bin/containerd" \
		"$GO" test -count=1 -timeout 30m ${GOTESTFLAGS:-} "${pkgs[@]}" || status=$?
	echo "containerd $version: tests took $(($(date +%s) - started)) s"
	exit "$status"
	;;
*)
	echo "usage: $0 build|test" >&2
	exit 2
	;;
esac
