/* gethostbyname_r_huge_len.c - gethostbyname_r with a length larger than the buffer.
 *
 * What happened: gethostbyname_r takes the caller's word for its buffer's length, and glibc
 * writes only what the answer needs; a program that passes SIZE_MAX, or the size of a larger
 * buffer it once had, works natively whenever the answer fits. timebox's bounded lookup
 * allocated the length plus 16 bytes for the resolver thread (SIZE_MAX wrapped to a 15-byte
 * block that glibc then filled as if it were huge: a heap overflow) and copied the whole
 * length back into the caller's buffer (a length of 64 KiB over a 1 KiB buffer overwrote
 * 63 KiB of the caller's memory).
 *
 * The sequence: a resolver on 127.0.0.1 that answers (fake_dns.h); TIMEBOX_CONNECT_TIMEOUT=5s;
 * gethostbyname_r("alpha.example.test") into a 1 KiB buffer that claims 64 KiB, inside a
 * region whose bytes after the buffer carry a mark that must survive; then the same with
 * SIZE_MAX.
 */
#include <stdint.h>

#include "fake_dns.h"

#define REAL 1024
#define MARK 0x5a

static void lookup(const char *name, size_t claimed)
{
	static char region[REAL + 65536];
	struct hostent he, *result = NULL;
	in_addr_t want = tbr_fake_addr(name);
	int herr = 0, rc;

	memset(region, MARK, sizeof(region));
	rc = gethostbyname_r(name, &he, region, claimed, &result, &herr);
	TBR_CHECK(rc == 0 && result == &he, "%s, length %zu: returned %d, h_errno %d", name,
		  claimed, rc, herr);
	TBR_CHECK(he.h_addr_list[0] != NULL && memcmp(he.h_addr_list[0], &want, 4) == 0,
		  "%s: a wrong address", name);
	for (size_t i = REAL; i < sizeof(region); i++)
		TBR_CHECK(region[i] == MARK, "length %zu: byte %zu past the answer's 1 KiB was written",
			  claimed, i);
}

int main(int argc, char **argv)
{
	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=5s", NULL);
	tbr_fake_dns(true);
	lookup("alpha.example.test", 65536);
	lookup("bravo.example.test", SIZE_MAX);
	return 0;
}
