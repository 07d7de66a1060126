#!/usr/bin/env bash
# Builds staticpod the one way `make build` and the end-to-end tests do:
#
#   hack/build.sh OUT           the helper program into internal/helper/bin, where the
#                               staticpod binary embeds it from, then staticpod into OUT
#   hack/build.sh --helper OUT  the helper program alone, into OUT
#
# Both are static (CGO_ENABLED=0): the helper runs as the sandbox process in a root that
# holds nothing else. The helper is stripped (-s -w) and built with -trimpath: it runs
# once per container, and its size is read from disk by each. GO (go) and VERSION (dev)
# come from the environment, and so does GOARCH (and GOARM) for another architecture;
# COMMIT and DATE (the commit's time, UTC) are git's for the checkout unless set, and
# LDFLAGS are added to staticpod's (hack/release.sh: -s -w -buildid=). Version, commit
# and date go into internal/buildinfo, which `staticpod version` prints.
set -euo pipefail
GO=${GO:-go}
VERSION=${VERSION:-dev}
COMMIT=${COMMIT-$(git rev-parse HEAD 2>/dev/null || true)}
DATE=${DATE-$(TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || true)}
LDFLAGS=${LDFLAGS:-}
export CGO_ENABLED=0

# run prints a command, quoting the arguments that hold spaces, and runs it.
run() {
	local a shown=()
	for a in "$@"; do
		case $a in
		*" "*) shown+=("\"$a\"") ;;
		*) shown+=("$a") ;;
		esac
	done
	echo "${shown[*]}"
	"$@"
}

helper() {
	run "$GO" build -trimpath -ldflags "-s -w -buildid=" -o "$1" ./internal/helper/cmd/staticpod-helper
}

usage() {
	echo "usage: $0 [--helper] OUT" >&2
	exit 2
}

only_helper=false
if [ "${1:-}" = --helper ]; then
	only_helper=true
	shift
fi
[ $# -eq 1 ] || usage
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
case $out in
/*) ;;
*) out=$PWD/$out ;;
esac
out=${out#"$root"/} # shorter to read, and the same from the root
cd "$root"

if $only_helper; then
	helper "$out"
	exit 0
fi
embedded=internal/helper/bin/staticpod-helper-$("$GO" env GOARCH)
# Built beside and renamed into place: a build of staticpod running at the same time
# embeds the old program or the new one, never half of one. A dot file is not embedded.
tmp=$(dirname "$embedded")/.$(basename "$embedded").$$
trap 'rm -f "$tmp"' EXIT
helper "$tmp"
run mv -f "$tmp" "$embedded"
info=github.com/staticpod/staticpod/internal/buildinfo
run "$GO" build -ldflags "-X $info.Version=$VERSION -X $info.Commit=$COMMIT -X $info.Date=$DATE${LDFLAGS:+ $LDFLAGS}" -o "$out" .
