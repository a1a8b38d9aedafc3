"""stdio on a governed socket: a program that wraps its socket in a FILE * (fdopen + fgets,
fread, getc, fscanf, getline; fprintf + fflush) is bounded like one that calls read, and a
healthy one sees exactly what it sees natively. tnftp's control channel is the real program."""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import lib
from lib import FaultServer

lib.scrub_timebox_env()

STDIOCLI = lib.client("stdiocli")
APIS = ["fgets", "fgets_chk", "fgets_unlocked", "fread", "getc", "getc_unlocked", "fscanf",
        "getline"]
READ_400 = {"TIMEBOX_READ_TIMEOUT": "400ms"}


def typed(line):
    """stdiocli's logfmt line with its numbers as numbers."""
    rec = lib.parse_logfmt(line)
    for key, kind in (("ms", float), ("bytes", int), ("ferror", int), ("feof", int)):
        if key in rec:
            rec[key] = kind(rec[key])
    return rec


def stdiocli(srv, path, api, env=None, preload=True, extra=()):
    argv = [STDIOCLI, "--port", str(srv.port), "--path", path, "--api", api] + list(extra)
    res = lib.run(argv, env=lib.preload_env(env) if preload else lib.native_env(env, clean=True),
                  timeout=20)
    assert not res.timed_out, res
    lines = [l for l in res.stdout.splitlines() if l.startswith("api=")]
    assert len(lines) == 1, res
    return typed(lines[0]), res


def assert_cut(rec, res, limit_ms, phase):
    assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
    assert (rec["ferror"], rec["feof"]) == (1, 0), res
    assert rec["ms"] >= limit_ms, "cut early: %r" % res
    assert rec["ms"] < lib.slack(limit_ms), "cut late: %r" % res
    events = lib.tb_records(res.stderr)
    assert len(events) == 1 and events[0]["phase"] == phase, res


def test_healthy_stdio_output_unchanged():
    with FaultServer() as srv:
        for api in APIS:
            native, _ = stdiocli(srv, "/big?bytes=200000", api, preload=False)
            rec, res = stdiocli(srv, "/big?bytes=200000", api, READ_400)
            assert native["result"] == "ok", native
            assert (rec["result"], rec["bytes"], rec["sum"]) == \
                ("ok", native["bytes"], native["sum"]), (api, res)
            assert "timebox:" not in res.stderr, res


# The writers stdiocli sends with (--write, --flood): fflush is fputs into a 1 MiB buffer,
# then fflush.
WRITERS = ["fprintf", "fputs", "fwrite", "putc", "putc_unlocked", "fflush"]


def test_stdio_writers_to_a_peer_that_never_reads_are_cut():
    # stdiocli --flood: 64 KiB lines to a peer that never reads, SIGPIPE at its default. The
    # blocked call fails with ETIMEDOUT, ferror set, never early (the upper bound is
    # generous: a flush still moving bytes into the peer's buffer is progress), and the
    # program lives; a genuine EPIPE (--peer-closes) raises SIGPIPE as natively.
    for api in WRITERS:
        res = lib.run([STDIOCLI, "--flood", api],
                      env=lib.preload_env({"TIMEBOX_WRITE_TIMEOUT": "400ms"}), timeout=20)
        assert res.returncode == 1 and not res.timed_out, (api, res)
        rec = typed(res.stdout.strip())
        assert (rec["result"], rec["errno"], rec["ferror"]) == ("error", "ETIMEDOUT", 1), \
            (api, res)
        assert 400 <= rec["ms"] < 2500, (api, res)
        events = lib.tb_records(res.stderr)
        assert len(events) == 1 and events[0]["phase"] == "write", (api, res)
        cmd = [STDIOCLI, "--flood", api, "--peer-closes"]
        native = lib.run(cmd, env=lib.native_env(clean=True), timeout=20)
        res = lib.run(cmd, env=lib.preload_env({"TIMEBOX_WRITE_TIMEOUT": "400ms"}),
                      timeout=20)
        assert native.returncode == -signal.SIGPIPE, (api, native)
        assert res.returncode == -signal.SIGPIPE and res.stdout == "", (api, res)


def test_stalled_server_cut_at_first_byte_every_api():
    with FaultServer() as srv:
        for api in APIS:
            rec, res = stdiocli(srv, "/stall", api, READ_400)
            assert_cut(rec, res, 400, "first_byte")
            assert rec["bytes"] == 0, res


def test_stall_mid_body_cut_at_read_timeout_every_api():
    # Headers at once, then silence: the buffered header lines are delivered, the body's
    # wait is cut.
    with FaultServer() as srv:
        for api in APIS:
            rec, res = stdiocli(srv, "/drip?ms=20000&n=10", api, READ_400)
            assert rec["bytes"] > 0, res
            assert (rec["result"], rec["errno"], rec["ferror"]) == \
                ("error", "ETIMEDOUT", 1), res
            assert rec["ms"] >= 400 and rec["ms"] < lib.slack(400), res


