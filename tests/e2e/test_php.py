"""PHP under the library: its streams (file_get_contents) and the extensions it loads with
dlopen(RTLD_DEEPBIND) - curl (libcurl) and pgsql (libpq) - are bounded alike against a
stalled server, and unchanged against one that answers.

PHP's extensions bind their libraries' connect/poll/recv to libc ahead of a preloaded
library unless timebox drops RTLD_DEEPBIND (shim/hooks_dl.c); these tests are what shows
that it does. The PostgreSQL server is a small one written here: it speaks just enough of
the protocol for a connection and `SELECT 1`, or accepts and never answers."""

import shutil
import socket
import struct
import threading

import lib
from lib import FaultServer
from test_programs import STARTUP_MS, assert_bounded, assert_unchanged

CURL_FETCH = r'''
$c = curl_init($argv[1]);
curl_setopt($c, CURLOPT_RETURNTRANSFER, true);
$r = curl_exec($c);
if ($r === false) { fwrite(STDERR, "curl error " . curl_errno($c) . ": " . curl_error($c) . "\n"); exit(3); }
echo $r;
'''

STREAM_FETCH = r'''
$r = @file_get_contents($argv[1]);
if ($r === false) { fwrite(STDERR, "stream error: " . error_get_last()["message"] . "\n"); exit(3); }
echo $r;
'''

PG_QUERY = r'''
$db = @pg_connect($argv[1]);
if ($db === false) { fwrite(STDERR, "connect error: " . error_get_last()["message"] . "\n"); exit(3); }
$res = @pg_query($db, "SELECT 1");
if ($res === false) { fwrite(STDERR, "query error: " . pg_last_error($db) . "\n"); exit(4); }
echo implode(",", pg_fetch_row($res)), "\n";
pg_close($db);
'''


def need_php(extension):
    if shutil.which("php") is None:
        lib.skip("php is not installed (tests/deps.sh installs php-cli)")
    lib.require_runs_with_sanitizer(["php", "-r", ""])
    mods = lib.run(["php", "-m"], env=lib.native_env(), timeout=10).stdout.split()
    if extension not in mods:
        lib.skip("php's %s extension is not installed (tests/deps.sh installs php-%s)"
                 % (extension, extension))


def php(script, *args, limits=None):
    return lib.run(["php", "-r", script] + [str(a) for a in args],
                   env=lib.preload_env(limits), timeout=10)


