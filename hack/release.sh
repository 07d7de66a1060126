#!/usr/bin/env bash
# Builds the release of the commit checked out into DIST (make release):
#
#   staticpod-linux-{amd64,arm64,armv7}           static binaries, each carrying the
#                                                 helper program of its own architecture
#   staticpod-linux-ARCH.cdx.json                 its SBOM (CycloneDX, from the module graph)
#   staticpod_VERSION_ARCH.deb, staticpod-VERSION.ARCH.rpm
#   staticpod-linux-ARCH.tar.gz                   binary, systemd unit, OpenRC script,
#                                                 defaults file, install.sh, SHA256SUMS
#   SHA256SUMS                                    of every file above
#
# The same commit gives the same bytes (make release-check): the sources are copied out
# of the checkout (tracked and untracked files, not ignored ones: no stale helper program
# of another architecture gets embedded), built with -trimpath and no build ID, and every
# time inside an archive or package is the commit's (SOURCE_DATE_EPOCH), every owner root.
#
# GO (go), DIST (dist), VERSION (git describe), COMMIT and DATE come from the environment.
# nfpm and cyclonedx-gomod are installed at fixed versions into .cache/release-tools by the
# Go command, from the module proxy: they are tools of the release, not dependencies of
# staticpod's module.
set -euo pipefail
GO=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
DIST=${DIST:-dist}
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
VERSION=${VERSION:-$(git describe --tags --always --dirty)}
COMMIT=${COMMIT:-$(git rev-parse HEAD)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
DATE=${DATE:-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)}
export SOURCE_DATE_EPOCH TZ=UTC0 LC_ALL=C GOWORK=off CGO_ENABLED=0
unset GOARCH GOARM GOFLAGS

NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
CYCLONEDX=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
ARCHES="amd64 arm64 armv7"

# The packages' version: a tag's (v1.2.3 is 1.2.3, v1.2.3-4-gabc 1.2.3+4.gabc), else
# 0.0.0+git<commit date>.<commit> (and .dirty).
case $VERSION in
v[0-9]*) pkg_version=$(echo "${VERSION#v}" | sed 's/-/+/; s/-/./g') ;;
*) pkg_version=0.0.0+git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d).$(echo "$VERSION" | tr - .) ;;
esac

tools=$root/.cache/release-tools
if [ ! -x "$tools/nfpm" ] || [ ! -x "$tools/cyclonedx-gomod" ] || [ "$(cat "$tools/versions" 2>/dev/null)" != "$NFPM $CYCLONEDX" ]; then
	echo "installing $NFPM $CYCLONEDX into $tools"
	GOBIN=$tools "$GO" install "$NFPM"
	GOBIN=$tools "$GO" install "$CYCLONEDX"
	echo "$NFPM $CYCLONEDX" >"$tools/versions"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src"
git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$src"
rm -f "$src"/internal/helper/bin/staticpod-helper-* "$src"/internal/helper/bin/.staticpod-helper-*
# cyclonedx-gomod takes the main module's version from git: the copy gets the commit (and
# the tags on it) alone. The builds ignore it (-buildvcs=false: the linker sets the commit).
git -C "$src" init -q
git -C "$src" fetch -q --depth=1 "$root" HEAD
git -C "$src" update-ref HEAD FETCH_HEAD
for t in $(git tag --points-at HEAD); do
	git -C "$src" fetch -q --depth=1 "$root" "refs/tags/$t:refs/tags/$t"
done

# goarch ARCH prints GOARCH and GOARM; debarch, rpmarch nfpm's architecture name.
goenv() {
	case $1 in
	armv7) echo "GOARCH=arm GOARM=7" ;;
	*) echo "GOARCH=$1" ;;
	esac
}
nfpmarch() {
	case $1 in
	armv7) echo arm7 ;;
	*) echo "$1" ;;
	esac
}

rm -f "$DIST"/staticpod* "$DIST"/SHA256SUMS
for arch in $ARCHES; do
	bin=$DIST/staticpod-linux-$arch
	echo "== linux/$arch"
	# One architecture's helper at a time: the binary embeds every file in the directory.
	rm -f "$src"/internal/helper/bin/staticpod-helper-*
	(
		cd "$src"
		# shellcheck disable=SC2046 # GOARCH=... GOARM=...
		export $(goenv "$arch")
		GO=$GO VERSION=$VERSION COMMIT=$COMMIT DATE=$DATE GOFLAGS="-trimpath -buildvcs=false" \
			LDFLAGS="-s -w -buildid=" ./hack/build.sh "$bin"
		"$tools/cyclonedx-gomod" app -json -licenses -noserial -notimestamp -output "$bin.cdx.json" . \
			2>"$work/sbom.log" || { cat "$work/sbom.log" >&2; exit 1; }
	)
done

# What the packages and tarballs carry beside the binary, the same for every architecture;
# the man pages and completion come from the binary of this machine when it is one of them.
common=$work/common
install -d -m 0755 "$common/man" "$common/doc"
host=$DIST/staticpod-linux-$("$GO" env GOHOSTARCH)
[ -x "$host" ] || host="$GO run ./"
(cd "$src" && $host man "$common/man" && $host completion bash >"$common/staticpod.bash")
gzip -n -9 "$common"/man/*.8
install -m 0644 README.md docs/operating.md docs/reference.md "$common/doc/"
install -m 0644 contrib/default/staticpod "$common/staticpod.default"
install -m 0755 contrib/packaging/reload.sh "$common/reload.sh"
chmod 0644 "$common/staticpod.bash" "$common"/man/*.gz

for arch in $ARCHES; do
	stage=$work/pkg-$arch
	cp -a "$common" "$stage"
	install -m 0755 "$DIST/staticpod-linux-$arch" "$stage/staticpod"
	sed 's|@BINDIR@|/usr/bin|' contrib/systemd/staticpod.service >"$stage/staticpod.service"
	chmod 0644 "$stage/staticpod.service"
	for p in deb rpm; do
		(cd "$stage" && NFPM_ARCH=$(nfpmarch "$arch") PKG_VERSION=$pkg_version \
			"$tools/nfpm" package -f "$root/contrib/packaging/nfpm.yaml" -p "$p" -t "$DIST/")
	done

	# The tarball: what install.sh installs, under staticpod-linux-ARCH/.
	name=staticpod-linux-$arch
	tree=$work/tar-$arch/$name
	install -d -m 0755 "$tree"
	install -m 0755 "$DIST/$name" "$tree/staticpod"
	install -m 0644 contrib/systemd/staticpod.service "$tree/staticpod.service"
	install -m 0755 contrib/openrc/staticpod "$tree/staticpod.openrc"
	install -m 0644 contrib/default/staticpod "$tree/staticpod.default"
	install -m 0755 contrib/install.sh "$tree/install.sh"
	install -m 0644 README.md "$tree/README.md"
	(cd "$tree" && sha256sum staticpod staticpod.service staticpod.openrc staticpod.default >SHA256SUMS)
	chmod 0644 "$tree/SHA256SUMS"
	tar -C "$work/tar-$arch" --sort=name --format=gnu --owner=0 --group=0 --numeric-owner \
		--mtime="@$SOURCE_DATE_EPOCH" -cf - "$name" | gzip -n -9 >"$DIST/$name.tar.gz"
done

(cd "$DIST" && find . -maxdepth 1 -type f -name 'staticpod*' -printf '%f\n' | sort | xargs sha256sum >SHA256SUMS)
echo "== $DIST"
(cd "$DIST" && ls -l)
