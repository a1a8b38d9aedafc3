"""Observability, end to end: the log line of a cut (its phase, limit and timers), the rate
limit with its one suppressed count, `timebox stats PID` while the gate holds 5 calls and 3
wait, its Prometheus output read by a strict parser, the stats file, and the clean-up of a
killed process's segment."""

import json
import os
import re
import signal
import subprocess
import tempfile
import time

import lib
from lib import FaultServer

lib.scrub_timebox_env()

BLOCKCLI = lib.client("blockcli")


def stats_dir():
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        st = os.stat(xdg)
        if st.st_uid == os.geteuid() and (st.st_mode & 0o077) == 0:
            return os.path.join(xdg, "timebox")
    return "/dev/shm/timebox-%d" % os.geteuid()


def segment(pid):
    return os.path.join(stats_dir(), "stats-%d" % pid)


def timebox(*args):
    return subprocess.run([lib.LAUNCHER] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=20)


def start_blockcli(args, env):
    return subprocess.Popen([BLOCKCLI] + [str(a) for a in args], env=lib.preload_env(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def table_rows(text):
    """The destination rows of `timebox stats PID` as dicts keyed by the header's words."""
    lines = text.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("DEST"))
    keys = ["DEST", "HOST", "LEASED", "PENDING", "AVAIL", "MAX", "CALLS", "DONE", "REJECT",
            "CUTS", "FB_P50", "FB_P99", "CALL_P50", "CALL_P99"]
    return [dict(zip(keys, l.split())) for l in lines[head + 1:] if l.strip()]


# The text exposition format, version 0.0.4, read strictly: every sample belongs to a family
# announced by HELP and TYPE before it, names and labels are well formed, values are numbers,
# counters are not negative, histogram buckets are cumulative and end with le="+Inf" equal to
# _count, and no series appears twice.
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s)(?:,%s)*\})? (\S+)$" % (NAME, LABEL, LABEL))


def parse_prom(text):
    assert text.endswith("\n"), "the text must end with a newline"
    types, helps, series, families = {}, {}, {}, []
    for line in text.splitlines():
        assert line == line.strip() and line, "stray blank or empty line: %r" % line
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, kind, name, rest = line.split(" ", 3)
            assert re.fullmatch(NAME, name), line
            if kind == "TYPE":
                assert rest in ("counter", "gauge", "histogram", "summary", "untyped"), line
                assert name not in types, "TYPE twice: " + name
                types[name] = rest
                families.append(name)
            else:
                assert name not in helps, "HELP twice: " + name
                helps[name] = rest
            continue
        assert not line.startswith("#"), line
        m = SAMPLE.match(line)
        assert m, "malformed sample: %r" % line
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert base in types, "sample before its TYPE: " + line
        assert base == families[-1], "family interleaved: " + line
        v = float(value)
        if types[base] in ("counter", "histogram"):
            assert v >= 0, line
        key = (name, labels)
        assert key not in series, "duplicate series: " + line
        series[key] = v
    for name, kind in types.items():
        if kind != "histogram":
            continue
        groups = {}
        for (n, labels), v in series.items():
            if n == name + "_bucket":
                le = re.search(r'le="([^"]*)"', labels).group(1)
                rest = re.sub(r',?le="[^"]*"', "", labels)
                groups.setdefault(rest, []).append((float(le), v))
        for rest, buckets in groups.items():
            buckets.sort()
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), "buckets not cumulative: %s %s" % (name, rest)
            assert buckets[-1][0] == float("inf"), "no +Inf bucket: " + name
            assert series[(name + "_count", rest)] == counts[-1], name
            assert (name + "_sum", rest) in series, name
    return types, series


def test_a_cut_logs_one_line_with_its_timers():
    with FaultServer() as srv:
        res = lib.blockcli(["--port", srv.port, "--path", "/delay?ms=2000"],
                           env_extra={"TIMEBOX_READ_TIMEOUT": "300ms"})
        recs = lib.tb_records(res.run.stderr, event="timeout")
        assert len(recs) == 1, res.run.stderr
        r = recs[0]
        print("  " + lib.tb_lines(res.run.stderr)[0])
        assert r["phase"] == "first_byte" and r["limit_ms"] == "300", r
        assert int(r["elapsed_ms"]) >= 300, r
        assert r["gate_ms"] == "-1", r                    # no gate configured
        assert 0 <= int(r["connect_ms"]) < 1000, r        # the handshake completed
        assert r["first_byte_ms"] == "-1", r              # never reached
        assert int(r["total_ms"]) >= 300, r
        assert r["budget_ms"] == "-1", r                  # no deadline
        assert r["dest"] == "127.0.0.1:%d" % srv.port and r["fd"].isdigit(), r
        assert r["pid"].isdigit() and r["tid"].isdigit(), r


