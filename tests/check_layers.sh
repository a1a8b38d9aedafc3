#!/bin/sh
# check_layers.sh - every arrow points down: hooks -> runtime -> policy, launcher -> policy,
# and no cycle among the modules of any folder. Run by make check-layers (and make test).
# usage: tests/check_layers.sh [ROOT [BUILD]] check the tree at ROOT (default: .), and the
#                                             objects of BUILD (BUILD/obj) when given
#        tests/check_layers.sh --graph [ROOT]  print the module graph, lowest modules first
#        tests/check_layers.sh --self-test     show that the check catches each violation
#
# A module is a folder and a base name: shim/sock.c and shim/sock.h are the module
# shim/sock, and a private header NAME_impl.h (the interface between the files that make up
# one module, policy/frame_impl.h) belongs to the module NAME too. Its arrows are its quoted #include lines, resolved as the compiler does with
# the folder's include path (the Makefile's): shim/ sees shim, policy and include; cli/ sees
# cli and policy; policy/ sees policy only. Those paths already make a wrong include fail to
# compile; this check says it in words, and also refuses what a path cannot express:
#   - a cycle: two modules that include each other, however long the loop (init <-> configure
#     once read each other's globals; sock <-> watchdog called each other);
#   - an include that reaches another folder by a relative path ("../shim/sock.h");
#   - an included .c file (tests may include one to reach static functions; the tree not).
# With BUILD, the same checks run on the link graph: module A -> B when an object of A uses
# a symbol an object of B defines (nm), which catches a call declared by hand (an extern
# prototype in a .c file) that no include shows; there, too, only a hooks file may use
# what a hooks file defines. There a .c file without a header of
# its own belongs to the module whose name prefixes its own (see owner()).
set -eu

FOLDERS="policy shim cli include"

# The folders a file in folder $1 may include from, in the compiler's search order.
allowed() {
	case $1 in
	policy) echo policy ;;
	shim) echo "shim policy include" ;;
	cli) echo "cli policy" ;;
	include) echo include ;;
	esac
}

