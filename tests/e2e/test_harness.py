"""Tests of the test fixtures themselves, without the library: the fault server's faults
(via plain Python sockets and curl), blockcli's behaviour as a legacy client, and the storm
server's pause, queue and failures with stormcli's counts (storm.py)."""

import errno
import select
import shutil
import socket
import threading
import time
import weakref

import lib
from lib import FaultServer


def request(port, path, extra_headers="", version="1.1", body=b""):
    head = "GET %s HTTP/%s\r\nHost: 127.0.0.1\r\n%s" % (path, version, extra_headers)
    if body:
        head += "Content-Length: %d\r\n" % len(body)
    return head.encode() + b"\r\n" + body


_pending = weakref.WeakKeyDictionary()   # bytes read past a response (pipelining)


def read_response(sock):
    """Reads one response by Content-Length. Returns (status, headers dict, body)."""
    data = _pending.pop(sock, b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError("closed before the head: %r" % data)
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip()
               for k, _, v in (l.partition(":") for l in lines[1:])}
    length = int(headers["content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("closed after %d of %d body bytes" % (len(body), length))
        body += chunk
    if len(body) > length:
        _pending[sock] = body[length:]
    return status, headers, body[:length]


def connect(srv, timeout=10):
    return socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)


def exchange(srv, path, **kw):
    with connect(srv) as s:
        start = time.monotonic()
        s.sendall(request(srv.port, path, **kw))
        status, headers, body = read_response(s)
        return status, headers, body, (time.monotonic() - start) * 1000


def test_ok_answers_at_once():
    with FaultServer() as srv:
        status, headers, body, ms = exchange(srv, "/ok?order=7")
        assert (status, body) == (200, b"ok order=7\n"), (status, body)
        assert headers["connection"] == "keep-alive"
        assert ms < 1000, ms
        assert exchange(srv, "/ok")[2] == b"ok order=0\n"


def test_delay_waits_at_least_ms():
    with FaultServer() as srv:
        status, _, body, ms = exchange(srv, "/delay?ms=200&order=2")
        assert (status, body) == (200, b"ok order=2\n")
        assert 200 <= ms < 2000, ms
        status, _, body, ms = exchange(srv, "/stall?ms=150")
        assert (status, body) == (200, b"ok order=0\n")
        assert 150 <= ms < 2000, ms


def test_drip_sends_one_byte_per_interval():
    with FaultServer() as srv, connect(srv) as s:
        start = time.monotonic()
        s.sendall(request(srv.port, "/drip?ms=100&n=5"))
        data = b""
        arrivals = []
        while not data.endswith(b"xxxxx"):
            chunk = s.recv(4096)
            assert chunk, "closed early: %r" % data
            data += chunk
            arrivals.append(((time.monotonic() - start) * 1000, chunk))
        head, _, body = data.partition(b"\r\n\r\n")
        assert b"Content-Length: 5" in head and body == b"xxxxx", data
        assert arrivals[0][1].startswith(b"HTTP/1.1 200"), arrivals
        assert arrivals[0][0] < 100, "the head must come at once: %r" % arrivals
        assert arrivals[-1][0] >= 500, arrivals
        assert arrivals[-1][0] < 3000, arrivals


def test_drip_stops_when_the_client_leaves():
    with FaultServer() as srv:
        srv.reset_stats()
        with connect(srv) as s:
            s.sendall(request(srv.port, "/drip?ms=50&n=100000&key=d"))
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
        lib.wait_for(lambda: srv.stats()["inflight"] == 0, what="the drip to stop")
        assert srv.count("d") == 1


def test_reset_gives_connection_reset():
    with FaultServer() as srv, connect(srv) as s:
        s.sendall(request(srv.port, "/reset?after=100"))
        data = b""
        try:
            while True:
                chunk = s.recv(4096)
                assert chunk, "got a FIN, expected an RST, after %r" % data
                data += chunk
        except ConnectionResetError:
            pass
        head, _, body = data.partition(b"\r\n\r\n")
        assert b"Content-Length: 1100" in head, head
        assert len(body) <= 100, len(body)


def test_close_answers_nothing():
    with FaultServer() as srv, connect(srv) as s:
        s.sendall(request(srv.port, "/close"))
        assert s.recv(4096) == b""


def test_unknown_path_is_404():
    with FaultServer() as srv:
        status, _, body, _ = exchange(srv, "/no-such-thing")
        assert status == 404, (status, body)
        assert exchange(srv, "/delay?ms=x")[0] == 400


def test_big_body_pattern():
    with FaultServer() as srv:
        n = 1000003
        status, _, body, _ = exchange(srv, "/big?bytes=%d" % n)
        assert status == 200 and len(body) == n
        assert body == bytes(ord("a") + i % 26 for i in range(n))


def test_keep_alive_rules():
    with FaultServer() as srv:
        with connect(srv) as s:   # HTTP/1.1: many requests, a body is consumed
            s.sendall(request(srv.port, "/ok?order=1", body=b"hello"))
            assert read_response(s)[2] == b"ok order=1\n"
            s.sendall(request(srv.port, "/ok?order=2") + request(srv.port, "/ok?order=3"))
            assert read_response(s)[2] == b"ok order=2\n"
            assert read_response(s)[2] == b"ok order=3\n"
            s.sendall(request(srv.port, "/ok", extra_headers="Connection: close\r\n"))
            _, headers, _ = read_response(s)
            assert headers["connection"] == "close"
            assert s.recv(10) == b""
        with connect(srv) as s:   # HTTP/1.0 closes unless keep-alive is asked
            s.sendall(request(srv.port, "/ok", version="1.0"))
            read_response(s)
            assert s.recv(10) == b""
        with connect(srv) as s:
            hdr = "Connection: keep-alive\r\n"
            s.sendall(request(srv.port, "/ok?order=4", version="1.0", extra_headers=hdr))
            assert read_response(s)[2] == b"ok order=4\n"
            s.sendall(request(srv.port, "/ok?order=5", version="1.0", extra_headers=hdr))
            assert read_response(s)[2] == b"ok order=5\n"


def test_counts_per_key():
    with FaultServer() as srv:
        srv.reset_stats()
        exchange(srv, "/ok?key=a")
        exchange(srv, "/ok?order=1&key=a")
        exchange(srv, "/delay?ms=10&key=b")
        assert (srv.count("a"), srv.count("b"), srv.count("c")) == (2, 1, 0)
        # A request is counted once read, before its behaviour runs: a stalled one too.
        with connect(srv) as s:
            s.sendall(request(srv.port, "/stall?key=s"))
            lib.wait_for(lambda: srv.count("s") == 1, what="the stalled request's count")
        assert srv.stats()["requests"] == 4
        srv.reset_stats()
        assert srv.count("a") == 0


def test_stats_max_active_three_concurrent():
    with FaultServer() as srv:
        srv.reset_stats()
        socks = [connect(srv) for _ in range(3)]
        try:
            for s in socks:
                s.sendall(request(srv.port, "/delay?ms=300"))
            lib.wait_for(lambda: srv.stats()["inflight"] == 3, what="3 requests in flight")
            for s in socks:
                assert read_response(s)[0] == 200
        finally:
            for s in socks:
                s.close()
        stats = srv.wait_idle()
        assert stats["max_active"] == 3, stats
        assert stats["max_inflight"] == 3, stats
        assert stats["requests"] == 3 and stats["connections"] == 3, stats
        srv.reset_stats()
        assert srv.stats()["max_active"] == 0


def test_blackhole_connect_hangs():
    with FaultServer() as srv:
        socks = []
        try:
            for _ in range(2):   # every client hangs, not just the first
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.setblocking(False)
                rc = s.connect_ex(("127.0.0.1", srv.blackhole_port))
                assert rc == errno.EINPROGRESS, errno.errorcode.get(rc, rc)
            start = time.monotonic()
            _, writable, failed = select.select([], socks, socks, 0.3)
            assert (time.monotonic() - start) >= 0.3
            assert writable == [] and failed == [], "a blackhole connect completed"
        finally:
            for s in socks:
                s.close()


def test_blackhole_curl_times_out():
    if shutil.which("curl") is None:
        lib.skip("curl is not installed")
    with FaultServer() as srv:
        r = lib.run(["curl", "-sS", "--noproxy", "*", "--connect-timeout", "1",
                     "http://127.0.0.1:%d/" % srv.blackhole_port], env=lib.native_env())
        assert r.returncode == 28, r
        assert 1000 <= r.elapsed_ms < 5000, r


def test_blockcli_keepalive_uses_one_connection():
    with FaultServer() as srv:
        srv.reset_stats()
        res = lib.blockcli(["--port", srv.port, "--path", "/ok?order=9&key=k", "--calls", 3],
                           preload=False)
        assert res.ok, res
        assert [(r["call"], r["attempt"], r["result"], r["status"], r["bytes"])
                for r in res.records] == [(i, 1, "ok", 200, 11) for i in (1, 2, 3)], res
        stats = srv.wait_idle()
        assert stats["requests"] == 3 and stats["connections"] == 1, stats
        assert stats["max_active"] == 1, stats
        assert srv.count("k") == 3


def test_blockcli_variants_natively():
    with FaultServer() as srv:
        for extra in (["--api", "sr"], ["--poll-slice-ms", "20"], ["--select"],
                      ["--chunk", "1", "--read-sleep-ms", "1"]):
            res = lib.blockcli(["--port", srv.port, "--path", "/drip?ms=30&n=4",
                                "--calls", 2] + extra, preload=False)
            assert res.ok and len(res.records) == 2, (extra, res)
            assert all(r["bytes"] == 4 and r["ms"] >= 120 for r in res.records), (extra, res)
        res = lib.blockcli(["--port", srv.port, "--path", "/big?bytes=100000"],
                           preload=False, fortify=True)
        assert res.ok and res.records[0]["bytes"] == 100000, res


def test_blockcli_reports_failures_and_retries():
    with FaultServer() as srv:
        srv.reset_stats()
        res = lib.blockcli(["--port", srv.port, "--path", "/close?key=c", "--attempts", 3],
                           preload=False)
        assert not res.ok and res.run.returncode == 1, res
        assert [(r["attempt"], r["errno"]) for r in res.records] == \
            [(1, "EOF"), (2, "EOF"), (3, "EOF")], res
        assert srv.count("c") == 3
        res = lib.blockcli(["--port", srv.port, "--path", "/reset?after=50"], preload=False)
        assert res.records[0]["errno"] == "ECONNRESET" and res.records[0]["bytes"] <= 50, res
        # A port that was free a moment ago: nothing listens there, the connect is refused.
        res = lib.blockcli(["--port", lib.free_port(), "--path", "/"], preload=False)
        assert res.records[0]["errno"] == "ECONNREFUSED", res


def test_blockcli_threads_run_concurrently():
    with FaultServer() as srv:
        srv.reset_stats()
        res = lib.blockcli(["--port", srv.port, "--path", "/delay?ms=200", "--threads", 4],
                           preload=False)
        assert res.ok and len(res.records) == 4, res
        assert sorted(r["thread"] for r in res.records) == [1, 2, 3, 4]
        assert res.total_ms < 4 * 200, res
        stats = srv.wait_idle()
        assert stats["max_active"] == 4 and stats["connections"] == 4, stats


def test_blockcli_hangs_on_stall_without_timebox():
    """The baseline timebox exists for: a legacy client polling in slices waits forever."""
    with FaultServer() as srv:
        res = lib.blockcli(["--port", srv.port, "--path", "/stall", "--poll-slice-ms", 100],
                           preload=False, wrapper=["timeout", "1"])
        assert res.run.returncode == 124, res
        assert res.run.elapsed_ms >= 1000, res
        assert res.records == [], res


def test_blockcli_hangs_on_blackhole_without_timebox():
    with FaultServer() as srv:
        res = lib.blockcli(["--port", srv.blackhole_port, "--connect-only"],
                           preload=False, wrapper=["timeout", "1"])
        assert res.run.returncode == 124 and res.records == [], res


def test_faultserver_survives_many_clients_leaving():
    """Clients vanishing mid-response (EPIPE, RST) must never take the server down."""
    with FaultServer() as srv:
        def leave_early(path):
            with connect(srv) as s:
                s.sendall(request(srv.port, path))
                if path != "/stall":
                    s.recv(1)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        threads = [threading.Thread(target=leave_early, args=(p,))
                   for p in ["/big?bytes=10000000", "/drip?ms=10&n=1000", "/stall"] * 5]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        srv.wait_idle()
        assert exchange(srv, "/ok")[0] == 200


# ---- the storm server and caller (storm.py), natively ---------------------------------------

import storm  # noqa: E402


def storm_exchange(srv, timeout=10):
    """One HTTP/1.0 request on a fresh connection: (status or the errno name, ms)."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=timeout) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        status = int(data.split()[1]) if data else "EOF"
    except ConnectionResetError:
        status = "ECONNRESET"
    return status, (time.monotonic() - start) * 1000


def test_stormserver_pauses_in_its_window_only():
    t0 = storm.t0_ahead(0)
    with storm.StormServer(["--stall-from", 300, "--stall-to", 800, "--stall-ms", 600],
                           t0=t0) as srv:
        status, before = storm_exchange(srv)
        assert status == 200 and before < 200, (status, before)
        storm.sleep_until(t0, 400)
        status, during = storm_exchange(srv)
        assert status == 200 and 600 <= during < lib.slack(600), (status, during)
        status, after = storm_exchange(srv)      # arrives after 1000 ms: the window is over
        assert status == 200 and after < 200, (status, after)
        assert srv.accepts(0, 300) == 1 and srv.accepts(300, 800) == 1, srv.stats()
        assert srv.stats()["accepted"] == 3


def test_stormserver_serves_n_at_a_time_in_arrival_order():
    with storm.StormServer(["--workers", 2, "--service-ms", 200]) as srv:
        results = []
        threads = [threading.Thread(target=lambda: results.append(storm_exchange(srv)))
                   for _ in range(6)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        total = (time.monotonic() - start) * 1000
        ends = sorted(ms for _, ms in results)
        assert all(status == 200 for status, _ in results), results
        # Three waves of two: counted from before any started, not sooner than 600 ms (a
        # call's own time starts with its thread, later, so it is only bounded above).
        assert 600 <= total < 600 + 1000 and ends[-1] < 600 + 1000, (total, ends)
        assert srv.stats()["max_inflight"] == 6, srv.stats()
        f = srv.inflight(0, 10 ** 9)
        assert f["samples"] > 0 and f["max"] == 6, f


def test_stormserver_failures():
    with storm.StormServer(["--fail", "reset"]) as srv:
        assert storm_exchange(srv)[0] == "ECONNRESET"
    with storm.StormServer(["--fail", "503"]) as srv:
        assert storm_exchange(srv)[0] == 503
    with storm.StormServer(["--fail", "close"]) as srv:
        assert storm_exchange(srv)[0] == "EOF"
    with storm.StormServer(["--fail-every", 5]) as srv:
        got = [storm_exchange(srv)[0] for _ in range(20)]
        assert got == ([200] * 4 + ["ECONNRESET"]) * 4, got
        st = srv.stats()
        assert (st["answered"], st["failed"]) == (16, 4), st


def test_stormcli_retries_and_counts():
    t0 = storm.t0_ahead()
    with storm.StormServer(["--fail", "reset"], t0=t0) as srv:
        run = storm.run_caller(srv.port, t0, lib.native_env(clean=True), threads=2, secs=1,
                               retries=3, think_ms=50)
        st = srv.stats()
    assert run.returncode == 0, run
    t = run.total
    # Every call is tried 4 times, but the run's end stops a call's retries: the last call
    # of each of the 2 threads may have had fewer (1 to 4). It asserted exactly 4 per call
    # and failed when the end fell inside a call (150 attempts for 38 calls, under ASan).
    assert t["ok"] == 0 and t["attempts"] == st["accepted"], (t, st)
    assert 4 * (t["first"] - 2) + 2 <= t["attempts"] <= 4 * t["first"], t
    assert t["err_ECONNRESET"] == t["attempts"] and t["refused"] == 0, t
    t0 = storm.t0_ahead()
    with storm.StormServer([], t0=t0) as srv:
        run = storm.run_caller(srv.port, t0, lib.native_env(clean=True), threads=4, secs=1,
                               mark_ms=500)
        st = srv.stats()
    t = run.total
    assert t["ok"] == t["attempts"] == st["answered"] and t["failed"] == 0, (t, st)
    assert t["max_inflight"] <= 4 and 0 <= t["recovered_ms"] < 100, t
    assert sum(ok for _, ok, _, _ in run.timeline) == t["ok"], run
    # Nothing listens: every connect is refused at once, and counted as such.
    run = storm.run_caller(lib.free_port(), storm.t0_ahead(), lib.native_env(clean=True),
                           threads=1, secs=1, retries=0, think_ms=100)
    assert run.total["refused"] == run.total["attempts"] > 0, run
