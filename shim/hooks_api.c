/* hooks_api.c - the public API of include/timebox.h, exported for the header's wrappers to
 * find at run time (dlsym): a program built against it needs no link to the library. */
#include "hooks.h"
#include "request.h"

/* Prototypes for -Wmissing-prototypes: the header's names are static inline wrappers, so
 * the library cannot include it; these are the functions they resolve. */
TB_EXPORT int timebox_deadline_begin(long ms);
TB_EXPORT void timebox_deadline_end(void);
TB_EXPORT long timebox_remaining_ms(void);

/* The calling thread's governed calls get a deadline of ms from now, nested in any it has
 * (the smaller wins). Returns 0, or -1 with errno EINVAL for ms < 0. */
TB_EXPORT int timebox_deadline_begin(long ms)
{
	return tb_req_api_begin(ms);
}

/* The innermost begin ends; the enclosing deadline applies again. */
TB_EXPORT void timebox_deadline_end(void)
{
	tb_req_api_end();
}

/* Milliseconds left of the thread's deadline (0: spent), or -1 when it has none. */
TB_EXPORT long timebox_remaining_ms(void)
{
	return tb_req_remaining_ms();
}
