#!/bin/sh
# check_exports.sh - internal code never calls an exported name: every libc call the
# library makes goes through tb_real (shim/real.h). Run by make check-exports.
# usage: tests/check_exports.sh BUILD        check BUILD/obj against BUILD/exports.map
#        tests/check_exports.sh --self-test  show that the check catches a violation
#
# The library exports the names it hooks (read, close, fclose...). A call to one of them
# from inside the library binds, through the global scope, to timebox's own hook - or to
# whatever interposes ahead of it - instead of libc. So among the objects linked into the
# library, only the hook files (shim/hooks_*.o, which define the names) may import them.
# real.o is checked too: it reaches libc by dlsym and raw system calls only. The
# launcher's objects (obj/cli) are a program of their own, never loaded into a host.
set -eu

# Prints "object: symbol" for each import of an exported name by a non-hook object of
# BUILD; exits 1 if there is any.
check() {
	build=$1
	map=$build/exports.map
	[ -f "$map" ] || { echo "check_exports: $map is missing (run make)" >&2; exit 2; }
	exported=$(tr -s ' \t;{}' '\n' <"$map" | grep -v -x -e '' -e 'global:' -e 'local:' \
		-e '\*' | sort -u)
	[ -n "$exported" ] || { echo "check_exports: no exported names in $map" >&2; exit 2; }
	bad=0
	for obj in "$build"/obj/shim/*.o "$build"/obj/policy/*.o; do
		[ -f "$obj" ] || continue
		case ${obj##*/} in hooks_*.o) continue ;; esac
		imports=$(nm -u -P "$obj" | awk '{ sub(/@.*/, "", $1); print $1 }' | sort -u)
		hits=$(printf '%s\n' "$imports" | grep -F -x -e "$exported" || true)
		for sym in $hits; do
			echo "check_exports: ${obj#"$build"/obj/} calls exported name $sym" \
			     "(the library's own calls go through tb_real, shim/real.h)" >&2
			bad=1
		done
	done
	return $bad
}

self_test() {
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/obj/policy" "$tmp/obj/shim"
	printf '{ global: close; read; local: *; };\n' >"$tmp/exports.map"
	printf '#include <unistd.h>\nint tb_throwaway(int fd);\nint tb_throwaway(int fd) { return close(fd); }\n' \
		>"$tmp/bad.c"
	printf 'int tb_clean(int x);\nint tb_clean(int x) { return x + 1; }\n' >"$tmp/clean.c"
	${CC:-cc} -c -o "$tmp/obj/policy/clean.o" "$tmp/clean.c"
	# A hook file may call the names it defines.
	${CC:-cc} -c -o "$tmp/obj/shim/hooks_x.o" "$tmp/bad.c"
	if ! check "$tmp" 2>"$tmp/out"; then
		echo "check_exports --self-test: clean objects were refused:" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	${CC:-cc} -c -o "$tmp/obj/policy/throwaway.o" "$tmp/bad.c"
	if check "$tmp" 2>"$tmp/out"; then
		echo "check_exports --self-test: a policy object calling close() passed" >&2
		exit 1
	fi
	if ! grep -q 'policy/throwaway.o calls exported name close' "$tmp/out" ||
	   grep -q hooks_x "$tmp/out"; then
		echo "check_exports --self-test: wrong report:" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	echo "check_exports --self-test: caught: $(cat "$tmp/out")"
}

case "${1:-}" in
--self-test) self_test ;;
"" | -*) echo "usage: $0 BUILD | --self-test" >&2; exit 2 ;;
*) check "$1" && echo "check_exports: no internal call to an exported name" ;;
esac
