#!/usr/bin/env bash
# shellcheck disable=SC2015 # `cond && ok || ko` is safe here: ok always succeeds
# test_launcher.sh - the `timebox` launcher from the outside: exit codes, messages, the
# environment it hands over, and how it finds the library. Needs only a built launcher.
# usage: tests/unit/test_launcher.sh [BUILD_DIR]   (default: build)
set -uo pipefail

build=${1:-${TB_BUILD:-build}}
tb="$(cd "$(dirname "$build/bin/timebox")" && pwd)/timebox"
# A sanitized launcher (build/san-address) must tolerate the LD_PRELOAD the tests give it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-verify_asan_link_order=0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# A real, empty shared object, so that ld.so loads it without complaint.
echo 'int tb_test_placeholder;' > "$tmp/empty.c"
cc -shared -fPIC -o "$tmp/libtimebox.so" "$tmp/empty.c" || exit 1
lib="$tmp/libtimebox.so"

ok() { passed=$((passed + 1)); }
ko() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect STATUS PATTERN -- ARGS: runs the launcher, checks its status and that its output
# (stdout and stderr together) matches PATTERN (an extended regex; empty: anything).
expect() {
	local want=$1 pattern=$2 out rc
	shift 3
	out=$(env -u TIMEBOX_LIBRARY TIMEBOX_LIBRARY="$lib" "$tb" "$@" 2>&1)
	rc=$?
	if [ "$rc" != "$want" ]; then
		ko "timebox $* exited $rc, want $want: $out"
	elif [ -n "$pattern" ] && ! grep -Eq -- "$pattern" <<<"$out"; then
		ko "timebox $*: output lacks /$pattern/: $out"
	else
		ok
	fi
}

expect 0 '^timebox [0-9]+\.[0-9]+\.[0-9]+$' -- --version
expect 0 'TIMEBOX_READ_TIMEOUT' -- --help
expect 0 '--strict' -- run --help
expect 2 'usage:' --
expect 2 'unknown command' -- frobnicate
expect 2 'no command given' -- run --deadline 1s
expect 2 'unknown option' -- run --dedline 1s -- true
expect 2 '--deadline needs a value' -- run --deadline
expect 2 '^timebox: --read-timeout 250: a duration needs a unit, e.g. 250ms$' \
	-- run --read-timeout 250 -- true
expect 0 '' -- run --scope=request --propagate --deadline-header X-Budget-Ms -- true
expect 2 '^timebox: --deadline-header X Budget: a deadline header is a header name' \
	-- run --deadline-header 'X Budget' -- true
expect 0 '' -- run --read-timeout=250ms --strict true
expect 1 '' -- run -- false
expect 3 '' -- run sh -c 'exit 3'
expect 127 "cannot run '/nonexistent'" -- run -- /nonexistent
printf 'echo hi\n' > "$tmp/not-executable"
chmod 644 "$tmp/not-executable"
expect 126 'Permission denied' -- run -- "$tmp/not-executable"

# The environment is validated as strictly as the options.
out=$(TIMEBOX_DEADLINE=5 TIMEBOX_LIBRARY="$lib" "$tb" run -- true 2>&1)
[ $? = 2 ] && grep -q '^timebox: TIMEBOX_DEADLINE=5: a duration needs a unit' <<<"$out" &&
	ok || ko "bad env value: $out"
out=$(TIMEBOX_READ_TIMOUT=1s TIMEBOX_LIBRARY="$lib" "$tb" run -- true 2>&1)
[ $? = 2 ] && grep -q 'did you mean TIMEBOX_READ_TIMEOUT' <<<"$out" && ok || ko "typo: $out"
TIMEBOX_MAX_CONNS=5 TIMEBOX_LIBRARY="$lib" "$tb" run -- true && ok || ko "gate settings refused"

