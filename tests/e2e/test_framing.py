"""Calls as the protocol sees them: real programs whose connections the framing follows.
A TLS handshake is one call with its first request (a server late on every flight is cut at
the one deadline, not once per flight); an idle keep-alive connection rests (no phase and no
deadline while a poll loop holds it); a subscribed Redis connection is a session (no
deadline); a blocking Redis command is an ordinary call.

Timing bounds as everywhere: never early, generous slack."""

import os
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time

import lib
from lib import SLACK_MS

lib.scrub_timebox_env()

STARTUP_MS = {"": 0, "address": 500, "undefined": 200, "thread": 3000}[lib.SANITIZE]

FLIGHT_DELAY = 0.7  # every server flight of the slow TLS server, in seconds


def need(*programs):
    for prog in programs:
        if shutil.which(prog) is None:
            lib.skip("%s is not installed (tests/deps.sh installs it)" % prog)
        lib.require_runs_with_sanitizer([prog, "--version"] if prog != "python3"
                                        else [prog, "-c", "pass"])


class SelfSigned:
    """A throw-away key and certificate for CN=localhost (openssl req -x509)."""

    def __enter__(self):
        need("openssl")
        self.dir = tempfile.mkdtemp(prefix="tb-tls-")
        self.key = os.path.join(self.dir, "key.pem")
        self.cert = os.path.join(self.dir, "cert.pem")
        res = lib.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                       "-subj", "/CN=localhost", "-days", "1", "-keyout", self.key,
                       "-out", self.cert], env=lib.native_env(), timeout=30)
        assert res.returncode == 0, res
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


class SlowTLSServer:
    """A TLS server on 127.0.0.1 that sends each of its flights `delay` seconds after the
    client's flight that it answers: every handshake flight, and the HTTP response. It runs
    the handshake by hand (ssl.SSLObject over memory BIOs) so that it controls when bytes
    leave. `max_version`: ssl.TLSVersion for the server's highest version."""

    def __init__(self, certs, max_version, delay=FLIGHT_DELAY):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certs.cert, certs.key)
        self.ctx.maximum_version = max_version
        self.delay = delay
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.sock.close()
        return False

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = self.ctx.wrap_bio(inc, out, server_side=True)
        conn.settimeout(10)
        try:
            while True:  # the handshake: each of our flights goes out late
                try:
                    tls.do_handshake()
                    done = True
                except ssl.SSLWantReadError:
                    done = False
                pending = out.read()
                if pending:
                    time.sleep(self.delay)
                    conn.sendall(pending)
                if done:
                    break
                data = conn.recv(65536)
                if not data:
                    return
                inc.write(data)
            request = b""
            while b"\r\n\r\n" not in request:
                try:
                    request += tls.read(65536)
                except ssl.SSLWantReadError:
                    data = conn.recv(65536)
                    if not data:
                        return
                    inc.write(data)
            body = b"slow tls ok\n"
            tls.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (len(body), body))
            time.sleep(self.delay)
            conn.sendall(out.read())
            time.sleep(0.2)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()


PY_HTTPS = ("import ssl, sys, urllib.request\n"
            "ctx = ssl._create_unverified_context()\n"
            "ctx.maximum_version = getattr(ssl.TLSVersion, sys.argv[2])\n"
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], context=ctx)"
            ".read().decode())\n")


def tls_run(kind, version, env):
    """curl or python3 fetching https://localhost:PORT/ from a SlowTLSServer."""
    with SelfSigned() as certs, SlowTLSServer(certs, version) as srv:
        url = "https://localhost:%d/" % srv.port
        if kind == "curl":
            cmd = ["curl", "-sS", "-k", "--tls-max",
                   "1.2" if version == ssl.TLSVersion.TLSv1_2 else "1.3", url]
        else:
            cmd = ["python3", "-c", PY_HTTPS, url, version.name]
        return lib.run(cmd, env=env, timeout=20)


