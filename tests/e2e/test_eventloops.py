"""Event-loop programs, which wait in epoll_wait rather than in a blocking read: Node.js's
http module (libuv), Python asyncio and aiohttp, the JDK HttpClient (NIO), a libevent client
(levcli: bufferevents on libevent's epoll backend), a raw-epoll C client (evcli: level- and
edge-triggered, one-shot, sliced waits) and redis-benchmark (ae). Against the fault server
each is cut at the limit of the phase it stalls in (connect, first_byte, deadline) and
reports its own error; against a server that answers its output is unchanged, and a pooled
keep-alive connection resting longer than the read timeout is kept and reused. Without
timebox the stalled runs do not end by themselves (checked for a short while, not waited
out).

Timing bounds as in test_programs: never early (elapsed >= limit, and the log line's
elapsed_ms >= limit_ms), and fires (at most the limit plus slack; Node.js starts slowly)."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import lib
from lib import SLACK_MS, FaultServer

lib.scrub_timebox_env()

STARTUP_MS = {"": 0, "address": 500, "undefined": 200, "thread": 3000}[lib.SANITIZE]
NODE_STARTUP_MS = 2500  # node's own start-up on a busy 2-core machine
EVCLI = lib.client("evcli")

# GET url (node -e: the first argument is argv[1]), print the body; the error's code on
# stderr, exit 2 (request) or 3 (response).
NODE_GET = r"""
const http = require('http');
const req = http.get(process.argv[1], (res) => {
  res.setEncoding('latin1');
  res.on('data', (c) => process.stdout.write(c));
  res.on('error', (e) => { console.error('node error: ' + e.code); process.exitCode = 3; });
});
req.on('error', (e) => { console.error('node error: ' + e.code); process.exitCode = 2; });
"""

# Two GETs on one keep-alive agent, `pause` ms apart: prints each body and whether the
# second request went out on the pooled socket.
NODE_KEEPALIVE = r"""
const http = require('http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function get(url, then) {
  const req = http.get(url, { agent }, (res) => {
    let body = '';
    res.on('data', (c) => body += c);
    res.on('end', () => then(body, req.reusedSocket));
  });
  req.on('error', (e) => { console.error('node error: ' + e.code); process.exit(2); });
}
get(process.argv[1], (b1) => {
  setTimeout(() => get(process.argv[1], (b2, reused) => {
    process.stdout.write(b1 + b2 + 'reused=' + reused + '\n');
    agent.destroy();
  }), Number(process.argv[2]));
});
"""

# asyncio.open_connection, a GET, read to EOF; an OSError is printed with its errno.
PY_ASYNCIO = r"""
import asyncio, sys
async def main(port, path):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(("GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % path).encode())
    await w.drain()
    body = await r.read()
    sys.stdout.write(body.decode("latin1"))
    w.close()
try:
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
except OSError as e:
    print("asyncio error: %s errno=%s" % (type(e).__name__, e.errno), file=sys.stderr)
    sys.exit(2)
"""


def need(prog):
    if shutil.which(prog) is None:
        lib.skip("%s is not installed (tests/deps.sh installs it)" % prog)


def assert_cut(res, limit_ms, phase, what, startup_ms=0, count=1):
    """res ended by itself, not before limit_ms nor much after, with `count` timebox
    timeout lines, the last for `phase`."""
    assert not res.timed_out, "%s did not end: %r" % (what, res)
    assert res.elapsed_ms >= limit_ms * count, "%s ended early: %r" % (what, res)
    assert res.elapsed_ms < limit_ms * count + SLACK_MS + STARTUP_MS + startup_ms, (
        "%s fired late: %r" % (what, res))
    events = lib.tb_records(res.stderr, event="timeout")
    assert len(events) == count, "%s: expected %d timeout line(s): %r" % (what, count, res)
    ev = events[-1]
    assert ev["phase"] == phase, (phase, res)
    assert int(ev["limit_ms"]) == limit_ms, res
    assert int(ev["elapsed_ms"]) >= limit_ms, res
    assert res.returncode != 0, res


def assert_native_hangs(cmd, what, wait_s=1.5):
    """Without timebox the stalled run is still going after wait_s (then killed)."""
    res = lib.run(cmd, env=lib.native_env(clean=True), timeout=wait_s)
    assert res.timed_out, "%s ended natively: %r" % (what, res)


def assert_unchanged(cmd, extra=None):
    native = lib.run(cmd, env=lib.native_env(clean=True), timeout=20)
    limits = {"TIMEBOX_CONNECT_TIMEOUT": "2s", "TIMEBOX_READ_TIMEOUT": "2s",
              "TIMEBOX_WRITE_TIMEOUT": "2s", "TIMEBOX_DEADLINE": "8s"}
    limits.update(extra or {})
    timed = lib.run(cmd, env=lib.preload_env(limits), timeout=20)
    assert not native.timed_out and not timed.timed_out, (native, timed)
    assert timed.returncode == native.returncode == 0, (native, timed)
    assert timed.stdout == native.stdout, (native, timed)
    assert "timebox" not in timed.stderr, timed
    return native


def stalls(srv, flavour):
    """(port, path, env, limit_ms, phase) of one stalled scenario."""
    if flavour == "first_byte":
        return srv.port, "/stall", {"TIMEBOX_READ_TIMEOUT": "500ms"}, 500, "first_byte"
    if flavour == "connect":
        return (srv.blackhole_port, "/ok", {"TIMEBOX_CONNECT_TIMEOUT": "500ms"}, 500,
                "connect")
    # 30 bytes, one every 100 ms: each gap well inside the read timeout, the whole 3 s
    return (srv.port, "/drip?ms=100&n=30",
            {"TIMEBOX_READ_TIMEOUT": "2s", "TIMEBOX_DEADLINE": "1s"}, 1000, "deadline")


# ---- the raw-epoll client ----------------------------------------------------------------

MODES = [[], ["--et"], ["--oneshot"], ["--slice", "50"], ["--et", "--oneshot", "--slice", "30"]]


@lib.timeout(60)
def test_evcli_unchanged():
    with FaultServer() as srv:
        for mode in MODES:
            out = assert_unchanged([EVCLI] + mode + [str(srv.port), "/ok?order=3"])
            assert out.stdout.endswith("ok order=3\n"), out
        big = assert_unchanged([EVCLI, "--slice", "20", str(srv.port), "/big?bytes=300000"])
        assert len(big.stdout) > 300000, big.returncode


@lib.timeout(60)
def test_evcli_stall_cut_at_first_byte():
    with FaultServer() as srv:
        for mode in MODES:
            port, path, env, limit, phase = stalls(srv, "first_byte")
            res = lib.run([EVCLI] + mode + [str(port), path], env=lib.preload_env(env),
                          timeout=10)
            assert_cut(res, limit, phase, "evcli %s" % " ".join(mode))
            assert "evcli: recv: Connection timed out" in res.stderr, res
        assert_native_hangs([EVCLI, str(srv.port), "/stall"], "evcli")


@lib.timeout(60)
def test_evcli_busy_loop_not_charged():
    # epoll_wait(..., 0) in a loop never waits: it is not marked, so a stalled response
    # read by a busy loop is not cut by its read timeout (as natively, it spins on).
    with FaultServer() as srv:
        res = lib.run([EVCLI, "--slice", "0", str(srv.port), "/stall"],
                      env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "300ms"}), timeout=1.5)
        assert res.timed_out, res
        assert not lib.tb_records(res.stderr, event="timeout"), res


@lib.timeout(30)
def test_busy_loop_still_cuts_a_stalled_socket_at_its_deadline():
    # A loop whose epoll_wait(-1) always finds another socket ready never blocks, and
    # timebox then marks nothing (the kernel is asked first without blocking); the
    # registrations are still settled every few ms, so the stalled one is cut at its
    # deadline all the same. Natively the loop spins to its own limit.
    cmd = [lib.client("evbusy"), "3000"]
    res = lib.run(cmd, env=lib.native_env(clean=True), timeout=10)
    assert res.returncode == 1 and "a_after_ms=never" in res.stdout, res
    res = lib.run(cmd, env=lib.preload_env({"TIMEBOX_DEADLINE": "300ms"}), timeout=10)
    assert res.returncode == 0, res
    assert "recv=-1 errno=ETIMEDOUT" in res.stdout, res
    after_ms = float(res.stdout.split("a_after_ms=")[1].split()[0])
    assert after_ms < 300 + SLACK_MS + STARTUP_MS, res
    a_fd = res.stdout.split("a_fd=")[1].split()[0]
    cut = [r for r in lib.tb_records(res.stderr, event="timeout") if r["fd"] == a_fd]
    assert len(cut) == 1 and cut[0]["phase"] == "deadline", res
    assert int(cut[0]["elapsed_ms"]) >= 300, res


@lib.timeout(60)
def test_evcli_blackhole_cut_at_connect():
    with FaultServer() as srv:
        for mode in (["--slice", "50"], ["--et"], ["--oneshot"]):
            port, path, env, limit, phase = stalls(srv, "connect")
            res = lib.run([EVCLI] + mode + [str(port), path], env=lib.preload_env(env),
                          timeout=10)
            assert_cut(res, limit, phase, "evcli connect %s" % " ".join(mode))
            assert "evcli: connect: Connection timed out" in res.stderr, res


@lib.timeout(60)
def test_evcli_drip_cut_at_deadline():
    with FaultServer() as srv:
        port, path, env, limit, phase = stalls(srv, "deadline")
        res = lib.run([EVCLI, "--slice", "50", str(port), path], env=lib.preload_env(env),
                      timeout=10)
        assert_cut(res, limit, phase, "evcli drip")
        assert "evcli: recv: Connection timed out" in res.stderr, res


@lib.timeout(60)
def test_evcli_echo_churn_unchanged():
    # One EPOLL_CTL_MOD per exchange (libuv's read/write switch), 2000 exchanges: nothing is
    # cut, nothing logged, and a read timeout shorter than the run never fires.
    bench = os.path.join(lib.BUILD, "tests", "bench", "echo_server")
    if not os.path.exists(bench):
        lib.skip("tests/bench/echo_server is not built (make e2e builds it)")
    with tempfile.TemporaryDirectory() as d:
        pf = os.path.join(d, "port")
        srv = subprocess.Popen([bench, "--port-file", pf], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            lib.wait_for(lambda: os.path.exists(pf), what="echo server port file")
            port = open(pf).read().strip()
            for mode in ([], ["--et"], ["--oneshot"]):
                res = lib.run([EVCLI] + mode + ["--echo", "2000", port],
                              env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "200ms"}),
                              timeout=20)
                assert res.returncode == 0 and "exchanges=2000" in res.stdout, res
                assert "timebox" not in res.stderr, res
        finally:
            srv.terminate()
            srv.wait()


# ---- Node.js (libuv) ---------------------------------------------------------------------

@lib.timeout(60)
def test_node_http_unchanged():
    need("node")
    with FaultServer() as srv:
        out = assert_unchanged(["node", "-e", NODE_GET, srv.url("/ok?order=5")])
        assert out.stdout == "ok order=5\n", out
        big = assert_unchanged(["node", "-e", NODE_GET, srv.url("/big?bytes=200000")])
        assert len(big.stdout) == 200000, big.returncode


@lib.timeout(90)
def test_node_http_stall_blackhole_drip():
    need("node")
    with FaultServer() as srv:
        # node's start-up here and now: a healthy run's time, doubled for the noise.
        ok = lib.run(["node", "-e", NODE_GET, srv.url("/ok")], env=lib.native_env(clean=True),
                     timeout=20)
        assert ok.returncode == 0, ok
        startup = max(NODE_STARTUP_MS, 2 * ok.elapsed_ms)
        for flavour in ("first_byte", "connect", "deadline"):
            port, path, env, limit, phase = stalls(srv, flavour)
            url = "http://127.0.0.1:%d%s" % (port, path)
            res = lib.run(["node", "-e", NODE_GET, url], env=lib.preload_env(env),
                          timeout=20)
            assert_cut(res, limit, phase, "node " + flavour, startup_ms=startup)
            assert "node error: ETIMEDOUT" in res.stderr, res
        assert_native_hangs(["node", "-e", NODE_GET, srv.url("/stall")], "node",
                            wait_s=4)


@lib.timeout(60)
def test_node_keepalive_idle_pooled_socket_is_reused():
    # A pooled keep-alive connection idle for 3 s with a 1 s read timeout: nobody is waiting
    # for a response, so it must not be cut, and the second request reuses it. Telling an
    # idle pooled connection from a stalled response is the protocol framing's job.
    need("node")
    probe = lib.run(["/bin/true"], env=lib.preload_env({"TIMEBOX_PROTOCOL": "auto"}))
    if "config_error" in probe.stderr:
        lib.skip("needs the framing layer (TIMEBOX_PROTOCOL is not a setting yet)")
    with FaultServer() as srv:
        url = srv.url("/ok?order=1")
        res = lib.run(["node", "-e", NODE_KEEPALIVE, url, "3000"],
                      env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "1s",
                                           "TIMEBOX_PROTOCOL": "auto"}), timeout=20)
        assert res.returncode == 0, res
        assert res.stdout.endswith("reused=true\n"), res
        assert not lib.tb_records(res.stderr, event="timeout"), res


# Requests at once on one event loop, then one cut at its deadline and another right after.
NODE_OVERLAP = r"""
const http = require('http');
const base = process.argv[1];
function get(path) {
  return new Promise((resolve) => {
    const req = http.get(base + path, (res) => {
      let b = '';
      res.setEncoding('latin1');
      res.on('data', (c) => b += c);
      res.on('end', () => resolve('ok ' + b.trim()));
      res.on('error', (e) => resolve('error ' + e.code));
    });
    req.on('error', (e) => resolve('error ' + e.code));
  });
}
(async () => {
  const a = get('/delay?ms=1800&order=1');
  await new Promise((r) => setTimeout(r, 1500));
  const b = get('/delay?ms=1000&order=2');
  console.log('a ' + await a);
  console.log('b ' + await b);
  console.log('c ' + await get('/drip?ms=150&n=20'));
  console.log('d ' + await get('/ok?order=4'));
})();
"""


@lib.timeout(60)
def test_node_overlapping_requests_keep_their_own_deadlines():
    # An event loop makes its calls at once: a request sent while another awaits its answer
    # must not inherit that one's deadline (b: 1 s, sent 1.5 s into a's 1.8 s, deadline 2 s;
    # cut after 0.5 s before), and a request cut at its deadline makes no other request to
    # that service fail for the retry window (d: refused at once before).
    need("node")
    with FaultServer() as srv:
        env = {"TIMEBOX_DEADLINE": "2s", "TIMEBOX_READ_TIMEOUT": "5s"}
        native = lib.run(["node", "-e", NODE_OVERLAP, srv.url("")],
                         env=lib.native_env(clean=True), timeout=30)
        res = lib.run(["node", "-e", NODE_OVERLAP, srv.url("")], env=lib.preload_env(env),
                      timeout=30)
    assert native.returncode == 0 and native.stdout.splitlines()[2] == "c ok " + "x" * 20, \
        native
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and len(lines) == 4, res
    assert lines[0] == "a ok ok order=1" and lines[1] == "b ok ok order=2", res
    assert lines[2].startswith("c error"), res
    assert lines[3] == "d ok ok order=4", res
    cuts = lib.tb_records(res.stderr, event="timeout")
    assert len(cuts) == 1 and cuts[0]["phase"] == "deadline", res
    assert int(cuts[0]["elapsed_ms"]) >= 2000, res
    assert not lib.tb_records(res.stderr, event="reject"), res


# ---- JDK HttpClient (NIO selector on epoll) -----------------------------------------------

JAVA_STARTUP_MS = 3000  # the JVM's start-up, at least
JAVA_GET = r"""
import java.net.URI;
import java.net.http.*;
public class Get {
    public static void main(String[] a) throws Exception {
        HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        try {
            HttpResponse<String> r = c.send(HttpRequest.newBuilder(URI.create(a[0])).build(),
                                            HttpResponse.BodyHandlers.ofString());
            System.out.print(r.body());
        } catch (java.io.IOException e) {
            System.err.println("java error: " + e);
            System.exit(2);
        }
    }
}
"""


@lib.timeout(120)
def test_jdk_httpclient():
    # HttpClient retries an idempotent GET once when the connection fails, so a stall is
    # cut twice (two timeout lines, at least twice the limit), then the error surfaces.
    need("java")
    need("javac")
    with tempfile.TemporaryDirectory() as d, FaultServer() as srv:
        src = os.path.join(d, "Get.java")
        with open(src, "w") as f:
            f.write(JAVA_GET)
        built = lib.run(["javac", "-d", d, src], env=lib.native_env(clean=True), timeout=60)
        assert built.returncode == 0, built
        java = ["java", "-cp", d, "Get"]
        # The JVM's own threads race under ThreadSanitizer's runtime, timebox or not.
        lib.require_runs_with_sanitizer(java + [srv.url("/ok?order=8")])
        out = assert_unchanged(java + [srv.url("/ok?order=9")])
        assert out.stdout == "ok order=9\n", out
        # The JVM's start-up here and now: a healthy run's time, doubled for the noise.
        startup = max(JAVA_STARTUP_MS, 2 * out.elapsed_ms)
        for flavour in ("first_byte", "connect"):
            port, path, env, limit, phase = stalls(srv, flavour)
            url = "http://127.0.0.1:%d%s" % (port, path)
            res = lib.run(java + [url], env=lib.preload_env(env), timeout=30)
            assert_cut(res, limit, phase, "java " + flavour, startup_ms=startup, count=2)
            assert "java error:" in res.stderr, res


# ---- Python asyncio ----------------------------------------------------------------------

@lib.timeout(60)
def test_asyncio_unchanged():
    with FaultServer() as srv:
        out = assert_unchanged([sys.executable, "-c", PY_ASYNCIO, str(srv.port), "/ok?order=7"])
        assert out.stdout.endswith("ok order=7\n"), out


@lib.timeout(90)
def test_asyncio_stall_blackhole_drip():
    with FaultServer() as srv:
        # Python's start-up here and now (a healthy run's time, doubled for the noise): on a
        # loaded 2-core machine it alone took 750 ms, and a cut on time at 509 ms ended
        # the process at 1,249 ms.
        out = assert_unchanged([sys.executable, "-c", PY_ASYNCIO, str(srv.port), "/ok?order=8"])
        startup = 2 * out.elapsed_ms
        for flavour in ("first_byte", "connect", "deadline"):
            port, path, env, limit, phase = stalls(srv, flavour)
            res = lib.run([sys.executable, "-c", PY_ASYNCIO, str(port), path],
                          env=lib.preload_env(env), timeout=20)
            assert_cut(res, limit, phase, "asyncio " + flavour, startup_ms=startup)
            assert "errno=110" in res.stderr, res  # ETIMEDOUT
        assert_native_hangs([sys.executable, "-c", PY_ASYNCIO, str(srv.port), "/stall"],
                            "asyncio")


# ---- redis-benchmark (ae) against a Redis that accepts and never answers ------------------

class SilentListener:
    """Accepts connections on 127.0.0.1 and never answers (a stalled Redis)."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def _serve(self):
        try:
            while True:
                self.held.append(self.sock.accept()[0])
        except OSError:
            pass

    def __exit__(self, *exc):
        self.sock.close()
        for c in self.held:
            c.close()
        return False


@lib.timeout(60)
def test_redis_benchmark_stalled_server():
    # redis-benchmark first fetches CONFIG with a blocking hiredis call (cut by the read
    # hook), then runs PING on its ae event loop in epoll_wait: cut there too.
    need("redis-benchmark")
    cmd = ["redis-benchmark", "-p", None, "-n", "1", "-c", "1", "-t", "ping"]
    with SilentListener() as srv:
        cmd[2] = str(srv.port)
        res = lib.run(cmd, env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "500ms"}),
                      timeout=15)
        assert_cut(res, 500, "first_byte", "redis-benchmark", count=2)
        assert "Connection timed out" in res.stderr, res
        assert_native_hangs(cmd, "redis-benchmark")


