#!/bin/sh
# musl_libconfig.sh - libconfig built with musl-gcc, for the musl build of the library
# (make MUSL=1): a static, position-independent libconfig.a that the .so links in, so that a
# musl container needs no libconfig of its own.
# usage: tests/musl_libconfig.sh OUTDIR     installs OUTDIR/lib/libconfig.a, OUTDIR/include/
# The source is Debian's own package (the one libconfig-dev is built from), fetched with
# apt-get source into OUTDIR/src through a private source list, so that the machine's apt
# configuration needs no deb-src line and is left as it was; dpkg-source checks it against
# the .dsc's checksums. LIBCONFIG_DSC=path/to/libconfig_*.dsc uses a copy already here
# (a machine without network).
set -eu

out=$1
mkdir -p "$out/src"
out=$(cd "$out" && pwd)
src=$out/src

fail() {
	echo "timebox: musl libconfig: $*" >&2
	exit 1
}

command -v musl-gcc >/dev/null || fail "musl-gcc is missing; install it with: sudo apt-get install -y musl-tools musl-dev"
command -v dpkg-source >/dev/null || fail "dpkg-source is missing; install it with: sudo apt-get install -y dpkg-dev"

dsc=${LIBCONFIG_DSC:-}
if [ -z "$dsc" ]; then
	dsc=$(ls "$src"/libconfig_*.dsc 2>/dev/null | head -n 1 || true)
fi
if [ -z "$dsc" ]; then
	# shellcheck disable=SC1091 # the host's own release names the suite
	suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
	mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
	mkdir -p "$src/apt/lists/partial"
	echo "deb-src $mirror $suite main" > "$src/apt/sources.list"
	apt_opts="-o Dir::Etc::SourceList=$src/apt/sources.list -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists=$src/apt/lists -o Debug::NoDropPrivs=true -qq"
	# shellcheck disable=SC2086 # one word per option
	if ! apt-get $apt_opts update >"$src/apt/log" 2>&1 ||
		! (cd "$src" && apt-get $apt_opts source --download-only libconfig) >>"$src/apt/log" 2>&1; then
		fail "cannot fetch Debian's libconfig source from $mirror ($suite) with apt-get source (see $src/apt/log); give a local copy with LIBCONFIG_DSC=path/to/libconfig_VERSION.dsc"
	fi
	dsc=$(ls "$src"/libconfig_*.dsc | head -n 1)
fi

rm -rf "$src/tree"
dpkg-source --no-copy -x "$dsc" "$src/tree" >"$src/unpack.log" 2>&1 ||
	fail "dpkg-source -x $dsc failed (see $src/unpack.log)"
cd "$src/tree"
{
	./configure CC=musl-gcc CFLAGS="-O2 -g -fPIC" --disable-shared --enable-static --with-pic \
		--disable-cxx --disable-examples --prefix="$out" &&
		make -C lib -j2 && make -C lib install
} >"$src/build.log" 2>&1 || fail "building libconfig with musl-gcc failed (see $src/build.log)"
rm -f "$out/lib/libconfig.la"
echo "timebox: musl libconfig: $out/lib/libconfig.a from $(basename "$dsc")"