def test_json_lines_parse():
    with FaultServer() as srv:
        res = lib.blockcli(["--port", srv.port, "--path", "/delay?ms=2000"],
                           env_extra={"TIMEBOX_READ_TIMEOUT": "200ms",
                                      "TIMEBOX_LOG_FORMAT": "json"})
        lines = [l for l in res.run.stderr.splitlines() if l.startswith("{")]
        assert len(lines) == 1, res.run.stderr
        r = json.loads(lines[0])
        print("  " + lines[0])
        assert r["src"] == "timebox" and r["event"] == "timeout", r
        assert r["phase"] == "first_byte" and r["limit_ms"] == 200, r
        assert r["first_byte_ms"] == -1 and r["connect_ms"] >= 0, r


def test_rate_limit_then_one_suppressed_count():
    rate = 20
    with FaultServer() as srv:
        t0 = time.monotonic()
        res = lib.blockcli(["--port", srv.port, "--path", "/delay?ms=40", "--threads", 10,
                            "--calls", 100],
                           env_extra={"TIMEBOX_READ_TIMEOUT": "2ms", "TIMEBOX_LOG_RATE": rate},
                           timeout=60)
        secs = time.monotonic() - t0
        cut = [c for c in res.calls() if c["result"] == "error"]
        lines = lib.tb_records(res.run.stderr, event="timeout")
        sup = lib.tb_records(res.run.stderr, event="suppressed")
        print("  %d cuts in %.2f s: %d lines, suppressed lines %s"
              % (len(cut), secs, len(lines), [s["count"] for s in sup]))
        assert len(cut) >= 500, res.run.stdout[-2000:]
        windows = int(secs) + 2            # one-second windows the run can touch
        assert len(lines) <= rate * windows, len(lines)
        assert 1 <= len(sup) <= windows, sup
        assert len(lines) + sum(int(s["count"]) for s in sup) == len(cut)


def test_stats_pid_shows_the_gate():
    env = {"TIMEBOX_MAX_CONNS": 5}
    with FaultServer() as srv:
        # The holders' calls last 20 s: the picture holds still while a loaded machine
        # starts the client and reads its statistics (the client is killed at the end).
        p = start_blockcli(["--port", srv.port, "--path", "/delay?ms=20000", "--threads", 8],
                           env)
        try:
            rows = []

            def held():
                nonlocal rows
                out = timebox("stats", p.pid)
                if out.returncode != 0:
                    return False
                rows = table_rows(out.stdout)
                # The five holders' calls begin with their requests, a little after the
                # connects that took the slots: wait for those too.
                return (rows and rows[0]["LEASED"] == "5" and rows[0]["PENDING"] == "3"
                        and rows[0]["CALLS"] == "5")
            try:
                lib.wait_for(held, timeout=15,
                             what="leased=5 pending=3 calls=5 in timebox stats")
            except AssertionError:
                print("last rows: %r" % rows)
                raise
            out = timebox("stats", p.pid)
            print(out.stdout)
            r = rows[0]
            assert r["DEST"] == "127.0.0.1:%d" % srv.port, r
            assert (r["AVAIL"], r["MAX"], r["CALLS"]) == ("0", "5", "5"), r
            listing = timebox("stats")
            assert re.search(r"^%d\s+blockcli\s" % p.pid, listing.stdout, re.M), listing.stdout
            prom = timebox("stats", p.pid, "--prom")
            assert prom.returncode == 0, prom.stderr
            types, series = parse_prom(prom.stdout)
            lab = '{dest="127.0.0.1:%d",pid="%d"}' % (srv.port, p.pid)
            assert series[("timebox_gate_leased", lab)] == 5, prom.stdout
            assert series[("timebox_gate_pending", lab)] == 3, prom.stdout
            assert series[("timebox_calls_total", lab)] == 5, prom.stdout
            assert types["timebox_first_byte_seconds"] == "histogram"
            assert ("timebox_timeouts_total",
                    '{dest="127.0.0.1:%d",pid="%d",phase="read"}' % (srv.port, p.pid)) in series
        finally:
            p.kill()
            p.wait()
        p.communicate()


# A program whose connects the breaker refuses, kept alive for `timebox stats` to look at.
REFUSED_CLIENT = r"""
import socket, sys
port = int(sys.argv[1])
for i in range(8):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
    except OSError as e:
        print(e.errno, flush=True)
    s.close()
print("ready", flush=True)
sys.stdin.readline()
"""