# ---- libevent (bufferevents on libevent's epoll backend, libevent's timers) ---------------

LEVCLI = lib.client("levcli")


def native_drip_completes(cmd, what):
    """Without timebox the drip (30 bytes, one every 100 ms) completes, in 3 s or more."""
    res = lib.run(cmd, env=lib.native_env(clean=True), timeout=20)
    assert res.returncode == 0 and res.elapsed_ms >= 3000, "%s native drip: %r" % (what, res)
    return res


@lib.timeout(60)
def test_libevent_unchanged():
    with FaultServer() as srv:
        port = str(srv.port)
        out = assert_unchanged([LEVCLI, port, "/ok?order=4"])
        assert out.stdout == "ok order=4\nconnections=1 reused=-\n", out
        out = assert_unchanged([LEVCLI, "--count", "3", port, "/ok?order=5"])
        assert out.stdout == "ok order=5\n" * 3 + "connections=1 reused=yes\n", out
        big = assert_unchanged([LEVCLI, "--count", "2", port, "/big?bytes=300000"])
        assert len(big.stdout) == 600000 + len("connections=1 reused=yes\n"), big.returncode


@lib.timeout(60)
def test_libevent_stall_blackhole_drip():
    with FaultServer() as srv:
        for flavour, step in (("first_byte", "read"), ("connect", "connect"),
                              ("deadline", "read")):
            port, path, env, limit, phase = stalls(srv, flavour)
            res = lib.run([LEVCLI, str(port), path], env=lib.preload_env(env), timeout=10)
            assert_cut(res, limit, phase, "levcli " + flavour)
            assert ("levcli: %s: Connection timed out (ETIMEDOUT)" % step) in res.stderr, res
        assert_native_hangs([LEVCLI, str(srv.port), "/stall"], "levcli")
        assert_native_hangs([LEVCLI, str(srv.blackhole_port), "/ok"], "levcli connect")
        native_drip_completes([LEVCLI, str(srv.port), "/drip?ms=100&n=30"], "levcli")


