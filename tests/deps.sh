#!/bin/sh
# deps.sh - the Debian packages timebox needs, checked and (as root) installed.
# usage: tests/deps.sh check   build and test (make, make test)
#        tests/deps.sh bench   the above plus the benchmark's tools
#        tests/deps.sh fuzz    what make fuzz / make fuzz-smoke need (clang 14 and libFuzzer)
#        tests/deps.sh deb     what make deb needs (debhelper; lintian to check the package)
#        tests/deps.sh conformance   the suites of make conformance (Debian's CPython test
#                              suite, GLib's installed tests); check includes them, since
#                              make test runs a subset
# Exits 0 silently when everything is present. When something is missing it installs it if
# running as root and TIMEBOX_NO_INSTALL is unset; otherwise it names the packages, exit 1.
set -eu

# The conformance tier runs Debian's own interpreter against its own test suite, and GLib's
# installed tests (C programs with GSocket, GResolver, GDBus, a poll loop).
CONFORMANCE_PKGS="python3.11 libpython3.11-testsuite libglib2.0-tests iproute2 util-linux"
CHECK_PKGS="build-essential pkg-config libconfig-dev libcmocka-dev debhelper lintian curl wget netcat-openbsd
musl-tools musl-dev dpkg-dev locales
redis-server redis-tools perl python3 iproute2 strace man-db php-cli php-curl php-pgsql tnftp
nodejs openjdk-17-jdk-headless postgresql mariadb-server mariadb-client openssh-server
openssh-client openssl ruby libjemalloc2 libtcmalloc-minimal4 libevent-dev python3-aiohttp
$CONFORMANCE_PKGS"
BENCH_PKGS="haproxy gnuplot-nox valgrind linux-perf"
# libFuzzer (libclang_rt.fuzzer) ships in libclang-rt-14-dev; the config target links libconfig.
FUZZ_PKGS="make clang-14 libclang-rt-14-dev libconfig-dev"
DEB_PKGS="build-essential debhelper dpkg-dev libconfig-dev libcmocka-dev lintian"

case "${1:-}" in
check) wanted=$CHECK_PKGS ;;
bench) wanted="$CHECK_PKGS $BENCH_PKGS" ;;
fuzz) wanted=$FUZZ_PKGS ;;
deb) wanted=$DEB_PKGS ;;
conformance) wanted=$CONFORMANCE_PKGS ;;
*)
	echo "usage: $0 check|bench|fuzz|deb|conformance" >&2
	exit 2
	;;
esac

# dpkg -s succeeds for a removed package whose config files remain, so read its status.
installed() {
	dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'
}

missing=""
for pkg in $wanted; do
	installed "$pkg" || missing="$missing $pkg"
done
missing=${missing# }
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && [ -z "${TIMEBOX_NO_INSTALL:-}" ]; then
	echo "timebox: installing missing Debian packages: $missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -qq --no-install-recommends $missing
	exit 0
fi

echo "timebox: missing Debian packages: $missing; install them with:" \
	"sudo apt-get install -y $missing" >&2
exit 1
