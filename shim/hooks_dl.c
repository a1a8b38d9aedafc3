/* hooks_dl.c - dlopen: a library loaded with RTLD_DEEPBIND would bind its socket calls to
 * libc ahead of timebox, so while timebox governs, the flag is dropped. */
#include <dlfcn.h>
#include <stdatomic.h>

#include "configure.h"
#include "hooks.h"
#include "init.h"
#include "libc_compat.h"
#include "real.h"

/*
 * RTLD_DEEPBIND puts a library's own dependencies (libc among them) ahead of the global
 * scope for its symbols, so a preloaded library never sees its calls: PHP loads every
 * extension that way, and libcurl's and libpq's connect/poll/recv went straight to libc.
 * While timebox governs, the library is loaded with global-first binding instead, as PHP
 * itself does when built with a sanitizer. The price (docs/limitations.md): a library that
 * relied on deep binding to keep its own copy of a symbol that the program also defines
 * now gets the program's. With no limit set, nothing changes.
 */
static TB_SLOW int without_deepbind(int flags)
{
	tb_init(); /* a constructor's dlopen may come before ours */
	if (atomic_load_explicit(&tb_governing, memory_order_relaxed))
		flags &= ~RTLD_DEEPBIND;
	return flags;
}

/*
 * dlopen must reach libc as a tail call: glibc takes the caller from the return address to
 * choose the namespace and the DT_RPATH searched for a bare name, and a frame of ours would
 * make timebox the caller. Hence nothing after the call, and the rare case out of line.
 */
TB_EXPORT void *dlopen(const char *file, int flags)
{
	if (TB_UNLIKELY(flags & RTLD_DEEPBIND))
		flags = without_deepbind(flags);
	return tb_real.dlopen(file, flags);
}
