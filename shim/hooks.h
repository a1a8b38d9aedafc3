/* hooks.h - what the exported hook files share: visibility and branch hints.
 * The hooks themselves are thin; their bodies live in xfer.c, wait.c and the policy modules. */
#ifndef TB_HOOKS_H
#define TB_HOOKS_H

#include <stdbool.h>
#include <string.h>

#define TB_EXPORT __attribute__((visibility("default")))
#define TB_LIKELY(x) __builtin_expect(!!(x), 1)
#define TB_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* A governed socket's body, kept out of the hook so the untracked path stays a few
 * instructions (no frame, no saved registers). */
#define TB_SLOW __attribute__((noinline))

/* True when a scan of fmt may read the stream: unless its directives are all %n (with
 * flags, width, positional index or length), which store the count read so far and take
 * nothing - a scan that can return without a byte must not first wait for one
 * (regress/stdio_scanf_no_input). Whitespace, literals and every other conversion read.
 * The fscanf hooks of both builds. */
static inline bool tb_scan_reads(const char *fmt)
{
	for (const char *p = fmt; *p != '\0'; p++) {
		if (*p != '%')
			return true;
		p += 1 + strspn(p + 1, "0123456789$*'hlLqjztm");
		if (*p != 'n')
			return true;
	}
	return false;
}

#endif
