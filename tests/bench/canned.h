/*
 * canned.h - the bytes of the framing workload, shared by exchange.c (the client's side) and
 * echo_server.c (the server's): raw bytes, HTTP/1.1, or TLS 1.2-looking records.
 *
 * A kind is a script of steps: the client sends step.client, the server answers with
 * step.server once it has read that many bytes. The last step repeats for ever (the
 * exchanges); the steps before it happen once per connection (a TLS handshake).
 *
 * tls: a TLS 1.2 handshake as the record layer shows it (ClientHello; ServerHello,
 * Certificate, ServerKeyExchange, ServerHelloDone; ClientKeyExchange, ChangeCipherSpec,
 * Finished; ChangeCipherSpec, Finished), then each exchange is one application_data record
 * of 256 bytes from the client and two (1,024 and 512 bytes) from the server. Record bodies
 * are filler: framing follows record headers only (policy/frame_tls.c).
 */
#ifndef TB_BENCH_CANNED_H
#define TB_BENCH_CANNED_H

#include <stddef.h>
#include <string.h>

#define CANNED_MAX_STEPS 3
#define CANNED_MAX_BYTES 4096

struct canned_step {
    const unsigned char *client;
    size_t client_len;
    const unsigned char *server;
    size_t server_len;
};

struct canned_buf {
    unsigned char b[CANNED_MAX_BYTES];
    size_t len;
};

static inline void canned_put(struct canned_buf *c, const void *p, size_t n)
{
    memcpy(c->b + c->len, p, n);
    c->len += n;
}

/* A record header (type, version 3.3 or 3.1, length) and `len` filler bytes. */
static inline void canned_record(struct canned_buf *c, unsigned char type, unsigned char minor,
                 size_t len)
{
    unsigned char h[5] = { type, 3, minor, (unsigned char)(len >> 8), (unsigned char)len };

    canned_put(c, h, sizeof(h));
    memset(c->b + c->len, type == 22 ? 0x01 : 0xa5, len);
    c->len += len;
}

#define CANNED_HTTP_REQ_BODY 64
#define CANNED_HTTP_RESP_BODY 128

static inline void canned_http(struct canned_buf *req, struct canned_buf *resp)
{
    static const char head[] =
        "POST /api/v1/items HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\n"
        "User-Agent: bench/1.0\r\n"
        "Accept: application/json\r\n"
        "Accept-Encoding: gzip, deflate\r\n"
        "Accept-Language: en-US,en;q=0.9\r\n"
        "Connection: keep-alive\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-cache\r\n"
        "X-Request-Id: 0123456789abcdef\r\n"
        "X-Forwarded-For: 10.0.0.1\r\n"
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345\r\n"
        "Cookie: session=0123456789abcdef0123456789abcdef\r\n"
        "Content-Length: 64\r\n"
        "\r\n";
    static const char rhead[] =
        "HTTP/1.1 200 OK\r\n"
        "Date: Mon, 30 Nov 2026 12:00:00 GMT\r\n"
        "Server: bench\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: keep-alive\r\n"
        "Vary: Accept-Encoding\r\n"
        "X-Request-Id: 0123456789abcdef\r\n"
        "Strict-Transport-Security: max-age=31536000\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "X-Frame-Options: DENY\r\n"
        "Set-Cookie: a=b; Path=/\r\n"
        "ETag: \"0123456789\"\r\n"
        "Content-Length: 128\r\n"
        "\r\n";

    canned_put(req, head, sizeof(head) - 1);
    memset(req->b + req->len, '{', CANNED_HTTP_REQ_BODY);
    req->len += CANNED_HTTP_REQ_BODY;
    canned_put(resp, rhead, sizeof(rhead) - 1);
    memset(resp->b + resp->len, '}', CANNED_HTTP_RESP_BODY);
    resp->len += CANNED_HTTP_RESP_BODY;
}

/*
 * The script of `kind` ("raw" with `raw_size` bytes each way, "http", "tls") into steps.
 * Returns the number of steps (the last one repeats), or 0 for an unknown kind. The bytes
 * live in static storage: call once per process.
 */
static inline int canned_script(const char *kind, size_t raw_size, struct canned_step *steps)
{
    static struct canned_buf c[CANNED_MAX_STEPS], s[CANNED_MAX_STEPS];
    int n;

    memset(c, 0, sizeof(c));
    memset(s, 0, sizeof(s));
    if (strcmp(kind, "raw") == 0) {
        memset(c[0].b, 'x', raw_size);
        c[0].len = raw_size;
        memcpy(s[0].b, c[0].b, raw_size); /* an echo */
        s[0].len = raw_size;
        n = 1;
    } else if (strcmp(kind, "http") == 0) {
        canned_http(&c[0], &s[0]);
        n = 1;
    } else if (strcmp(kind, "tls") == 0) {
        canned_record(&c[0], 22, 1, 512);  /* ClientHello */
        canned_record(&s[0], 22, 3, 86);   /* ServerHello */
        canned_record(&s[0], 22, 3, 1200); /* Certificate */
        canned_record(&s[0], 22, 3, 300);  /* ServerKeyExchange */
        canned_record(&s[0], 22, 3, 4);    /* ServerHelloDone */
        canned_record(&c[1], 22, 3, 37);   /* ClientKeyExchange */
        canned_record(&c[1], 20, 3, 1);    /* ChangeCipherSpec */
        canned_record(&c[1], 22, 3, 40);   /* Finished */
        canned_record(&s[1], 20, 3, 1);    /* ChangeCipherSpec */
        canned_record(&s[1], 22, 3, 40);   /* Finished */
        canned_record(&c[2], 23, 3, 256);  /* the request */
        canned_record(&s[2], 23, 3, 1024); /* the response, in two records */
        canned_record(&s[2], 23, 3, 512);
        n = 3;
    } else {
        return 0;
    }
    for (int i = 0; i < n; i++)
        steps[i] = (struct canned_step){ c[i].b, c[i].len, s[i].b, s[i].len };
    return n;
}

#endif
