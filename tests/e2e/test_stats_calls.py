"""Calls counted done, end to end, for the commonest client there is: one connection per
request, closed once the response is in. Python's http.client (then close()), curl and wget
(which exits without closing) against the fault server's HTTP/1.1 responses framed by
Content-Length: `timebox stats`
shows every call DONE with a CALL_P50, and `timebox suggest` sizes max_conns by Little's
law instead of leaving it off. (Before: CALLS 491, DONE 0, CALL_P50 "-", "no call was
measured in the rate window".)

This file is also the Python client (run as a program)."""

import http.client
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lib  # noqa: E402
from lib import FaultServer  # noqa: E402

lib.scrub_timebox_env()

SELF = os.path.abspath(__file__)
CALLS = 40


def per_request(port, n):
    """Requests, each on a connection of its own closed after its response, until stdin
    closes; says "going" after the first n (so that the statistics can be read, and the
    rate measured, while it goes on)."""
    import threading
    stop = threading.Event()

    def loop():
        done = 0
        while not stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/delay?ms=5")
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200, resp.status
            conn.close()
            done += 1
            if done == n:
                print("going", flush=True)

    t = threading.Thread(target=loop)
    t.start()
    sys.stdin.read()
    stop.set()
    t.join()


def timebox(*args):
    return subprocess.run([lib.LAUNCHER] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=30)


def row_of(text, port):
    """The row of 127.0.0.1:port in `timebox stats PID`, keyed by the header's words."""
    keys = ["DEST", "HOST", "LEASED", "PENDING", "AVAIL", "MAX", "CALLS", "DONE", "REJECT",
            "CUTS", "FB_P50", "FB_P99", "CALL_P50", "CALL_P99"]
    for line in text.splitlines():
        if line.startswith("127.0.0.1:%d " % port):
            return dict(zip(keys, line.split()))
    raise AssertionError("no row for port %d in:\n%s" % (port, text))


def test_python_connection_per_request_counted_done():
    lib.require_runs_with_sanitizer([sys.executable, "-c", "pass"])
    with FaultServer(blackhole=False) as srv:
        env = lib.preload_env({"TIMEBOX_READ_TIMEOUT": "5s"})
        p = subprocess.Popen([sys.executable, SELF, "per_request", str(srv.port), str(CALLS)],
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "going", p.stderr.read()
            st = timebox("stats", p.pid)
            print(st.stdout)
            assert st.returncode == 0, st
            r = row_of(st.stdout, srv.port)
            # One row is one snapshot: at most the call under way is not done yet.
            assert int(r["DONE"]) >= CALLS, r
            assert int(r["CALLS"]) - int(r["DONE"]) in (0, 1), r
            assert r["CALL_P50"] != "-" and r["CALL_P99"] != "-", r
            sug = timebox("suggest", p.pid, "--qps-window", "1s")
            print(sug.stdout)
            assert sug.returncode == 0, sug
            assert "max_conns = " in sug.stdout, sug.stdout
            assert "Little's law" in sug.stdout, sug.stdout
        finally:
            out, err = p.communicate(input="", timeout=30)
        assert p.returncode == 0, (out, err)
        assert lib.tb_lines(err) == [], err


def one_call_counted_done(argv_of_url, name):
    """argv_of_url(url) makes one request and exits; its stats file, written once more at
    exit, must count that call begun and done."""
    lib.require_runs_with_sanitizer([name, "--version"])
    with FaultServer(blackhole=False) as srv, tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "%s.prom" % name)
        env = lib.preload_env({"TIMEBOX_READ_TIMEOUT": "5s", "TIMEBOX_STATS_FILE": path})
        res = lib.run(argv_of_url(srv.url("/delay?ms=5")), env=env)
        assert res.returncode == 0, res
        assert lib.tb_lines(res.stderr) == [], res
        text = open(path).read()
        series = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name_labels, value = line.rsplit(" ", 1)
                series[name_labels.split("{")[0]] = float(value)
        print("%s: calls %s, completed %s" % (name, series.get("timebox_calls_total"),
                                            series.get("timebox_completed_total")))
        assert series.get("timebox_calls_total") == 1, text
        assert series.get("timebox_completed_total") == 1, text


def test_curl_counted_done_in_the_stats_file():
    """curl closes its connection at cleanup, after the response."""
    one_call_counted_done(lambda url: ["curl", "-sS", "-o", "/dev/null", url], "curl")


def test_wget_counted_done_in_the_stats_file():
    """wget exits without closing its connection: the kernel's close at exit ends it."""
    one_call_counted_done(lambda url: ["wget", "-q", "-O", "/dev/null", url], "wget")


if __name__ == "__main__":
    if sys.argv[1] == "per_request":
        per_request(int(sys.argv[2]), int(sys.argv[3]))