class PgServer:
    """A loopback PostgreSQL server: mode "stall" accepts and never answers; "ok" answers
    the start-up (no SSL, no password) and every query with one row holding 1; "stall_query"
    answers the start-up and never a query. .port; a context manager."""

    def __init__(self, mode):
        self.mode = mode
        self._lsock = socket.socket()
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(16)
        self.port = self._lsock.getsockname()[1]
        self._conns = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        # Closing the listener ends accept() in the thread; shutdown wakes the handlers.
        try:
            self._lsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._lsock.close()
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)
        for c in self._conns:
            c.close()
        return False

    def _serve(self):
        while True:
            try:
                conn, _ = self._lsock.accept()
            except OSError:
                return
            self._conns.append(conn)
            if self.mode != "stall":
                threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    @staticmethod
    def _recv_exact(conn, n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    @staticmethod
    def _msg(kind, body):
        return kind + struct.pack("!i", len(body) + 4) + body

    def _session(self, conn):
        try:
            # SSLRequest / GSSENCRequest: refuse ("N") and wait for the start-up packet.
            while True:
                length, code = struct.unpack("!ii", self._recv_exact(conn, 8))
                self._recv_exact(conn, length - 8)
                if code in (80877103, 80877104):
                    conn.sendall(b"N")
                    continue
                break
            out = self._msg(b"R", struct.pack("!i", 0))  # AuthenticationOk
            for k, v in (("server_version", "15.0"), ("client_encoding", "UTF8"),
                         ("standard_conforming_strings", "on"),
                         ("integer_datetimes", "on"), ("DateStyle", "ISO, MDY")):
                out += self._msg(b"S", k.encode() + b"\0" + v.encode() + b"\0")
            out += self._msg(b"K", struct.pack("!ii", 4242, 1))
            out += self._msg(b"Z", b"I")
            conn.sendall(out)
            while True:
                kind = self._recv_exact(conn, 1)
                (length,) = struct.unpack("!i", self._recv_exact(conn, 4))
                self._recv_exact(conn, length - 4)
                if kind == b"X":
                    return
                if kind != b"Q" or self.mode == "stall_query":
                    continue
                field = b"?column?\0" + struct.pack("!ihihih", 0, 0, 23, 4, -1, 0)
                conn.sendall(self._msg(b"T", struct.pack("!h", 1) + field) +
                             self._msg(b"D", struct.pack("!hi", 1, 1) + b"1") +
                             self._msg(b"C", b"SELECT 1\0") + self._msg(b"Z", b"I"))
        except (EOFError, OSError):
            return


def conninfo(port):
    return "host=127.0.0.1 port=%d dbname=db user=u connect_timeout=0" % port


# ---- curl (libcurl, loaded deep-bound) ---------------------------------------------------

@lib.timeout(30)
def test_php_curl_read_timeout():
    need_php("curl")
    with FaultServer() as srv:
        res = php(CURL_FETCH, srv.url("/stall"), limits={"TIMEBOX_READ_TIMEOUT": "250ms"})
        assert_bounded(res, 250, "first_byte", "php curl_exec")
        assert res.returncode == 3, res
        assert "curl error 56: Recv failure: Connection timed out" in res.stderr, res


@lib.timeout(30)
def test_php_curl_unchanged():
    need_php("curl")
    with FaultServer() as srv:
        native = assert_unchanged(["php", "-r", CURL_FETCH, srv.url("/ok?order=7")])
        assert native.returncode == 0 and native.stdout == "ok order=7\n", native
        big = assert_unchanged(["php", "-r", CURL_FETCH, srv.url("/big?bytes=300000")])
        assert big.returncode == 0 and len(big.stdout) == 300000, big.returncode


# ---- PHP's own streams, for comparison ---------------------------------------------------

@lib.timeout(30)
def test_php_stream_read_timeout():
    need_php("Core")
    with FaultServer() as srv:
        res = php(STREAM_FETCH, srv.url("/stall"), limits={"TIMEBOX_READ_TIMEOUT": "250ms"})
        assert_bounded(res, 250, "first_byte", "php file_get_contents")
        assert res.returncode == 3, res


# ---- pgsql (libpq, loaded deep-bound) ----------------------------------------------------

@lib.timeout(30)
def test_php_pg_connect_stalled_server():
    # The server accepts and never answers libpq's first packet (the SSL request).
    need_php("pgsql")
    with PgServer("stall") as pg:
        res = php(PG_QUERY, conninfo(pg.port), limits={"TIMEBOX_READ_TIMEOUT": "250ms"})
        assert_bounded(res, 250, "first_byte", "php pg_connect")
        assert res.returncode == 3, res
        assert "Connection timed out" in res.stderr, res


@lib.timeout(30)
def test_php_pg_query_stalled_server():
    # Connected and authenticated; the query is never answered.
    need_php("pgsql")
    with PgServer("stall_query") as pg:
        res = php(PG_QUERY, conninfo(pg.port), limits={"TIMEBOX_READ_TIMEOUT": "250ms"})
        assert_bounded(res, 250, "first_byte", "php pg_query")
        assert res.returncode == 4, res


@lib.timeout(30)
def test_php_pg_unchanged():
    need_php("pgsql")
    with PgServer("ok") as pg:
        native = assert_unchanged(["php", "-r", PG_QUERY, conninfo(pg.port)])
        assert native.returncode == 0 and native.stdout == "1\n", native


@lib.timeout(30)
def test_php_deepbind_dropped_only_when_governing():
    # LD_DEBUG=bindings names the object each of libcurl's symbols binds to. With a limit
    # set, connect/poll/recv bind to timebox; with none, timebox changes nothing, dlopen's
    # flags included, and they bind to libc as PHP asked.
    need_php("curl")

    def bound_to(limits):
        env = lib.preload_env(dict(limits, LD_DEBUG="bindings"))
        res = lib.run(["php", "-r", "curl_init();"], env=env, timeout=STARTUP_MS / 1000 + 10)
        assert res.returncode == 0, res
        found = {}
        for line in res.stderr.splitlines():
            for name in ("connect", "poll", "recv"):
                if "libcurl" in line and "`%s'" % name in line:
                    found[name] = line.split(" to ")[1].split()[0]
        assert set(found) == {"connect", "poll", "recv"}, res.stderr[-2000:]
        return found

    governed = bound_to({"TIMEBOX_READ_TIMEOUT": "1s"})
    assert all(obj == lib.LIB or obj.endswith("/libtimebox.so") for obj in governed.values()), (
        governed)
    plain = bound_to({})
    assert all("/libc.so" in obj for obj in plain.values()), plain
