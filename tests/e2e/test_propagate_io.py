"""Deadline propagation through unmodified programs' own I/O: redis-cli's traffic with
propagation on is unchanged (the same replies as natively, no line from timebox), and a
threaded python3 HTTP server under scope=request gives each request on a keep-alive
connection a budget of its own, which its outbound call draws on and passes downstream."""

import http.client
import http.server
import os
import sys
import tempfile
import threading
import time

import lib
from test_programs import RedisServer

lib.scrub_timebox_env()


@lib.timeout(30)
def test_propagate_redis_cli_unchanged():
    script = [["SET", "k", "GET / HTTP/1.1"], ["GET", "k"], ["INCR", "n"],
              ["RPUSH", "l", "a", "b"], ["LRANGE", "l", "0", "-1"], ["NOSUCHCOMMAND"]]
    with RedisServer() as redis:
        def play(env):
            out = []
            for args in script:
                res = redis.cli(args, env=env)
                assert not res.timed_out, res
                out.append((res.returncode, res.stdout, res.stderr))
            return out
        native = play(lib.native_env())
        assert redis.cli(["FLUSHALL"]).stdout.strip() == "OK"
        timed = play(lib.preload_env({"TIMEBOX_DEADLINE": "2s", "TIMEBOX_PROPAGATE": "1"}))
        assert timed == native, (native, timed)
        assert native[1] == (0, "GET / HTTP/1.1\n", ""), native


# The server under test: per request, one call to a downstream that never answers, made
# with http.client (no timeout of its own); the response tells how it ended and when.
SERVER = r'''
import http.client, http.server, socketserver, sys, time
down = int(sys.argv[2])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", down)
        try:
            c.request("GET", "/inventory")
            c.getresponse()
            err = "none"
        except OSError as e:
            err = type(e).__name__ + ":" + str(e.errno)
        c.close()
        body = ("%s %.1f" % (err, (time.monotonic() - t0) * 1000)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
'''


class StalledDownstream:
    """A native downstream in this process: records each request's X-Deadline-Ms, then
    holds the connection without answering until the caller goes away."""

    def __init__(self):
        self.told = []
        self.cv = threading.Condition()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                with outer.cv:
                    outer.told.append(self.headers.get("X-Deadline-Ms"))
                    outer.cv.notify_all()
                while self.rfile.read(1):
                    pass

        class S(http.server.ThreadingHTTPServer):
            daemon_threads = True

        self.srv = S(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def wait(self, n):
        with self.cv:
            assert self.cv.wait_for(lambda: len(self.told) >= n, timeout=10), self.told
            return self.told[n - 1]

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@lib.timeout(40)
def test_propagate_python_server_request_scope():
    down = StalledDownstream()
    d = tempfile.mkdtemp(prefix="tb-prop-")
    portfile = os.path.join(d, "port")
    env = lib.preload_env({"TIMEBOX_SCOPE": "request", "TIMEBOX_PROPAGATE": "1",
                           "TIMEBOX_DEADLINE": "700ms"})
    proc = lib.subprocess.Popen([sys.executable, "-c", SERVER, portfile, str(down.port)],
                                env=env, stdin=lib.subprocess.DEVNULL,
                                stderr=lib.subprocess.PIPE, text=True)
    try:
        lib.wait_for(lambda: os.path.exists(portfile) or proc.poll() is not None,
                     timeout=10, what="the python server to listen")
        assert proc.poll() is None, proc.stderr.read()
        with open(portfile) as f:
            port = int(f.read())
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        cases = [({"X-Deadline-Ms": "300"}, 300), ({"x-envoy-expected-rq-timeout-ms": "200"}, 200),
                 ({}, 700)]
        for i, (hdrs, budget) in enumerate(cases, 1):
            t0 = time.monotonic()
            conn.request("GET", "/order", headers=hdrs)
            resp = conn.getresponse()
            body = resp.read().decode()
            ms = (time.monotonic() - t0) * 1000
            told = down.wait(i)
            print("request %d %s: response after %.0f ms, outbound call %s, downstream told %s"
                  % (i, hdrs or "(no header)", ms, body, told))
            err, call_ms = body.split()
            assert err.endswith(":110"), body            # ETIMEDOUT, from the budget
            assert ms >= budget, (ms, budget)           # never early
            assert ms < budget + 1500, (ms, budget)
            assert told is not None and 0 < int(told) < budget, (told, budget)
            # The same keep-alive connection each time: a fresh budget per request.
            assert float(call_ms) <= budget + 1500, body
        conn.close()
    finally:
        proc.kill()
        proc.wait()
        down.close()
        lib.subprocess.run(["rm", "-rf", d])


# A pre-fork server: two processes accept on one listener, each serving one request at a
# time (http.server without threads), as Apache's prefork or gunicorn's sync workers do.
PREFORK = SERVER.replace("socketserver.ThreadingMixIn, ", "").replace(
    "s.serve_forever()", "for _ in range(2):\n    if os.fork() == 0:\n        s.serve_forever()\n"
    "os.wait()")


@lib.timeout(40)
def test_propagate_prefork_server_request_scope():
    down = StalledDownstream()
    d = tempfile.mkdtemp(prefix="tb-prop-")
    portfile = os.path.join(d, "port")
    env = lib.preload_env({"TIMEBOX_SCOPE": "request", "TIMEBOX_PROPAGATE": "1",
                           "TIMEBOX_DEADLINE": "700ms"})
    proc = lib.subprocess.Popen([sys.executable, "-c", PREFORK, portfile, str(down.port)],
                                env=env, stdin=lib.subprocess.DEVNULL, start_new_session=True,
                                stderr=lib.subprocess.PIPE, text=True)
    try:
        lib.wait_for(lambda: os.path.exists(portfile) or proc.poll() is not None,
                     timeout=10, what="the pre-fork server to listen")
        assert proc.poll() is None, proc.stderr.read()
        with open(portfile) as f:
            port = int(f.read())
        n = 0
        for budget in (250, 400):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            for _ in range(2):  # two requests per connection, in whichever process took it
                t0 = time.monotonic()
                conn.request("GET", "/order", headers={"X-Deadline-Ms": str(budget)})
                body = conn.getresponse().read().decode()
                ms = (time.monotonic() - t0) * 1000
                n += 1
                told = down.wait(n)
                print("pre-fork, X-Deadline-Ms %d: response after %.0f ms, outbound call %s, "
                      "downstream told %s" % (budget, ms, body, told))
                assert body.split()[0].endswith(":110"), body
                assert budget <= ms < budget + 1500, (ms, budget)
                assert told is not None and 0 < int(told) < budget, (told, budget)
            conn.close()
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        down.close()
        lib.subprocess.run(["rm", "-rf", d])
