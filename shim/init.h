/* init.h - start-up and fork: the settings in force, and whether anything is governed.
 * Read-only after tb_init(). Per-thread state (tid, budgets) lives in thread.h. */
#ifndef TB_INIT_H
#define TB_INIT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "settings.h"
#include "thread.h" /* tb_tid, tb_budget_here: included for the files that still reach them here */

extern struct tb_settings tb_cfg;      /* from TIMEBOX_*; immutable after tb_init */
extern atomic_bool tb_governing;       /* some limit is set: connect() starts tracking */

/* Parses the environment once (thread-safe, idempotent); prints configuration errors. */
void tb_init(void);

#endif
