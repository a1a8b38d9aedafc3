#!/usr/bin/env bash
# run.sh - runs every regression program of BUILD/tests/regress under a time limit.
# usage: tests/regress/run.sh BUILD [FILTER]
# TBR_JOBS=N runs N programs at once (default 1; make regress runs 2): most of them wait on
# a stalled peer, and none measures throughput; each keeps its own output and verdict.
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
jobs=${TBR_JOBS:-1}
work=$(mktemp -d)

# One program: its output, exit status and seconds under $work/<name>.*
one() {
	local t=$1 name start rc
	name=$(basename "$t")
	start=$(date +%s.%N)
	timeout -k 5 "$limit" "$t" >"$work/$name.out" 2>&1
	rc=$?
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }' >"$work/$name.secs"
	echo $rc >"$work/$name.rc.tmp" && mv "$work/$name.rc.tmp" "$work/$name.rc"
}

# The verdict of one finished program, printed as it comes.
report() {
	local name=$1 rc secs out
	rc=$(cat "$work/$name.rc")
	secs=$(cat "$work/$name.secs")
	out=$work/$name.out
	case $rc in
	0) pass=$((pass + 1)); printf 'PASS regress:%s (%.2f s)\n' "$name" "$secs" ;;
	77) skip=$((skip + 1)); printf 'SKIP regress:%s: %s\n' "$name" "$(grep '^SKIP' "$out" | head -n 1)" ;;
	*) fail=$((fail + 1)); failed="$failed $name"
		[ "$rc" = 124 ] && echo "(killed after ${limit} s)" >>"$out"
		printf 'FAIL regress:%s (exit %s)\n' "$name" "$rc"; sed 's/^/    /' "$out" | tail -n 30 ;;
	esac
}

names=()
for t in "$build"/tests/regress/*; do
	[ -x "$t" ] && [ -f "$t" ] || continue
	name=$(basename "$t")
	case "$name" in *"$filter"*) ;; *) continue ;; esac
	names+=("$name")
done
running=0
reported=0
for name in "${names[@]}"; do
	one "$build/tests/regress/$name" &
	running=$((running + 1))
	if [ $running -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	# Report, in order, every program that has finished.
	while [ $reported -lt ${#names[@]} ] && [ -f "$work/${names[$reported]}.rc" ]; do
		report "${names[$reported]}"
		reported=$((reported + 1))
	done
done
wait
while [ $reported -lt ${#names[@]} ]; do
	report "${names[$reported]}"
	reported=$((reported + 1))
done
rm -rf "$work"
echo
echo "regress: $pass passed, $fail failed, $skip skipped"
[ -z "$failed" ] || echo "failed:$failed"
[ $fail -eq 0 ]
