"""Uploads to a server that reads slowly: each real client sends a 160 KB body to an HTTP
server that reads it 2 KiB every 20 ms through a 16 KiB receive buffer (about 1.6 s) and
answers once it has it all. The clients hand most of the body to the kernel long before the
server has read it, so the answer comes well over the read timeout (500 ms) after their
last send, and natively every upload succeeds. Under timebox each must succeed the same
way, with nothing from timebox on stderr: the first byte is awaited from the peer's last
acknowledgement of the request, and a send is cut only once TCP confirms the stall
(docs/configuration.md, write_timeout and first_byte_timeout)."""

import os
import shutil
import socket
import tempfile
import threading
import time

import lib

BODY = 160 * 1024
SETTINGS = {"TIMEBOX_READ_TIMEOUT": "500ms", "TIMEBOX_WRITE_TIMEOUT": "300ms",
            "TIMEBOX_DEADLINE": "20s"}


class SlowUploadServer:
    """HTTP on 127.0.0.1: reads the request's headers, then its body 2 KiB every 20 ms, then
    answers "ok". One thread per connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _serve(c):
        with c:
            head = b""
            while b"\r\n\r\n" not in head:
                b = c.recv(1)
                if not b:
                    return
                head += b
            lines = head.decode("latin-1").lower().split("\r\n")
            n = int(next(l.split(":")[1] for l in lines if l.startswith("content-length")))
            if any("100-continue" in l for l in lines):
                c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            got = 0
            while got < n:
                b = c.recv(min(2048, n - got))
                if not b:
                    return
                got += len(b)
                time.sleep(0.02)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    def close(self):
        self.sock.close()


CLIENTS = {
    "curl": lambda url, f: ["curl", "-s", "-S", "-T", f, url],
    "wget": lambda url, f: ["wget", "-t", "1", "-q", "-O", "-", "--post-file=" + f, url],
    "python3": lambda url, f: ["python3", "-c",
                               "import sys, urllib.request as u\n"
                               "d = open(sys.argv[2], 'rb').read()\n"
                               "r = u.Request(sys.argv[1], data=d, method='POST')\n"
                               "sys.stdout.write(u.urlopen(r).read().decode())\n", url, f],
    "ruby": lambda url, f: ["ruby", "-rnet/http", "-ruri", "-e",
                            "u = URI(ARGV[0]); print Net::HTTP.new(u.host, u.port)"
                            ".post('/', File.binread(ARGV[1])).body", url, f],
    "node": lambda url, f: ["node", "-e",
                            "const h = require('http'), d = require('fs')"
                            ".readFileSync(process.argv[2]);"
                            "const r = h.request(process.argv[1], {method: 'POST', headers:"
                            " {'Content-Length': d.length}}, s => s.on('data', c =>"
                            " process.stdout.write(c)));"
                            "r.on('error', e => { console.error(e.message); process.exit(1); });"
                            "r.end(d);", url, f],
    "php": lambda url, f: ["php", "-r",
                           "echo file_get_contents($argv[1], false, stream_context_create("
                           "['http' => ['method' => 'POST', 'content' =>"
                           " file_get_contents($argv[2])]]));", url, f],
}


# The body by sendfile(2) (Python's socket.sendfile on a blocking socket: os.sendfile, which
# the interpreter imports as sendfile64), the head by sendall.
SENDFILE_CLIENT = (
    "import os, socket, sys\n"
    "f = open(sys.argv[2], 'rb'); n = os.fstat(f.fileno()).st_size\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "s.sendall(b'POST / HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n' % n)\n"
    "try:\n"
    "    s.sendfile(f)\n"
    "except OSError as e:\n"
    "    sys.exit('sendfile: errno %d' % e.errno)\n"
    "sys.stdout.write(s.recv(4096).decode().split('\\r\\n\\r\\n', 1)[1])\n")


class StalledUploadServer:
    """Accepts and never reads: an upload fills the buffers and stalls."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def body_file(size):
    fd, path = tempfile.mkstemp(prefix="tb-upload-")
    os.write(fd, os.urandom(size))
    os.close(fd)
    return path


def test_python_sendfile_upload_to_a_slow_reader_as_native():
    """A body sent by sendfile to the slow reader: progress the hooks cannot see inside the
    call is the peer's acknowledgements, so the upload is not cut, as a send's is not."""
    srv = SlowUploadServer()
    path = body_file(BODY)
    cmd = ["python3", "-c", SENDFILE_CLIENT, str(srv.port), path]
    try:
        lib.require_runs_with_sanitizer(["python3", "--version"])
        native = lib.run(cmd, env=lib.native_env(), timeout=30)
        assert native.returncode == 0 and native.stdout == "ok", native
        governed = lib.run(cmd, env=lib.preload_env(SETTINGS), timeout=30)
        assert governed.returncode == 0 and governed.stdout == "ok", governed
        assert lib.tb_lines(governed.stderr) == [], governed
    finally:
        srv.close()
        os.unlink(path)


def test_python_sendfile_to_a_stalled_reader_is_cut():
    """A body sent by sendfile to a server that stopped reading: natively the upload waits
    for ever (stopped here after 3 s); under timebox it fails with ETIMEDOUT once the send
    has made no progress for write_timeout (300 ms), with one write-phase line."""
    srv = StalledUploadServer()
    path = body_file(32 << 20)
    cmd = ["python3", "-c", SENDFILE_CLIENT, str(srv.port), path]
    try:
        lib.require_runs_with_sanitizer(["python3", "--version"])
        native = lib.run(cmd, env=lib.native_env(), timeout=3)
        assert native.timed_out, native
        governed = lib.run(cmd, env=lib.preload_env(SETTINGS), timeout=30)
        assert not governed.timed_out and governed.returncode == 1, governed
        assert "sendfile: errno 110" in governed.stderr, governed
        assert governed.elapsed_ms >= 300, governed
        cuts = lib.tb_records(governed.stderr, event="timeout", phase="write")
        assert len(cuts) == 1, governed
        # The stall the line reports lasted the limit at least: never cut early.
        assert int(cuts[0]["elapsed_ms"]) >= 300, governed
    finally:
        srv.close()
        os.unlink(path)


def check_upload(name):
    if shutil.which(name) is None:
        lib.skip("%s is not installed (tests/deps.sh installs it)" % name)
    srv = SlowUploadServer()
    fd, path = tempfile.mkstemp(prefix="tb-upload-")
    try:
        os.write(fd, os.urandom(BODY))
        os.close(fd)
        cmd = CLIENTS[name]("http://127.0.0.1:%d/" % srv.port, path)
        lib.require_runs_with_sanitizer(cmd[:1] + (["--version"] if name != "php" else
                                                   ["-v"]))
        native = lib.run(cmd, env=lib.native_env(), timeout=30)
        assert native.returncode == 0 and native.stdout == "ok", (name, native)
        governed = lib.run(cmd, env=lib.preload_env(SETTINGS), timeout=30)
        assert governed.returncode == 0 and governed.stdout == "ok", (name, governed)
        assert lib.tb_lines(governed.stderr) == [], (name, governed)
    finally:
        srv.close()
        os.unlink(path)


def test_curl_upload_to_a_slow_reader_as_native():
    check_upload("curl")


def test_wget_upload_to_a_slow_reader_as_native():
    check_upload("wget")


def test_python_upload_to_a_slow_reader_as_native():
    check_upload("python3")


def test_ruby_upload_to_a_slow_reader_as_native():
    check_upload("ruby")


def test_node_upload_to_a_slow_reader_as_native():
    check_upload("node")


def test_php_upload_to_a_slow_reader_as_native():
    check_upload("php")