@lib.timeout(90)
def test_steady_drip_longer_than_the_timeout_is_not_cut():
    # 8 bytes 250 ms apart: 2 s in all, five times the read timeout, never 400 ms silent.
    # fread asks for 1,000 bytes and fgets for a line: each call spans every byte.
    with FaultServer() as srv:
        for api in APIS:
            rec, res = stdiocli(srv, "/drip?ms=250&n=8", api, READ_400)
            assert rec["result"] == "ok" and rec["ms"] >= 2000, (api, res)
            assert "timebox:" not in res.stderr, res


def test_slow_program_reading_buffered_lines_is_not_cut():
    # The program is busy 600 ms before each read (longer than the limit): what the FILE
    # already holds, and what the kernel queued meanwhile, is never cut.
    with FaultServer() as srv:
        for api in ("fgets", "getline"):
            native, _ = stdiocli(srv, "/big?bytes=3000", api, preload=False)
            rec, res = stdiocli(srv, "/big?bytes=3000", api, READ_400,
                                extra=["--sleep-ms", "600"])
            assert (rec["result"], rec["sum"]) == ("ok", native["sum"]), res
            assert "timebox:" not in res.stderr, res


def _loop(env, preload):
    argv = [STDIOCLI, "--loop", str(1 << 30)]
    res = lib.run(argv, env=lib.preload_env(env) if preload else lib.native_env(env, clean=True),
                  timeout=150)
    assert not res.timed_out and res.returncode == 0, res
    rec = typed(res.stdout.strip().splitlines()[-1])
    assert rec["result"] == "ok" and rec["sent"] == rec["got"], res
    return rec, res


@lib.timeout(300)
def test_one_gib_through_fread_and_fwrite_is_byte_identical():
    # fwrite in one thread, fread back in another, through an echo server: every byte
    # compared and hashed. Limits armed but generous.
    env = {"TIMEBOX_READ_TIMEOUT": "10s", "TIMEBOX_WRITE_TIMEOUT": "10s",
           "TIMEBOX_DEADLINE": "120s"}
    native, _ = _loop(env, preload=False)
    rec, res = _loop(env, preload=True)
    assert rec["bytes"] == native["bytes"] == 1 << 30
    assert rec["got"] == native["got"], (native, rec)
    assert "timebox:" not in res.stderr, res
    print("1 GiB loop: native %.0f ms, timebox %.0f ms" % (native["ms"], rec["ms"]))


# ---- tnftp: the control channel is a FILE * ----------------------------------------------

class StalledFtp:
    """A listener that sends the 220 banner (or nothing, banner=False), reads the first
    command line, then says nothing more while holding the connection."""

    def __init__(self, banner=True):
        self.banner = banner
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.got = b""
        self.conns = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        self.conns.append(conn)
        if self.banner:
            conn.sendall(b"220 stalled ftp ready\r\n")
            conn.settimeout(20)
            try:
                self.got = conn.recv(1000)
            except OSError:
                pass

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


def _tnftp(port, env, preload=True, timeout=20):
    prog = shutil.which("tnftp")
    if prog is None:
        lib.skip("tnftp is not installed (tests/deps.sh installs it)")
    argv = [prog, "-n", "-v", "127.0.0.1", str(port)]
    envs = lib.preload_env(env) if preload else lib.native_env(env, clean=True)
    return lib.run(argv, env=envs, timeout=timeout, input="user anonymous x\nquit\n")


def test_tnftp_stalled_after_user_is_cut():
    srv = StalledFtp()
    try:
        res = _tnftp(srv.port, {"TIMEBOX_READ_TIMEOUT": "1s"})
    finally:
        srv.close()
    assert not res.timed_out, res
    assert srv.got.startswith(b"USER anonymous"), (srv.got, res)
    assert "220 stalled ftp ready" in res.stdout, res
    assert res.elapsed_ms >= 1000 and res.elapsed_ms < lib.slack(1000) + lib.SLACK_MS, res
    events = lib.tb_records(res.stderr)
    assert len(events) == 1 and events[0]["event"] == "timeout", res


def test_tnftp_silent_server_is_cut():
    srv = StalledFtp(banner=False)
    try:
        res = _tnftp(srv.port, {"TIMEBOX_READ_TIMEOUT": "1s"})
    finally:
        srv.close()
    assert not res.timed_out, res
    assert res.elapsed_ms >= 1000 and res.elapsed_ms < lib.slack(1000) + lib.SLACK_MS, res
    assert len(lib.tb_records(res.stderr)) == 1, res


def test_tnftp_natively_waits_on_the_stalled_server():
    # The baseline the two tests above change: without timebox tnftp is still waiting
    # when the harness gives up on it.
    srv = StalledFtp()
    try:
        res = _tnftp(srv.port, {}, preload=False, timeout=3)
    finally:
        srv.close()
    assert res.timed_out, res