@lib.timeout(60)
def test_libevent_keepalive_idle_pooled_connection_is_reused():
    # The connection rests 3 s between two requests, still registered for reading (as
    # pools keep it, to notice the server's close), with a 1 s read timeout: nobody waits
    # for an answer, so it is not cut, and the second request goes out on it (the server
    # sees one connection). A cut would show as "levcli: idle: ..." and a second connection.
    with FaultServer() as srv:
        cmd = [LEVCLI, "--count", "2", "--pause", "3000", str(srv.port), "/ok?order=1"]
        want = "ok order=1\nok order=1\nconnections=1 reused=yes\n"
        native = lib.run(cmd, env=lib.native_env(clean=True), timeout=20)
        assert native.returncode == 0 and native.stdout == want, native
        srv.reset_stats()
        res = lib.run(cmd, env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "1s"}), timeout=20)
        assert res.returncode == 0 and res.stdout == want, res
        assert res.elapsed_ms >= 3000, res
        assert "timebox" not in res.stderr and "levcli: idle" not in res.stderr, res
        stats = srv.stats()
        assert stats["connections"] == 1 and stats["requests"] == 2, (stats, res)


# ---- aiohttp (asyncio's selector loop on epoll) --------------------------------------------

# Debian's python3-aiohttp is installed for Debian's own interpreter, /usr/bin/python3: the
# python3 on PATH (sys.executable included) may be another build that cannot import it.
# -I: isolated from PYTHON* variables and the user's site-packages.
SYS_PYTHON = ["/usr/bin/python3", "-I"]
AIOHTTP_STARTUP_MS = 1500  # importing aiohttp on a busy 2-core machine

