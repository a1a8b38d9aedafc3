#!/bin/sh
# run.sh - runs libFuzzer targets for a while each and reports what each one did.
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...   (make fuzz / make fuzz-smoke)
# Each target starts from its seed corpus tests/fuzz/corpus/<target>/ (read only: the inputs
# it finds go to a temporary directory, kept under BUILD_DIR/fuzz-out/<target>/ afterwards
# for whoever wants to add some to the seeds). A crash, a sanitizer report, a broken
# invariant, a timeout, an out-of-memory or a leak (checked by replaying every kept input
# once at the end) fails that target; its input is kept as an
# artifact there too, with the command that replays it. Exits 1 when any target failed.
set -u

build=$1
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
pass=0
fail=0
failed=""
# Leaks inside libconfig are its own (lsan.supp); any other leak fails the target.
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export LSAN_OPTIONS

for t in "$@"; do
	bin=$build/fuzz_$t
	seeds=$here/corpus/$t
	out=$build/fuzz-out/$t
	rm -rf "$out"
	mkdir -p "$out/corpus" "$out/artifacts"
	log=$out/log
	dict=""
	[ -f "$here/$t.dict" ] && dict="-dict=$here/$t.dict"
	# libconfig leaks on some syntax errors (lsan.supp), so that a leak check would run
	# after nearly every config input and cut the speed twenty-fold: the config target
	# checks leaks in the replay below instead, once over every input it kept.
	leaks=""
	[ "$t" = config ] && leaks="-detect_leaks=0"
	echo "== fuzz_$t: ${seconds}s from $(ls "$seeds" | wc -l) seeds"
	# A hang inside one input is caught by -timeout; the outer timeout is a last resort.
	# shellcheck disable=SC2086 # $dict is empty or one word
	timeout -k 10 $((seconds + 300)) "$bin" -max_total_time="$seconds" -timeout=10 \
		-rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$out/artifacts/" \
		$dict $leaks "$out/corpus" "$seeds" >"$log" 2>&1
	rc=$?
	# Every input kept and every seed once more, with leak detection on (at exit).
	if [ $rc -eq 0 ]; then
		find "$out/corpus" "$seeds" -type f -print0 |
			xargs -0 -r timeout -k 10 600 "$bin" -timeout=10 \
				-artifact_prefix="$out/artifacts/" >"$out/replay.log" 2>&1 ||
			rc=$?
	fi
	# "#123456 DONE cov: 312 ft: 1201 corp: 240/9133b ..." (or the last progress line)
	last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p')
	echo "fuzz_$t: seconds=$seconds execs=${execs:-?} cov=${cov:-?} ft=${ft:-?}" \
		"corpus=${corp:-?} new_inputs=$(ls "$out/corpus" | wc -l) rc=$rc"
	if [ $rc -eq 0 ] && [ -z "$(ls "$out/artifacts")" ]; then
		pass=$((pass + 1))
		continue
	fi
	fail=$((fail + 1))
	failed="$failed fuzz_$t"
	echo "fuzz_$t FAILED; the end of $log (and replay.log beside it):"
	grep -v '^#[0-9]' "$log" | tail -n 40
	[ -f "$out/replay.log" ] && grep -v '^Running:\|^Executed' "$out/replay.log" | tail -n 20
	for a in "$out"/artifacts/*; do
		[ -e "$a" ] || continue
		echo "replay: $bin $a"
		# The input itself, so that a failure on another machine can be replayed here.
		[ "$(wc -c <"$a")" -le 8192 ] && echo "input (base64): $(base64 -w0 "$a")"
	done
done

echo
echo "fuzz: $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