# Prints one line per quoted include of the tree at $1: "FROM TO FILE:LINE", where FROM and
# TO are modules, or "BAD FILE:LINE: why" for an include that breaks a layer rule. Lines
# are printed for includes the folder's own path resolves; an include found nowhere (a
# system header written with quotes) is left to the compiler.
edges() {
	(
	cd "$1"
	for dir in $FOLDERS; do
		for f in "$dir"/*.c "$dir"/*.h; do
			[ -f "$f" ] || continue
			base=${f##*/}
			base=${base%.*}
			from=$dir/${base%_impl}
			grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
			sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' |
			while read -r line inc; do
				where=$f:$line
				case $inc in
				*.c) echo "BAD $where: includes $inc, a .c file"; continue ;;
				*/*) echo "BAD $where: includes $inc by path (a folder's" \
					  "include path says what it may see)"; continue ;;
				esac
				to=
				for d in $(allowed "$dir"); do
					if [ -f "$d/$inc" ]; then
						to=${inc%.*}
						to=$d/${to%_impl}
						break
					fi
				done
				if [ -z "$to" ]; then
					for d in $FOLDERS; do
						if [ -f "$d/$inc" ]; then
							echo "BAD $where: $dir includes $d/$inc" \
							     "($dir/ sees $(allowed "$dir" |
							     sed 's| |/, |g')/ only)"
							break
						fi
					done
					continue
				fi
				[ "$to" = "$from" ] || echo "$from $to $where"
			done
		done
	done
	)
}

# Reads "FROM TO WHERE" lines of the $1 graph; prints every cycle found (one per back edge of a depth-first
# walk, as the modules of the loop) and exits 1 if there is any.
find_cycles() {
	awk -v kind="$1" '
	{
		if (!(($1, $2) in seen)) {
			seen[$1, $2] = 1
			out[$1] = out[$1] " " $2
			where[$1, $2] = $3
		}
		node[$1] = 1; node[$2] = 1
	}
	function visit(n,    k, i, m, succ, loop, j) {
		color[n] = 1
		stack[++depth] = n
		k = split(out[n], succ, " ")
		for (i = 1; i <= k; i++) {
			m = succ[i]
			if (color[m] == 1) {
				loop = ""
				for (j = depth; j >= 1 && stack[j] != m; j--)
					;
				for (; j <= depth; j++)
					loop = loop stack[j] " (" where[stack[j], j < depth ? stack[j + 1] : m] ") -> "
				print "check_layers: " kind " cycle: " loop m > "/dev/stderr"
				bad = 1
			} else if (color[m] == 0) {
				visit(m)
			}
		}
		depth--
		color[n] = 2
	}
	END {
		n = 0
		for (v in node) names[++n] = v
		# A fixed order, so that the report is the same from run to run.
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && names[j - 1] > names[j]; j--) {
				t = names[j]; names[j] = names[j - 1]; names[j - 1] = t
			}
		for (i = 1; i <= n; i++)
			if (color[names[i]] == 0)
				visit(names[i])
		exit bad
	}'
}

# The module of file $2.c in folder $1 for the link graph: its own name when it has a header
# of its own (or no module's name prefixes it), else the module of the longest file name
# that prefixes its own followed by "_" (sock_expire -> sock; frame_http_lines -> frame_http
# -> frame: a file without a header implements part of a header-owning module's work).
owner() {
	name=$2
	while [ ! -f "$1/$name.h" ]; do
		best=
		for c in "$1"/*.c; do
			m=${c##*/}
			m=${m%.c}
			case $name in
			"$m"_*) [ ${#m} -le ${#best} ] || best=$m ;;
			esac
		done
		[ -n "$best" ] || break
		name=$best
	done
	echo "$name"
}

# Prints "FROM TO OBJECT:SYMBOL" for each symbol an object of BUILD $2 (tree at $1) uses
# and another module's object defines.
link_edges() {
	root=$1
	for o in "$2"/obj/*/*.o; do
		[ -f "$o" ] || continue
		dir=${o%/*}
		dir=${dir##*/}
		base=${o##*/}
		base=${base%.o}
		mod=$dir/$(owner "$root/$dir" "$base")
		nm -P -g --defined-only "$o" | awk -v m="$mod" '$2 != "U" { print "D", $1, m }'
		nm -P -u "$o" | awk -v m="$mod" -v o="$dir/$base.o" '{ sub(/@.*/, "", $1); print "U", $1, m, o }'
	done | awk -v map="$2/exports.map" '
	BEGIN {
		# The hooked names are the names of libc functions too: a use of one is a libc
		# call (check_exports.sh sees that it goes through tb_real), not an arrow.
		while ((getline line < map) > 0) {
			gsub(/[{};:]/, " ", line)
			k = split(line, w, " ")
			for (i = 1; i <= k; i++)
				hooked[w[i]] = 1
		}
	}
	# shim/libconfig_dl defines libconfig'"'"'s own names, loaded at run time: a use of one
	# is a call of libconfig (the launcher links the real library), not an arrow.
	$1 == "D" { if (!($2 in hooked) && $3 != "shim/libconfig_dl") def[$2] = $3; next }
	{ use[++n] = $0 }
	END {
		for (i = 1; i <= n; i++) {
			split(use[i], f, " ")
			if ((f[2] in def) && def[f[2]] != f[3])
				print f[3], def[f[2]], f[4] ":" f[2]
		}
	}'
}

# Exits 0 when the tree at $1 (and the objects of BUILD $2, if given) keep every rule, else
# 1 after saying what is wrong.
check() {
	all=$(edges "$1")
	bad=0
	rules=$(printf '%s\n' "$all" | awk '$1 == "BAD"')
	if [ -n "$rules" ]; then
		printf '%s\n' "$rules" | sed 's/^BAD /check_layers: /' >&2
		bad=1
	fi
	printf '%s\n' "$all" | awk 'NF == 3 && $1 != "BAD"' | find_cycles include || bad=1
	if [ -n "${2:-}" ]; then
		links=$(link_edges "$1" "$2")
		printf '%s\n' "$links" | awk 'NF == 3' | find_cycles link || bad=1
		# The calls keep to the layers too: a folder uses only what its layer sees, and
		# only a hooks file uses a symbol defined in a hooks file (the runtime never
		# calls up into a hook).
		up=$(printf '%s\n' "$links" | while read -r from to where; do
			[ -n "$to" ] || continue
			case " $(allowed "${from%%/*}") " in
			*" ${to%%/*} "*) ;;
			*) echo "check_layers: $where: ${from%%/*} uses ${to%%/*}/ ($from -> $to)" ;;
			esac
			case $from/$to in
			shim/hooks_*/shim/hooks_*) ;;
			*/shim/hooks_*) echo "check_layers: $where: the runtime calls up into a hook" \
					     "file ($from -> $to)" ;;
			esac
		done)
		if [ -n "$up" ]; then
			printf '%s\n' "$up" >&2
			bad=1
		fi
	fi
	return $bad
}

