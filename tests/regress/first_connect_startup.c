/* first_connect_startup.c - timebox's own start-up in a process's first governed connect is
 * not counted against the connect timeout.
 *
 * What happened: the first governed connect of a process creates the statistics segment
 * (files in the gate directory, sized and mapped) and starts timebox's two threads (each
 * start waits up to 100 ms for its thread to run). The handshake's clock started before all
 * that, so the connect phase measured timebox, not the peer: on a loaded machine a child of
 * `make stress` (a fresh process, connect_timeout 235 ms, a loopback peer that answers at
 * once) was cut with elapsed_ms=432 connect_ms=-1, where natively it connects in
 * microseconds; a 2 ms connect_timeout cut the first connect of every python3 run here
 * (elapsed 6 ms) and none of the next ones. The handshake's clock now starts once timebox
 * is ready.
 * The sequence: the segment's creation is made slow (a second preload delays fallocate by
 * 300 ms, where a loaded machine would be slow); connect_timeout 100ms; a first connect to
 * a local listener -> must succeed, as natively.
 */
#include "delaylib.h"

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lfd, port, fd, r;
	double t0, ms;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		setenv("TBR_FALLOCATE_MS", "300", 1);
		tbr_add_preload(tbr_fallocate_delay_source);
	}
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=100ms", NULL);
	tbr_remove_built();
	lfd = tbr_listen(&port);
	a.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	TBR_CHECK(fd >= 0, "socket: %s", strerror(errno));
	t0 = tbt_now_ms();
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	ms = tbt_now_ms() - t0;
	printf("first connect: %s after %.0f ms (timebox's start-up inside it)\n",
	       r == 0 ? "connected" : tbt_errno_name(errno), ms);
	TBR_CHECK(r == 0, "the first connect to a listening loopback peer failed with %s: "
		  "timebox's own start-up was counted as the handshake", tbt_errno_name(errno));
	close(fd);
	close(lfd);
	return 0;
}