# COUNT GETs of url on one ClientSession whose connector keeps one keep-alive connection,
# PAUSE ms apart; prints each body, then "connections=C reused=R" as the connector's trace
# hooks saw them (connections created, pooled connections reused). No timeout of its own
# (ClientTimeout(total=None)): timebox's limits are the only ones. An error is printed with
# its type and the errno found on it or its causes, exit 2.
PY_AIOHTTP = r"""
import asyncio, sys
import aiohttp

def errno_of(e):
    while e is not None:
        if getattr(e, "errno", None):
            return e.errno
        e = e.__cause__ or e.__context__
    return None

async def main(url, count, pause_ms):
    seen = {"create": 0, "reuse": 0}
    async def created(session, ctx, params): seen["create"] += 1
    async def reused(session, ctx, params): seen["reuse"] += 1
    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(created)
    trace.on_connection_reuseconn.append(reused)
    conn = aiohttp.TCPConnector(limit=1, keepalive_timeout=60)
    async with aiohttp.ClientSession(connector=conn, trace_configs=[trace],
                                     timeout=aiohttp.ClientTimeout(total=None)) as s:
        for i in range(count):
            if i:
                await asyncio.sleep(pause_ms / 1000.0)
            async with s.get(url) as r:
                body = await r.read()
            sys.stdout.write(body.decode("latin1"))
    print("connections=%d reused=%d" % (seen["create"], seen["reuse"]))

try:
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
except (OSError, aiohttp.ClientError) as e:
    print("aiohttp error: %s errno=%s" % (type(e).__name__, errno_of(e)), file=sys.stderr)
    sys.exit(2)
"""