# The module graph, one module a line with what it includes, in an order where each module
# comes after everything it includes (tsort of the reversed arrows).
graph() {
	all=$(edges "$1" | awk '$1 != "BAD"')
	order=$(printf '%s\n' "$all" | awk '{ print $2, $1 }' | tsort)
	for m in $order; do
		printf '%s:' "$m"
		printf '%s\n' "$all" | awk -v m="$m" '$1 == m { print $2 }' | sort -u | tr '\n' ' '
		echo
	done
}

# For the self-test: the check of tree $1 (with the objects of $2, if not empty) must fail
# and say $3; $4 names what was planted, for the report.
expect_caught() {
	if check "$1" "$2" 2>"$tmp/out" || ! grep -q -F "$3" "$tmp/out"; then
		echo "check_layers --self-test: $4 was not reported as '$3':" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	caught="$caught
  $4: $(head -n 1 "$tmp/out")"
}

self_test() {
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for d in $FOLDERS; do
		mkdir -p "$tmp/$d"
		cp "$d"/*.[ch] "$tmp/$d/" 2>/dev/null || true
	done
	if ! check "$tmp" 2>"$tmp/out"; then
		echo "check_layers --self-test: the clean tree was refused:" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	# Each plant, on a fresh copy of one file: the file, the line to add, what must be said.
	caught=
	for plant in \
		'shim/sock.c|#include "xfer.h"|include cycle: shim/sock ' \
		'shim/configure.c|#include "init.h"|include cycle:' \
		'policy/budget.c|#include "sock.h"|policy includes shim/sock.h' \
		'cli/check.c|#include "fdtable.h"|cli includes shim/fdtable.h' \
		'policy/gate.c|#include "../shim/gates.h"|by path' \
		'shim/gates.c|#include "gate_shared.c"|a .c file'; do
		file=${plant%%|*}; rest=${plant#*|}; line=${rest%%|*}; want=${rest#*|}
		cp "$file" "$tmp/$file.orig"
		printf '%s\n' "$line" >>"$tmp/$file"
		expect_caught "$tmp" "" "$want" "$line in $file"
		mv "$tmp/$file.orig" "$tmp/$file"
	done
	# A call declared by hand: no include shows it, the link graph does.
	mini=$tmp/mini
	mkdir -p "$mini/shim" "$mini/build/obj/shim"
	printf 'int tb_a(int x);\n' >"$mini/shim/a.h"
	printf 'int tb_b(int x);\n' >"$mini/shim/b.h"
	printf '#include "a.h"\n#include "b.h"\nint tb_a(int x) { return x ? tb_b(x - 1) : 0; }\n' \
		>"$mini/shim/a.c"
	printf '#include "b.h"\nint tb_a(int x);\nint tb_b(int x) { return tb_a(x); }\n' \
		>"$mini/shim/b.c"
	for m in a b; do
		${CC:-cc} -c -o "$mini/build/obj/shim/$m.o" "$mini/shim/$m.c"
	done
	if ! check "$mini" 2>"$tmp/out"; then
		echo "check_layers --self-test: the mini tree's includes were refused:" >&2
		cat "$tmp/out" >&2
		exit 1
	fi
	expect_caught "$mini" "$mini/build" 'link cycle: shim/a' "tb_a() declared by hand in shim/b.c"
	# The runtime calling up into a hook file, without a cycle.
	printf 'int tb_h(int x);\nint tb_h(int x) { return x; }\n' >"$mini/shim/hooks_x.c"
	printf 'int tb_h(int x);\nint tb_c(int x);\nint tb_c(int x) { return tb_h(x); }\n' \
		>"$mini/shim/c.c"
	printf 'int tb_b(int x);\nint tb_b(int x) { return x; }\n' >"$mini/shim/b.c"
	for m in b hooks_x c; do
		${CC:-cc} -c -o "$mini/build/obj/shim/$m.o" "$mini/shim/$m.c"
	done
	expect_caught "$mini" "$mini/build" 'calls up into a hook file (shim/c -> shim/hooks_x)' \
		"shim/c.c calling tb_h() of shim/hooks_x.c"
	echo "check_layers --self-test: caught:$caught"
}

case "${1:-}" in
--self-test) self_test ;;
--graph) graph "${2:-.}" ;;
-*) echo "usage: $0 [ROOT [BUILD]] | --graph [ROOT] | --self-test" >&2; exit 2 ;;
*) check "${1:-.}" "${2:-}" &&
   echo "check_layers: no ${2:+include or link }cycle; every arrow points down" ;;
esac
