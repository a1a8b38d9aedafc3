/* stdio_steady_drip.c - one stdio call over a peer that is slow but never silent.
 *
 * What happened: the first governed fgets and fread were each one wait around glibc's
 * call. Inside it glibc reads the socket as many times as it takes to finish the line (or
 * the count), out of any hook's sight, so a peer sending a byte every 150 ms counted as
 * silent from the start of the call, and a 20-byte line was cut at the 400 ms read timeout
 * although no silence ever passed 150 ms. Now every refill of the buffer is a wait of its
 * own. The sequence: connect (read timeout 400 ms); a peer thread sends "0123456789abcdefghi\n"
 * one byte every 150 ms (about 3 s in all); fgets must return the whole line; then the
 * same for fread of 20 bytes and for getline.
 */
#include <pthread.h>

#include "regress.h"

static const char text[] = "0123456789abcdefghi\n";

static void *drip(void *arg)
{
	int peer = *(int *)arg;

	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof(text) - 1; i++) {
			tbt_sleep_ms(150);
			if (write(peer, text + i, 1) != 1)
				return NULL;
		}
	return NULL;
}

int main(int argc, char **argv)
{
	char buf[64], *line = NULL;
	size_t cap = 0, n;
	int port, lfd, fd, peer;
	pthread_t t;
	ssize_t len;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=400ms", NULL);
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(pthread_create(&t, NULL, drip, &peer) == 0, "pthread_create");
	f = fdopen(fd, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));

	TBR_CHECK(fgets(buf, sizeof(buf), f) != NULL && !strcmp(buf, text),
		  "fgets over a steady drip: errno %s", tbt_errno_name(errno));
	n = fread(buf, 1, sizeof(text) - 1, f);
	TBR_CHECK(n == sizeof(text) - 1 && !memcmp(buf, text, n),
		  "fread over a steady drip: %zu bytes, errno %s", n, tbt_errno_name(errno));
	len = getline(&line, &cap, f);
	TBR_CHECK(len == (ssize_t)sizeof(text) - 1 && !strcmp(line, text),
		  "getline over a steady drip: %zd, errno %s", len, tbt_errno_name(errno));
	TBR_CHECK(!ferror(f), "stream in error");
	pthread_join(t, NULL);
	free(line);
	fclose(f);
	close(peer);
	close(lfd);
	return 0;
}
