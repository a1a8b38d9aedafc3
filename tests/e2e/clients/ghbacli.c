/*
 * ghbacli.c - names one address with gethostbyaddr or gethostbyaddr_r, as older servers name
 * their peers (the musl column of the end-to-end tests builds it with musl-gcc: musl's
 * reverse lookup makes its socket, poll and recvfrom calls inside libc, where no preload
 * sees them).
 *
 * usage: ghbacli ADDR [r]     ADDR an IPv4 or IPv6 address; r: gethostbyaddr_r
 * Prints "ok NAME [ALIAS...] ADDR" and exits 0, or "error h_errno=N" (gethostbyaddr_r:
 * "error rc=N h_errno=N") and exits 3.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	unsigned char addr[16];
	char buf[2048], text[INET6_ADDRSTRLEN];
	struct hostent he, *h;
	socklen_t len = 4;
	int af = AF_INET, rc = 0, herr = 0;
	int reentrant = argc == 3 && strcmp(argv[2], "r") == 0;

	if (argc < 2 || argc > 3 || (argc == 3 && !reentrant)) {
		fprintf(stderr, "usage: ghbacli ADDR [r]\n");
		return 2;
	}
	if (inet_pton(AF_INET, argv[1], addr) != 1) {
		af = AF_INET6;
		len = 16;
		if (inet_pton(AF_INET6, argv[1], addr) != 1) {
			fprintf(stderr, "ghbacli: not an address: %s\n", argv[1]);
			return 2;
		}
	}
	if (reentrant) {
		rc = gethostbyaddr_r(addr, len, af, &he, buf, sizeof(buf), &h, &herr);
	} else {
		h = gethostbyaddr(addr, len, af);
		herr = h_errno;
	}
	if (h == NULL) {
		if (reentrant)
			printf("error rc=%d h_errno=%d\n", rc, herr);
		else
			printf("error h_errno=%d\n", herr);
		return 3;
	}
	printf("ok %s", h->h_name);
	for (char **a = h->h_aliases; *a != NULL; a++)
		printf(" %s", *a);
	for (char **a = h->h_addr_list; *a != NULL; a++)
		printf(" %s", inet_ntop(h->h_addrtype, *a, text, sizeof(text)));
	printf("\n");
	return 0;
}
