/* names.c - the table of (address, hostname) pairs learned from getaddrinfo/gethostbyname.
 * Pure code: a fixed ring, no allocation, no locks (the runtime holds one around each call). */
#include "names.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static int same_addr(const struct tb_dest *a, const struct tb_dest *b)
{
	return a->family == b->family &&
	       memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : 16) == 0;
}

void tb_names_learn(struct tb_names *t, const char *name, int family, const void *addr)
{
	char lower[TB_NAME_MAX];
	unsigned char numeric[16];
	struct tb_dest d;
	size_t len;

	if (name == NULL || addr == NULL || (family != AF_INET && family != AF_INET6))
		return;
	len = strlen(name);
	if (len == 0 || len >= sizeof(lower))
		return;
	if (inet_pton(AF_INET, name, numeric) == 1 || inet_pton(AF_INET6, name, numeric) == 1)
		return; /* a numeric "name" says nothing an address rule does not */
	for (size_t i = 0; i <= len; i++)
		lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
	if (len > 1 && lower[len - 1] == '.')
		lower[len - 1] = '\0';

	memset(&d, 0, sizeof(d));
	d.family = (uint16_t)family;
	memcpy(d.addr, addr, family == AF_INET ? 4 : 16);
	for (size_t i = 0; i < t->count; i++)
		if (same_addr(&t->e[i].addr, &d) && strcmp(t->e[i].name, lower) == 0)
			return;
	t->e[t->next].addr = d;
	memcpy(t->e[t->next].name, lower, strlen(lower) + 1);
	t->next = (t->next + 1) % TB_NAMES_CAP;
	if (t->count < TB_NAMES_CAP)
		t->count++;
}

size_t tb_names_lookup(const struct tb_names *t, const struct tb_dest *d,
		       char (*out)[TB_NAME_MAX], size_t max)
{
	struct tb_dest key = *d;
	size_t found = 0;

	/* A v4-mapped address on an IPv6 socket is the IPv4 address the name resolved to. */
	tb_dest_unmap_v4(d, &key);
	for (size_t k = 0; k < t->count && found < max; k++) {
		size_t i = (t->next + TB_NAMES_CAP - 1 - k) % TB_NAMES_CAP;

		if (same_addr(&t->e[i].addr, &key)) {
			memcpy(out[found], t->e[i].name, strlen(t->e[i].name) + 1);
			found++;
		}
	}
	return found;
}