def check_tls_one_call(kind, version):
    need("curl" if kind == "curl" else "python3")
    native = tls_run(kind, version, lib.native_env())
    flights = 3 if version == ssl.TLSVersion.TLSv1_2 else 2
    assert native.returncode == 0 and native.stdout == "slow tls ok\n", native
    assert native.elapsed_ms >= flights * FLIGHT_DELAY * 1000, native
    res = tls_run(kind, version, lib.preload_env({"TIMEBOX_DEADLINE": "1s"}))
    assert not res.timed_out, res
    assert res.returncode != 0, res
    assert res.elapsed_ms >= 1000, res
    # python3 formats its traceback after the cut (it reads its sources): more room.
    late = SLACK_MS + STARTUP_MS + (600 if kind == "python3" else 0)
    assert res.elapsed_ms < 1000 + late, res
    assert res.elapsed_ms < native.elapsed_ms, (native, res)
    events = lib.tb_records(res.stderr, event="timeout")
    assert len(events) == 1, res
    assert events[0]["phase"] == "deadline", res
    assert int(events[0]["limit_ms"]) == 1000, res
    assert int(events[0]["elapsed_ms"]) >= 1000, res
    return native, res


@lib.timeout(60)
def test_curl_https_handshake_is_one_call_tls13():
    check_tls_one_call("curl", ssl.TLSVersion.TLSv1_3)


@lib.timeout(60)
def test_curl_https_handshake_is_one_call_tls12():
    check_tls_one_call("curl", ssl.TLSVersion.TLSv1_2)


@lib.timeout(60)
def test_python_https_handshake_is_one_call_tls13():
    check_tls_one_call("python3", ssl.TLSVersion.TLSv1_3)


@lib.timeout(60)
def test_python_https_handshake_is_one_call_tls12():
    check_tls_one_call("python3", ssl.TLSVersion.TLSv1_2)


# ---- an idle keep-alive connection in a poll loop ------------------------------------------