# The downstream's protection: --breaker is a flag, percentages take "%", auto is a size.
expect 0 '--breaker-open-max DURATION' -- --help
expect 0 '--max-conns N\|auto' -- --help
out=$(env -u TIMEBOX_LIBRARY TIMEBOX_LIBRARY="$lib" "$tb" run --print-env --breaker \
	--breaker-rate 40% --retry-budget=20 --max-conns auto --breaker-errno EHOSTUNREACH 2>&1)
grep -q '^TIMEBOX_BREAKER=1$' <<<"$out" && grep -q '^TIMEBOX_BREAKER_RATE=40%$' <<<"$out" &&
	grep -q '^TIMEBOX_RETRY_BUDGET=20$' <<<"$out" && grep -q '^TIMEBOX_MAX_CONNS=auto$' <<<"$out" &&
	grep -q '^TIMEBOX_BREAKER_ERRNO=EHOSTUNREACH$' <<<"$out" && ok || ko "protection options: $out"
expect 0 '' -- run --breaker=off --breaker-failures 5 -- true
expect 2 '^timebox: --breaker-rate 150%: a percentage is a whole number from 1 to 100' \
	-- run --breaker-rate 150% -- true
expect 2 '^timebox: --breaker-open off: this setting cannot be off' -- run --breaker-open off -- true
expect 2 '^timebox: --breaker-errno EPERM: an errno is ECONNREFUSED' -- run --breaker-errno EPERM -- true
expect 2 '^timebox: --max-conns lots: a gate.s size is a whole number from 1 to 1000000, auto' \
	-- run --max-conns lots -- true
out=$(TIMEBOX_BREAKER_HTTP=4xx TIMEBOX_LIBRARY="$lib" "$tb" run -- true 2>&1)
[ $? = 2 ] && grep -q '^timebox: TIMEBOX_BREAKER_HTTP=4xx: breaker_http is gateway' <<<"$out" &&
	ok || ko "bad breaker_http: $out"

# The configuration file is read before anything runs; its name reaches the program absolute.
printf 'defaults = {\n  read_timeout = "250ms";\n};\n' > "$tmp/good.conf"
printf 'defaults = {\n  read_timeout = 250;\n};\n' > "$tmp/bad.conf"
out=$(cd "$tmp" && TIMEBOX_LIBRARY="$lib" "$tb" run --config good.conf -- printenv TIMEBOX_CONFIG)
[ "$out" = "$tmp/good.conf" ] && ok || ko "--config not made absolute: $out"
expect 2 "bad.conf:2: read_timeout = 250: a duration needs a unit" -- run --config "$tmp/bad.conf" true
out=$(TIMEBOX_CONFIG=/nonexistent.conf TIMEBOX_LIBRARY="$lib" "$tb" run -- true 2>&1)
[ $? = 2 ] && grep -q '^timebox: /nonexistent.conf: cannot read the file' <<<"$out" && ok ||
	ko "missing config: $out"

# Options beat the environment and reach the command; the library is appended once.
out=$(TIMEBOX_READ_TIMEOUT=9s TIMEBOX_LIBRARY="$lib" LD_PRELOAD='' "$tb" run \
	--read-timeout 250ms --strict -- env)
grep -qx 'TIMEBOX_READ_TIMEOUT=250ms' <<<"$out" && ok || ko "option does not beat env"
grep -qx 'TIMEBOX_STRICT=1' <<<"$out" && ok || ko "--strict not exported"
grep -qx "LD_PRELOAD=$lib" <<<"$out" && ok || ko "LD_PRELOAD: $(grep LD_PRELOAD <<<"$out")"
cp "$lib" "$tmp/other.so"
out=$(LD_PRELOAD="$tmp/other.so" TIMEBOX_LIBRARY="$lib" "$tb" run printenv LD_PRELOAD)
[ "$out" = "$tmp/other.so:$lib" ] && ok || ko "append: $out"
out=$(LD_PRELOAD="$lib" TIMEBOX_LIBRARY="$lib" "$tb" run printenv LD_PRELOAD)
[ "$out" = "$lib" ] && ok || ko "added twice: $out"