def aiohttp_cmd(url, count=1, pause_ms=0):
    return SYS_PYTHON + ["-c", PY_AIOHTTP, url, str(count), str(pause_ms)]


def need_aiohttp():
    """Skips unless Debian's interpreter imports aiohttp."""
    if not os.path.exists(SYS_PYTHON[0]):
        lib.skip("%s is not installed (tests/deps.sh installs python3)" % SYS_PYTHON[0])
    probe = lib.run(SYS_PYTHON + ["-c", "import aiohttp"], env=lib.native_env(clean=True),
                    timeout=20)
    if probe.returncode != 0:
        lib.skip("/usr/bin/python3 cannot import aiohttp (tests/deps.sh installs "
                 "python3-aiohttp)")


@lib.timeout(60)
def test_aiohttp_unchanged():
    need_aiohttp()
    with FaultServer() as srv:
        lib.require_runs_with_sanitizer(aiohttp_cmd(srv.url("/ok")))
        out = assert_unchanged(aiohttp_cmd(srv.url("/ok?order=6"), count=3))
        assert out.stdout == "ok order=6\n" * 3 + "connections=1 reused=2\n", out
        big = assert_unchanged(aiohttp_cmd(srv.url("/big?bytes=300000")))
        assert len(big.stdout) == 300000 + len("connections=1 reused=0\n"), big.returncode


