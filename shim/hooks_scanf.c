/* hooks_scanf.c - fscanf and vfscanf under their GNU names. Apart from hooks_stdio.c because
 * <stdio.h>, in C99 and later, renames both to __isoc99_* by asm label: defined in a file
 * that includes it, they would be defined a second time under the C99 names. */
#include <stdarg.h>
#include <stdbool.h>

#include "hooks.h"

struct _IO_FILE; /* FILE, which this file must not take from <stdio.h> */

/* hooks_stdio.c: the pass-through or the governed scan. */
int tb_stdio_vfscanf(struct _IO_FILE *f, const char *fmt, va_list ap, bool c99);

int vfscanf(struct _IO_FILE *f, const char *fmt, va_list ap);
int fscanf(struct _IO_FILE *f, const char *fmt, ...);

TB_EXPORT int vfscanf(struct _IO_FILE *f, const char *fmt, va_list ap)
{
	return tb_stdio_vfscanf(f, fmt, ap, false);
}

TB_EXPORT int fscanf(struct _IO_FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = tb_stdio_vfscanf(f, fmt, ap, false);
	va_end(ap);
	return r;
}