class KeepAliveServer:
    """HTTP/1.1 keep-alive on 127.0.0.1: GET /ok answers "ok\\n" (Content-Length) and keeps
    the connection; GET /stall sends its headers and 10 of 100 body bytes, then stalls."""

    def __init__(self, certs=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.ctx = None
        if certs is not None:  # the same server over TLS
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(certs.cert, certs.key)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.sock.close()
        return False

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        buf = b""
        try:
            if self.ctx is not None:
                conn = self.ctx.wrap_socket(conn, server_side=True)
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(4096)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                if head.startswith(b"GET /stall"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
                    time.sleep(8)
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        except OSError:
            pass
        finally:
            conn.close()


# One keep-alive connection: a request, then the connection sits idle in a poll set for
# IDLE_MS (a loop that waits for other work), then another request on it, then (argv[2]
# == "stall") a request whose answer stalls mid-body, read through poll.
POLL_CLIENT = r'''
import select, socket, ssl, sys, time
port, idle_ms, last = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
if len(sys.argv) > 4 and sys.argv[4] == "tls":
    s = ssl._create_unverified_context().wrap_socket(s, server_hostname="localhost")
p = select.poll()
p.register(s, select.POLLIN)

def fetch(path):
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    buf = b""
    while not (b"\r\n\r\n" in buf and buf.endswith(b"ok\n")):
        if not p.poll(10000):
            sys.exit("poll: no answer")
        data = s.recv(4096)
        if not data:
            sys.exit("eof")
        buf += data
    return buf

print(fetch(b"/ok").split(b"\r\n\r\n")[1].decode(), end="")
t0 = time.monotonic()
ev = p.poll(idle_ms)
print("idle events=%r after %d ms" % (ev, (time.monotonic() - t0) * 1000))
print(fetch(b"/ok").split(b"\r\n\r\n")[1].decode(), end="")
if last == "stall":
    s.sendall(b"GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
    while True:
        if not p.poll(10000):
            sys.exit("poll: no answer")
        try:
            data = s.recv(4096)
        except OSError as e:
            sys.exit("recv: %s" % e)
        if not data:
            sys.exit("eof")
'''


def poll_client(port, last, env, tls=False):
    need("python3")
    return lib.run(["python3", "-c", POLL_CLIENT, str(port), "3000", last]
                   + (["tls"] if tls else []), env=env, timeout=30)


@lib.timeout(60)
def test_poll_idle_keepalive_rests():
    """An answered keep-alive connection in a poll set for 3 s, with read_timeout and a
    deadline of 1 s: nothing runs on it while it rests, and the next request works."""
    with KeepAliveServer() as srv:
        res = poll_client(srv.port, "ok", lib.preload_env(
            {"TIMEBOX_READ_TIMEOUT": "1s", "TIMEBOX_DEADLINE": "1s"}))
        assert res.returncode == 0, res
        assert res.stdout.startswith("ok\nidle events=[] after "), res
        assert res.stdout.endswith("ok\n"), res
        assert lib.tb_lines(res.stderr) == [], res


@lib.timeout(60)
def test_poll_idle_tls_keepalive_is_not_cut():
    """The same over TLS, where the framing cannot see HTTP: once application data came
    back, a wait in poll/select/epoll on the connection is not governed (a pooled TLS
    connection an event loop watches for the server's close is never cut). A healthy program
    is told nothing at the default log level; at log_level = info, once. Blocking reads stay
    governed."""
    with SelfSigned() as certs, KeepAliveServer(certs) as srv:
        for level in ("warn", "info"):
            res = poll_client(srv.port, "ok", lib.preload_env(
                {"TIMEBOX_READ_TIMEOUT": "1s", "TIMEBOX_DEADLINE": "1s",
                 "TIMEBOX_LOG_LEVEL": level}), tls=True)
            assert res.returncode == 0, res
            assert res.stdout.startswith("ok\nidle events=[] after "), res
            assert res.stdout.endswith("ok\n"), res
            if level == "warn":
                assert lib.tb_lines(res.stderr) == [], res
                continue
            assert not lib.tb_records(res.stderr, event="timeout"), res
            notes = [r for r in lib.tb_records(res.stderr)
                     if r.get("what") == "tls_answered_wait"]
            assert len(notes) == 1, res


@lib.timeout(60)
def test_poll_stall_mid_body_is_cut_at_read():
    """The same loop, then an answer that stalls after 10 of its 100 body bytes: the
    connection awaits the rest, and the read timeout cuts it."""
    with KeepAliveServer() as srv:
        t0 = time.monotonic()
        res = poll_client(srv.port, "stall", lib.preload_env(
            {"TIMEBOX_READ_TIMEOUT": "1s", "TIMEBOX_DEADLINE": "5s"}))
        assert res.returncode != 0, res
        assert "idle events=[]" in res.stdout, res
        assert "recv:" in res.stderr and "timed out" in res.stderr, res
        events = lib.tb_records(res.stderr, event="timeout")
        assert len(events) == 1, res
        assert events[0]["phase"] == "read", res
        assert int(events[0]["elapsed_ms"]) >= 1000, res
        # 3 s idle, then the cut 1 s after the last bytes.
        assert 4000 <= res.elapsed_ms < 4000 + SLACK_MS + STARTUP_MS + 300, res
        assert (time.monotonic() - t0) * 1000 >= res.elapsed_ms


# ---- Redis: a subscription is a session, a blocking command an ordinary call ---------------

def redis_server():
    import test_programs
    return test_programs.RedisServer()


@lib.timeout(60)
def test_redis_subscribe_is_a_session():
    """redis-cli SUBSCRIBE with a 1 s deadline and read timeout: the subscribed connection
    is a session (no deadline, no read limit), so messages 1.5 s apart all arrive."""
    with redis_server() as redis:
        sub = subprocess.Popen(redis.argv(["SUBSCRIBE", "news"]), text=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               env=lib.preload_env({"TIMEBOX_DEADLINE": "1s",
                                                    "TIMEBOX_READ_TIMEOUT": "1s"}))
        try:
            lib.wait_for(lambda: redis.cli(["PUBSUB", "NUMSUB", "news"]).stdout.split()[-1:]
                         == ["1"] or sub.poll() is not None, timeout=10,
                         what="redis-cli to subscribe")
            for i in range(3):
                time.sleep(1.5)  # the gap between messages is the point of the test
                assert sub.poll() is None, "the subscriber ended: %s" % sub.stderr.read()
                assert redis.cli(["PUBLISH", "news", "m%d" % i]).stdout.strip() == "1"
            time.sleep(0.3)
            assert sub.poll() is None, "the subscriber ended: %s" % sub.stderr.read()
        finally:
            sub.kill()
            out, err = sub.communicate()
        for i in range(3):
            assert "m%d" % i in out, (out, err)
        assert "timebox" not in err, err


@lib.timeout(60)
def test_redis_blpop_is_an_ordinary_call():
    """BLPOP 2 with a 1 s read timeout: a blocking command is an ordinary call (its reply is
    its first byte), so first_byte cuts it at 1 s, as it would any slow reply. A destination
    used for blocking commands wants a first_byte_timeout longer than the block."""
    with redis_server() as redis:
        res = redis.cli(["BLPOP", "empty", "2"],
                        env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "1s"}), timeout=10)
        assert res.returncode != 0, res
        events = lib.tb_records(res.stderr, event="timeout")
        assert len(events) == 1 and events[0]["phase"] == "first_byte", res
        assert 1000 <= res.elapsed_ms < 1000 + SLACK_MS + STARTUP_MS, res
        # With a first_byte_timeout longer than the block, the empty reply comes back.
        res = redis.cli(["BLPOP", "empty", "2"],
                        env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "1s",
                                             "TIMEBOX_FIRST_BYTE_TIMEOUT": "3s"}),
                        timeout=10)
        assert res.returncode == 0 and lib.tb_lines(res.stderr) == [], res
        assert res.elapsed_ms >= 2000, res


