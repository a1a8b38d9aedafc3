/*
 * gnicli.c - names one address with getnameinfo, as a server naming its peer does (the musl
 * column of the end-to-end tests builds it with musl-gcc: musl's reverse lookup makes its
 * socket, poll and recvfrom calls inside libc, where no preload sees them).
 *
 * usage: gnicli ADDR [FLAGS]     ADDR an IPv4 or IPv6 address, port 80; FLAGS the NI_ flags
 * Prints "ok HOST SERV" and exits 0, or "error EAI=N MESSAGE" and exits 3.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
	struct sockaddr *sa;
	socklen_t salen;
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	int rc;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: gnicli ADDR [FLAGS]\n");
		return 2;
	}
	memset(&v4, 0, sizeof(v4));
	memset(&v6, 0, sizeof(v6));
	if (inet_pton(AF_INET, argv[1], &v4.sin_addr) == 1) {
		v4.sin_family = AF_INET;
		v4.sin_port = htons(80);
		sa = (struct sockaddr *)&v4;
		salen = sizeof(v4);
	} else if (inet_pton(AF_INET6, argv[1], &v6.sin6_addr) == 1) {
		v6.sin6_family = AF_INET6;
		v6.sin6_port = htons(80);
		sa = (struct sockaddr *)&v6;
		salen = sizeof(v6);
	} else {
		fprintf(stderr, "gnicli: not an address: %s\n", argv[1]);
		return 2;
	}
	rc = getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv),
			 argc == 3 ? atoi(argv[2]) : 0);
	if (rc != 0) {
		printf("error EAI=%d %s\n", rc, gai_strerror(rc));
		return 3;
	}
	printf("ok %s %s\n", host, serv);
	return 0;
}
