/* env_impl.h - what env.c shares with env_value.c: the parsers of whole numbers and of the
 * values of a closed set. Only these two files include it. */
#ifndef TB_ENV_IMPL_H
#define TB_ENV_IMPL_H

#include "env.h"

/* The member of *s that `var` sets, when var->kind is `kind` and the row names one. */
static inline void *tb_env_member(struct tb_settings *s, const struct tb_env_var *var,
				  enum tb_env_kind kind)
{
	if (var->kind != kind || var->field == TB_ENV_NO_FIELD)
		return NULL;
	return (char *)s + var->field;
}

/*
 * A COUNT, POSITIVE, NUMBER, PERCENT or SHARE value into *field. Returns NULL (stored), or
 * the error sentence (a static string; *field unchanged).
 */
const char *tb_env_apply_whole(int *field, enum tb_env_kind kind, const char *value);

/*
 * A GATE_SIZE, PERIOD, ERRNO or BREAKER_HTTP value of var into *s. Returns NULL (stored), or
 * the error sentence (*s unchanged).
 */
const char *tb_env_apply_value(struct tb_settings *s, const struct tb_env_var *var,
			       const char *value);

#endif