# ---- PostgreSQL: startup, authentication and the first query are one call -----------------

class SlowPostgres:
    """A fake PostgreSQL server on 127.0.0.1 that answers each client message `delay`
    seconds late: the SSLRequest (N), the startup (a cleartext password request), the
    password (AuthenticationOk, ReadyForQuery), and every query (CommandComplete,
    ReadyForQuery)."""

    def __init__(self, delay=FLIGHT_DELAY):
        self.delay = delay
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.sock.close()
        return False

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    @staticmethod
    def _exact(conn, n):
        buf = b""
        while len(buf) < n:
            data = conn.recv(n - len(buf))
            if not data:
                raise OSError("eof")
            buf += data
        return buf

    @staticmethod
    def _msg(kind, body):
        return kind + struct.pack("!I", len(body) + 4) + body

    def _one(self, conn):
        try:
            while True:  # SSLRequest (answered N), then the startup packet
                n = struct.unpack("!I", self._exact(conn, 4))[0]
                body = self._exact(conn, n - 4)
                if struct.unpack("!I", body[:4])[0] != 80877103:
                    break
                time.sleep(self.delay)
                conn.sendall(b"N")
            time.sleep(self.delay)
            conn.sendall(self._msg(b"R", struct.pack("!I", 3)))  # cleartext password
            while True:
                kind = self._exact(conn, 1)
                n = struct.unpack("!I", self._exact(conn, 4))[0]
                self._exact(conn, n - 4)
                if kind == b"X":
                    return
                time.sleep(self.delay)
                if kind == b"p":
                    conn.sendall(self._msg(b"R", struct.pack("!I", 0)) +
                                 self._msg(b"S", b"server_version\x0016.0\x00") +
                                 self._msg(b"S", b"client_encoding\x00UTF8\x00") +
                                 self._msg(b"K", struct.pack("!II", 1, 2)) +
                                 self._msg(b"Z", b"I"))
                else:
                    conn.sendall(self._msg(b"C", b"SELECT 0\x00") + self._msg(b"Z", b"I"))
        except OSError:
            pass
        finally:
            conn.close()


def psql_run(env):
    with SlowPostgres() as srv:
        env = dict(env, PGPASSWORD="x", PGSSLMODE="disable", PGCONNECT_TIMEOUT="30")
        return lib.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "u",
                        "-d", "d", "-c", "select 1"], env=env, timeout=20)


@lib.timeout(60)
def test_psql_startup_is_one_call():
    """psql against a server 700 ms late on every answer, with a 1 s deadline: the startup,
    the password exchange and the first query are one call, cut at 1 s (not one deadline
    per turn, under which every turn fits)."""
    if shutil.which("psql") is None:
        lib.skip("psql is not installed")
    lib.require_runs_with_sanitizer(["psql", "--version"])
    native = psql_run(lib.native_env())
    assert native.returncode == 0 and native.elapsed_ms >= 2100, native
    res = psql_run(lib.preload_env({"TIMEBOX_DEADLINE": "1s"}))
    assert res.returncode != 0, res
    events = lib.tb_records(res.stderr, event="timeout")
    assert len(events) == 1 and events[0]["phase"] == "deadline", res
    assert int(events[0]["elapsed_ms"]) >= 1000, res
    assert 1000 <= res.elapsed_ms < 1000 + SLACK_MS + STARTUP_MS, res
