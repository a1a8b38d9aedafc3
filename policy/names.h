/* names.h - hostnames learned from the program's own name lookups, so that a rule written
 * with a service name applies to the addresses it resolved to. Pure code: the caller locks. */
#ifndef TB_NAMES_H
#define TB_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "dest.h"
#include "rules.h"

#define TB_NAMES_CAP 256 /* pairs remembered; the oldest is forgotten first */
#define TB_NAMES_PER_ADDR 4

struct tb_name_entry {
	struct tb_dest addr; /* port 0 */
	char name[TB_NAME_MAX];
};

/* A bounded ring of (address, name) pairs. Zero-initialised storage is an empty table. */
struct tb_names {
	struct tb_name_entry e[TB_NAMES_CAP];
	size_t next;  /* where the next pair goes */
	size_t count; /* pairs held, up to TB_NAMES_CAP */
};

/*
 * Remembers that `name` resolved to the address of sa (AF_INET or AF_INET6; the port is
 * ignored). The name is stored lowercase without a trailing dot; a numeric name ("10.0.0.5")
 * or an over-long one is not stored. A pair already held is not stored twice.
 */
void tb_names_learn(struct tb_names *t, const char *name, int family, const void *addr);

/*
 * Copies into out (up to max names) the names learned for d's address, most recent first.
 * Returns how many were copied.
 */
size_t tb_names_lookup(const struct tb_names *t, const struct tb_dest *d,
		       char (*out)[TB_NAME_MAX], size_t max);

#endif
