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