@lib.timeout(90)
def test_aiohttp_stall_blackhole_drip():
    # A drip cut in the body is aiohttp's own ClientPayloadError ("Response payload is not
    # completed"): it does not carry the transport's errno.
    need_aiohttp()
    with FaultServer() as srv:
        lib.require_runs_with_sanitizer(aiohttp_cmd(srv.url("/ok")))
        # aiohttp's import here and now: a healthy run's time, doubled for the noise.
        ok = lib.run(aiohttp_cmd(srv.url("/ok")), env=lib.native_env(clean=True), timeout=20)
        assert ok.returncode == 0, ok
        startup = max(AIOHTTP_STARTUP_MS, 2 * ok.elapsed_ms)
        for flavour, error in (("first_byte", "ClientOSError errno=110"),
                               ("connect", "ClientConnectorError errno=110"),
                               ("deadline", "ClientPayloadError")):
            port, path, env, limit, phase = stalls(srv, flavour)
            url = "http://127.0.0.1:%d%s" % (port, path)
            res = lib.run(aiohttp_cmd(url), env=lib.preload_env(env), timeout=20)
            assert_cut(res, limit, phase, "aiohttp " + flavour, startup_ms=startup)
            assert "aiohttp error: " + error in res.stderr, res
        assert_native_hangs(aiohttp_cmd(srv.url("/stall")), "aiohttp", wait_s=3)
        assert_native_hangs(aiohttp_cmd("http://127.0.0.1:%d/ok" % srv.blackhole_port),
                            "aiohttp connect", wait_s=3)
        native_drip_completes(aiohttp_cmd(srv.url("/drip?ms=100&n=30")), "aiohttp")


@lib.timeout(60)
def test_aiohttp_keepalive_idle_pooled_connection_is_reused():
    # The connector's pooled connection rests 3 s (asyncio keeps it registered for reading)
    # with a 1 s read timeout: not cut, and the second request reuses it, as the connector's
    # trace hooks and the server (one connection, two requests) both see.
    need_aiohttp()
    with FaultServer() as srv:
        lib.require_runs_with_sanitizer(aiohttp_cmd(srv.url("/ok")))
        cmd = aiohttp_cmd(srv.url("/ok?order=2"), count=2, pause_ms=3000)
        want = "ok order=2\nok order=2\nconnections=1 reused=1\n"
        native = lib.run(cmd, env=lib.native_env(clean=True), timeout=20)
        assert native.returncode == 0 and native.stdout == want, native
        srv.reset_stats()
        res = lib.run(cmd, env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "1s"}), timeout=20)
        assert res.returncode == 0 and res.stdout == want, res
        assert res.elapsed_ms >= 3000, res
        assert "timebox" not in res.stderr, res
        stats = srv.stats()
        assert stats["connections"] == 1 and stats["requests"] == 2, (stats, res)
