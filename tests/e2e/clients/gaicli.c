/*
 * gaicli.c - resolves one name with getaddrinfo, as a C program of either libc does (the
 * musl column of the end-to-end tests builds it with musl-gcc: musl's resolver makes its
 * socket, poll and recvfrom calls inside libc, where no preload sees them).
 *
 * usage: gaicli NAME
 * Prints "ok ADDR..." (the IPv4 and IPv6 addresses, sorted as returned) and exits 0, or
 * "error EAI=N MESSAGE" and exits 3.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	struct addrinfo hints, *res, *ai;
	char text[INET6_ADDRSTRLEN];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: gaicli NAME\n");
		return 2;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(argv[1], "80", &hints, &res);
	if (rc != 0) {
		printf("error EAI=%d %s\n", rc, gai_strerror(rc));
		return 3;
	}
	printf("ok");
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		const void *a = ai->ai_family == AF_INET6
					? (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr
					: (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr;

		printf(" %s", inet_ntop(ai->ai_family, a, text, sizeof(text)));
	}
	printf("\n");
	freeaddrinfo(res);
	return 0;
}
