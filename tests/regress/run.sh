#!/bin/sh
# run.sh - runs every regression program of BUILD/tests/regress under a time limit.
# usage: tests/regress/run.sh BUILD [FILTER]
# Each program re-executes itself under the library (regress.h); exit 0 passes, 77 skips
# (its reason is printed), anything else - a failed check, a crash, the time limit - fails.
set -u
build=${1:?usage: run.sh BUILD [FILTER]}
filter=${2:-}
limit=${TBR_LIMIT:-60}
lib=$(cd "$build/lib" && pwd)/libtimebox.so

preload=$lib
case "${TB_SANITIZE:-}" in
"") ;;
address) preload="$(${CC:-cc} -print-file-name=libasan.so) $lib"
	export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 ;;
undefined) preload="$(${CC:-cc} -print-file-name=libubsan.so) $lib"
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ;;
thread) preload="$(${CC:-cc} -print-file-name=libtsan.so) $lib"
	# A child forked from a process with threads (the watchdog's) starts the watchdog of
	# its own: TSan cannot check a child of a multi-threaded fork, and by default dies.
	export TSAN_OPTIONS="${TSAN_OPTIONS:-die_after_fork=0}" ;;
*) echo "run.sh: TB_SANITIZE=$TB_SANITIZE: expected address, undefined or thread" >&2; exit 2 ;;
esac
export TBR_PRELOAD="$preload"
unset TBR_CHILD

pass=0 fail=0 skip=0 failed=""
out=$(mktemp)
for t in "$build"/tests/regress/*; do
	[ -x "$t" ] && [ -f "$t" ] || continue
	name=$(basename "$t")
	case "$name" in *"$filter"*) ;; *) continue ;; esac
	start=$(date +%s.%N)
	timeout -k 5 "$limit" "$t" >"$out" 2>&1
	rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
	case $rc in
	0) pass=$((pass + 1)); printf 'PASS regress:%s (%.2f s)\n' "$name" "$secs" ;;
	77) skip=$((skip + 1)); printf 'SKIP regress:%s: %s\n' "$name" "$(grep '^SKIP' "$out" | head -n 1)" ;;
	*) fail=$((fail + 1)); failed="$failed $name"
		[ $rc = 124 ] && echo "(killed after ${limit} s)" >>"$out"
		printf 'FAIL regress:%s (exit %s)\n' "$name" "$rc"; sed 's/^/    /' "$out" | tail -n 30 ;;
	esac
done
rm -f "$out"
echo
echo "regress: $pass passed, $fail failed, $skip skipped"
[ -z "$failed" ] || echo "failed:$failed"
[ $fail -eq 0 ]
