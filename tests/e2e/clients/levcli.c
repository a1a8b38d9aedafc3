/*
 * levcli.c - an HTTP/1.1 keep-alive client written on libevent 2.1, the way libevent services
 * talk to their backends: an event_base on libevent's epoll backend, a bufferevent on a
 * non-blocking socket, and libevent's own timers for the pause between requests.
 *
 * usage: levcli [--count N] [--pause MS] PORT [PATH]
 *
 *   --count N   N GETs of PATH (default 1), one after the other, on one pooled connection
 *   --pause MS  between two requests the connection rests MS ms (default 0) in the pool,
 *               still registered for reading, as pools do to notice a peer's close; if it
 *               is lost meanwhile, the next request connects again, as a pool would
 *
 * Prints each response's body to stdout as it completes, then a last line
 * "connections=C reused=yes|no|-" (yes: every request after the first went out on a
 * connection that had served one before; - for a single request). A failure prints
 * "levcli: STEP: strerror(errno) (ENAME)" to stderr and exits 1 (STEP: base, connect, write,
 * read, response); a connection lost while resting prints "levcli: idle: ..." and is
 * replaced. Exit status 0 when every response is complete, 2 for usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static struct event_base *base;
static struct bufferevent *bev;
static struct event *pause_timer;
static struct sockaddr_in peer = { .sin_family = AF_INET };
static const char *path = "/";
static long count = 1, pause_ms;
static long sent;           /* requests written so far */
static long connections;    /* connections opened so far */
static long served_on_conn; /* responses completed on the current connection */
static bool reused = true;  /* every request after the first went out on a used conn */
static bool connected;      /* the current connection's connect has completed */
static bool waiting;        /* a request is outstanding on the current connection */
static long content_length = -1; /* the outstanding response's, once its head is in */

static void fail(const char *step, int err)
{
	const char *name = strerrorname_np(err);

	fprintf(stderr, "levcli: %s: %s (%s)\n", step, strerror(err), name ? name : "?");
	exit(1);
}

static void on_read(struct bufferevent *b, void *arg);
static void on_event(struct bufferevent *b, short what, void *arg);

/* Opens the pooled connection: a non-blocking connect that the loop completes. */
static void open_connection(void)
{
	bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		fail("base", ENOMEM);
	bufferevent_setcb(bev, on_read, NULL, on_event, NULL);
	connected = false;
	served_on_conn = 0;
	connections++;
	if (bufferevent_socket_connect(bev, (struct sockaddr *)&peer, sizeof(peer)) != 0)
		fail("connect", errno);
	/* Reading stays enabled for the connection's whole life, resting included. */
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* Writes the next request on the pooled connection (opening one if it was lost). */
static void send_request(void)
{
	if (bev == NULL)
		open_connection();
	if (sent > 0 && served_on_conn == 0)
		reused = false;
	if (evbuffer_add_printf(bufferevent_get_output(bev),
				"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path) < 0)
		fail("write", ENOMEM);
	sent++;
	waiting = true;
	content_length = -1;
}

static void on_pause_over(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	send_request();
}

/* Parses the response head at the front of in, if it is all there: drains it and sets
 * content_length. A head without Content-Length is a failure (the server always sends it). */
static void parse_head(struct evbuffer *in)
{
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	size_t len;
	char *head, *p;

	if (end.pos < 0)
		return;
	len = (size_t)end.pos + 4;
	head = malloc(len + 1);
	if (head == NULL || evbuffer_remove(in, head, len) != (int)len)
		fail("read", ENOMEM);
	head[len] = '\0';
	if (strncmp(head, "HTTP/1.", 7) != 0)
		fail("response", EPROTO);
	for (p = head; (p = strstr(p, "\r\n")) != NULL; p += 2) {
		if (strncasecmp(p + 2, "Content-Length:", 15) == 0)
			content_length = strtol(p + 17, NULL, 10);
	}
	free(head);
	if (content_length < 0)
		fail("response", EPROTO);
}

static void on_read(struct bufferevent *b, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(b);
	char *body;

	(void)arg;
	if (!waiting) /* bytes on a resting connection: nobody asked for them */
		fail("response", EPROTO);
	if (content_length < 0)
		parse_head(in);
	if (content_length < 0 || evbuffer_get_length(in) < (size_t)content_length)
		return;
	body = malloc((size_t)content_length + 1);
	if (body == NULL || evbuffer_remove(in, body, (size_t)content_length) != content_length)
		fail("read", ENOMEM);
	fwrite(body, 1, (size_t)content_length, stdout);
	fflush(stdout);
	free(body);
	waiting = false;
	served_on_conn++;
	if (sent == count) {
		event_base_loopexit(base, NULL);
		return;
	}
	if (pause_ms > 0) {
		struct timeval tv = { pause_ms / 1000, (pause_ms % 1000) * 1000 };

		evtimer_add(pause_timer, &tv);
	} else {
		send_request();
	}
}

static void on_event(struct bufferevent *b, short what, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();

	(void)arg;
	if (what & BEV_EVENT_CONNECTED) {
		connected = true;
		return;
	}
	if (what & BEV_EVENT_EOF)
		err = ECONNRESET;
	if (!connected)
		fail("connect", err);
	if (waiting)
		fail(what & BEV_EVENT_WRITING ? "write" : "read", err);
	/* Lost while resting in the pool: drop it; the next request connects again. */
	fprintf(stderr, "levcli: idle: %s (%s)\n", strerror(err), strerrorname_np(err));
	bufferevent_free(b);
	bev = NULL;
}

int main(int argc, char **argv)
{
	struct event_config *cfg;
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
			count = atol(argv[++i]);
		else if (strcmp(argv[i], "--pause") == 0 && i + 1 < argc)
			pause_ms = atol(argv[++i]);
		else
			break;
	}
	if (i >= argc || count < 1 || pause_ms < 0) {
		fprintf(stderr, "usage: levcli [--count N] [--pause MS] PORT [PATH]\n");
		return 2;
	}
	peer.sin_port = htons((uint16_t)atoi(argv[i]));
	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (i + 1 < argc)
		path = argv[i + 1];

	/* libevent's epoll backend, nothing else: that is what is under test. */
	cfg = event_config_new();
	if (cfg == NULL || event_config_avoid_method(cfg, "select") != 0 ||
	    event_config_avoid_method(cfg, "poll") != 0)
		fail("base", ENOMEM);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (base == NULL || strcmp(event_base_get_method(base), "epoll") != 0) {
		fprintf(stderr, "levcli: base: libevent's epoll backend is not available\n");
		return 1;
	}
	pause_timer = evtimer_new(base, on_pause_over, NULL);
	if (pause_timer == NULL)
		fail("base", ENOMEM);

	send_request();
	if (event_base_dispatch(base) != 0)
		fail("base", errno);
	if (waiting) { /* the loop ran dry with a request outstanding */
		fprintf(stderr, "levcli: base: the loop ended with a request outstanding\n");
		return 1;
	}
	printf("connections=%ld reused=%s\n", connections, count == 1 ? "-" : reused ? "yes" : "no");
	if (bev != NULL)
		bufferevent_free(bev);
	event_free(pause_timer);
	event_base_free(base);
	return 0;
}