def test_stats_show_the_breaker_and_the_retry_budget():
    """The operator's view of the downstream's protection: eight connects to a port nobody
    listens on, the breaker at 3 failures: three refused by the kernel (the second and third
    are the thread's retries, let through by the retry budget's floor), then the breaker
    open and five refused at once, nothing sent."""
    port = lib.free_port()
    env = {"TIMEBOX_BREAKER_FAILURES": "3", "TIMEBOX_BREAKER_OPEN": "30s",
           "TIMEBOX_RETRY_BUDGET": "20%"}
    p = subprocess.Popen(["python3", "-c", REFUSED_CLIENT, str(port)],
                         env=lib.preload_env(env), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        errnos = [p.stdout.readline().strip() for _ in range(8)]
        assert errnos == ["111"] * 8, errnos
        assert p.stdout.readline().strip() == "ready"
        out = timebox("stats", p.pid)
        assert out.returncode == 0, out.stderr
        print(out.stdout)
        rows = [l.split() for l in out.stdout.splitlines()
                if l.startswith("127.0.0.1:%d " % port)]
        assert len(rows) == 2, out.stdout  # the destinations' table, then the protection's
        assert rows[1][1:6] == ["open", "1", "5", "2", "0"], rows[1]
        prom = timebox("stats", p.pid, "--prom")
        types, series = parse_prom(prom.stdout)
        lab = '{dest="127.0.0.1:%d",pid="%d"}' % (port, p.pid)
        assert types["timebox_breaker_state"] == "gauge"
        assert series[("timebox_breaker_state", lab)] == 1, prom.stdout
        assert series[("timebox_breaker_opened_total", lab)] == 1
        assert series[("timebox_breaker_refused_total", lab)] == 5
        assert series[("timebox_retries_total", lab)] == 2
        assert series[("timebox_retry_refused_total", lab)] == 0
        assert series[("timebox_gate_auto_max", lab)] == 0
    finally:
        p.stdin.close()
        p.wait(timeout=10)
    err = p.stderr.read()
    opened = lib.tb_records(err, event="breaker")
    assert [r["state"] for r in opened] == ["open"], err
    assert opened[0]["reason"] == "consecutive" and opened[0]["last"] == "refused", err
    assert opened[0]["failures"] == "3" and opened[0]["for_ms"] == "30000", err
    rejects = lib.tb_records(err, event="reject", reason="breaker")
    assert len(rejects) == 1 and rejects[0]["refused"] == "1", err  # one line per opening


def test_stats_file_appears_and_updates():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "app.prom")
        env = {"TIMEBOX_READ_TIMEOUT": "5s", "TIMEBOX_STATS_FILE": path,
               "TIMEBOX_STATS_INTERVAL": "200ms"}
        with FaultServer() as srv:
            p = start_blockcli(["--port", srv.port, "--path", "/delay?ms=10", "--calls", 8,
                                "--pause-ms", 250], env)
            try:
                lib.wait_for(lambda: os.path.exists(path), timeout=3, what="the stats file")
                seen = set()

                def calls():
                    _, series = parse_prom(open(path).read())
                    v = [v for (n, _), v in series.items() if n == "timebox_calls_total"]
                    seen.add(v[0] if v else -1)
                    return len(seen) >= 2
                lib.wait_for(calls, timeout=5, interval=0.05, what="the file to change")
                print("  timebox_calls_total seen: %s" % sorted(seen))
                assert not [f for f in os.listdir(tmp) if ".tmp" in f]
            finally:
                p.wait(timeout=20)
            _, series = parse_prom(open(path).read())
            done = [v for (n, _), v in series.items() if n == "timebox_completed_total"]
            assert done and done[0] >= 7, series      # the file is written once more at exit
            assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)


def test_killed_process_segment_is_cleaned():
    with FaultServer() as srv:
        p = start_blockcli(["--port", srv.port, "--path", "/delay?ms=5000"],
                           {"TIMEBOX_READ_TIMEOUT": "10s"})
        seg = segment(p.pid)
        lib.wait_for(lambda: os.path.exists(seg), timeout=3, what="the segment")
        st = os.stat(seg)
        assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.geteuid(), oct(st.st_mode)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert os.path.exists(seg)
        out = timebox("stats")
        assert "removed the statistics of pid %d" % p.pid in out.stderr, out.stderr
        assert not os.path.exists(seg)


def test_segment_removed_at_exit_and_absent_when_not_governing():
    with FaultServer() as srv:
        p = start_blockcli(["--port", srv.port, "--path", "/delay?ms=300"],
                           {"TIMEBOX_READ_TIMEOUT": "5s"})
        lib.wait_for(lambda: os.path.exists(segment(p.pid)), timeout=3, what="the segment")
        p.communicate(timeout=10)
        assert p.returncode == 0
        assert not os.path.exists(segment(p.pid))  # removed at exit, not by a later clean
        p = start_blockcli(["--port", srv.port, "--path", "/delay?ms=1000"], {})
        p.communicate(timeout=10)
        assert p.returncode == 0
        assert not os.path.exists(segment(p.pid))
