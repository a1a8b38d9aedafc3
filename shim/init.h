/* init.h - process-wide state: the settings in force, the budgets, and start-up.
 * Read-only after tb_init() except the per-thread budget, which only its thread touches. */
#ifndef TB_INIT_H
#define TB_INIT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "budget.h"
#include "settings.h"

extern struct tb_settings tb_cfg;      /* from TIMEBOX_*; immutable after tb_init */
extern atomic_bool tb_governing;       /* some limit is set: connect() starts tracking */
extern struct tb_budget tb_proc_budget; /* scope=process */

/* Parses the environment once (thread-safe, idempotent); prints configuration errors. */
void tb_init(void);

/* The calling thread's kernel id, cached per thread (one gettid() per thread lifetime). */
int tb_tid(void);

/* The budget that bounds the calling thread's governed operations. */
struct tb_budget *tb_budget_here(void);

#endif
