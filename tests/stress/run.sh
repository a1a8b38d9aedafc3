#!/bin/sh
# run.sh - runs the stress driver with the library (and a sanitizer's runtime first).
# usage: tests/stress/run.sh BUILD [stress options...]   (TB_SANITIZE=address|undefined|thread)
set -u
build=${1:?usage: run.sh BUILD [options]}
shift
lib=$(cd "$build/lib" && pwd)/libtimebox.so
preload=$lib
case "${TB_SANITIZE:-}" in
"") ;;
address) preload="$(${CC:-cc} -print-file-name=libasan.so) $lib"
	export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 ;;
undefined) preload="$(${CC:-cc} -print-file-name=libubsan.so) $lib"
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ;;
thread) preload="$(${CC:-cc} -print-file-name=libtsan.so) $lib"
	# die_after_fork=0: a forked child (no exec) starts the library's watchdog thread.
	export TSAN_OPTIONS="${TSAN_OPTIONS:-exitcode=66 die_after_fork=0 suppressions=$(cd "$(dirname "$0")" && pwd)/tsan.supp}" ;;
*) echo "run.sh: TB_SANITIZE=$TB_SANITIZE: expected address, undefined or thread" >&2; exit 2 ;;
esac
export STRESS_PRELOAD="$preload"
exec "$build/tests/stress/stress" "$@"
