#!/usr/bin/env bash
# check_tls.sh - the library's static TLS stays within what a dlopen of it can get.
# usage: tests/check_tls.sh LIBRARY [BUDGET]
# A library with initial-exec TLS that is loaded by dlopen (C dlopen, python ctypes) gets its
# TLS from the spare glibc keeps in each thread's static block; under ASan's runtime that
# spare is smaller, and a library over it fails to load ("cannot allocate memory in static
# TLS block", regress/dlopen_library). 1,672 bytes loaded under ASan here and 1,680 did not:
# the budget is the largest size known to load, so a growth is caught in the plain build,
# with the size, before a sanitizer's run finds it.
set -eu
lib=${1:?usage: check_tls.sh LIBRARY [BUDGET]}
budget=${2:-1672}
hex=$(readelf -lW "$lib" | awk '$1 == "TLS" { print $6 }')
size=$(( ${hex:-0} ))
if [ "$size" -gt "$budget" ]; then
	echo "check_tls: $lib: static TLS of $size bytes, over the budget of $budget: a dlopen" \
	     "of the library under ASan's runtime fails (regress/dlopen_library); give back" \
	     "a thread-local or shrink TB_WAITS_MAX (shim/waits.h)" >&2
	exit 1
fi
echo "check_tls: static TLS of $size bytes, within the budget of $budget"