# Library lookup beside the launcher: build tree, then installed tree, else a clear error.
mkdir -p "$tmp/tree/bin" "$tmp/tree/lib/timebox"
cp "$tb" "$tmp/tree/bin/timebox"
out=$(env -u TIMEBOX_LIBRARY "$tmp/tree/bin/timebox" run true 2>&1)
[ $? = 2 ] && grep -q 'cannot find libtimebox.so' <<<"$out" && ok || ko "no library: $out"
cp "$lib" "$tmp/tree/lib/timebox/libtimebox.so"
out=$(env -u TIMEBOX_LIBRARY LD_PRELOAD='' "$tmp/tree/bin/timebox" run printenv LD_PRELOAD)
[ "$out" = "$tmp/tree/lib/timebox/libtimebox.so" ] && ok || ko "installed tree: $out"
cp "$lib" "$tmp/tree/lib/libtimebox.so"
out=$(env -u TIMEBOX_LIBRARY LD_PRELOAD='' "$tmp/tree/bin/timebox" run printenv LD_PRELOAD)
[ "$out" = "$tmp/tree/lib/libtimebox.so" ] && ok || ko "build tree: $out"
out=$(TIMEBOX_LIBRARY=/nonexistent.so "$tb" run true 2>&1)
[ $? = 2 ] && grep -q 'TIMEBOX_LIBRARY=/nonexistent.so' <<<"$out" && ok || ko "bad TIMEBOX_LIBRARY"

# Programs LD_PRELOAD cannot reach are refused before exec, with the reason; --force runs them.
printf 'int main(void) { return 0; }\n' > "$tmp/prog.c"
cc -o "$tmp/dynamic" "$tmp/prog.c" || exit 1
expect 0 '' -- run "$tmp/dynamic"
if cc -static -o "$tmp/static" "$tmp/prog.c" 2>/dev/null; then
	expect 2 'static is statically linked: there is no dynamic loader' -- run "$tmp/static"
	expect 0 '' -- run --force "$tmp/static"
	printf '#!%s\n' "$tmp/static" > "$tmp/script"
	chmod +x "$tmp/script"
	expect 2 'script is a script run by .*static is statically linked' -- run "$tmp/script"
else
	echo "note: no static libc here; static-binary checks not run"
fi
objcopy --add-section .go.buildinfo="$tmp/prog.c" "$tmp/dynamic" "$tmp/gofake"
chmod +x "$tmp/gofake"
expect 2 'gofake is a Go program: Go makes its network calls with raw system calls' \
	-- run "$tmp/gofake"
cp "$tmp/dynamic" "$tmp/setuid"
if [ "$(id -u)" = 0 ]; then chown 65534 "$tmp/setuid"; fi
chmod 4755 "$tmp/setuid"
if [ "$(stat -c %u "$tmp/setuid")" != "$(id -u)" ]; then
	expect 2 'setuid is setuid: the dynamic loader runs it in secure mode' -- run "$tmp/setuid"
	expect 0 '' -- run --force "$tmp/setuid"
else
	echo "note: cannot give a file away here; setuid check not run"
fi
printf '#!/usr/bin/env sh\nexit 0\n' > "$tmp/envscript"
chmod +x "$tmp/envscript"
expect 0 '' -- run "$tmp/envscript"

# --print-env: what the program would get, without running anything.
out=$(env -u TIMEBOX_DEADLINE LD_PRELOAD='' TIMEBOX_LIBRARY="$lib" TIMEBOX_READ_TIMEOUT=1s \
	"$tb" run --print-env --deadline 300ms)
[ "$out" = "LD_PRELOAD=$lib
TIMEBOX_READ_TIMEOUT=1s
TIMEBOX_DEADLINE=300ms" ] && ok || ko "--print-env: $out"

echo "launcher: $passed passed, $failed failed"
[ "$failed" = 0 ]
