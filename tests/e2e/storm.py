"""The downstream-protection workloads, shared by test_protect.py and the bench
(tests/bench/run.py): the sick server (stormserver.c), the legacy caller (stormcli.c), the
storm's columns and the adaptive gate's runs, each returning its figures as a dict.

Server and client share one origin, t0, a CLOCK_MONOTONIC time in ms (Python's
time.monotonic() reads the same clock on Linux): the server's stall window, its accept times
and in-flight samples and the client's timeline all count from it."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import lib

STORMSERVER = os.path.join(lib.BUILD, "tests", "e2e", "stormserver")
STORMCLI = lib.client("stormcli")

# The seed's storm: a GC pause of 3 s from t=1 s, 50 threads for 8 s, 250 ms read timeout.
STALL_FROM_MS, STALL_TO_MS, STALL_MS = 1000, 4000, 3000
THREADS, SECS, READ_TIMEOUT_MS = 50, 8, 250
# Between two calls a legacy program does some work; a failed call is retried at once, but
# for 2 ms: a connect refused at once must not spin 50 threads on a 2-core machine.
THINK_MS, RETRY_PAUSE_MS = 10, 2
# The breaker column's settings.
BREAKER_FAILURES, BREAKER_OPEN_MS, BREAKER_PROBES = 5, 1000, 1
BREAKER = {"TIMEBOX_BREAKER_FAILURES": BREAKER_FAILURES,
           "TIMEBOX_BREAKER_OPEN": "%dms" % BREAKER_OPEN_MS,
           "TIMEBOX_BREAKER_PROBES": BREAKER_PROBES}


def t0_ahead(ms=400):
    """An origin ms from now: room for both processes to start before it."""
    return int(time.monotonic() * 1000) + ms


def sleep_until(t0, at_ms):
    """Sleeps until at_ms after t0 (a point of the run's clock to sample at, not a wait for
    an event)."""
    left = t0 / 1000.0 + at_ms / 1000.0 - time.monotonic()
    if left > 0:
        time.sleep(left)


class StormServer:
    """build/tests/e2e/stormserver with args (a list), on ephemeral ports: .port, and the
    control port's answers as dicts of ints: .stats(), .accepts(from_ms, to_ms),
    .inflight(from_ms, to_ms)."""

    def __init__(self, args, t0=None):
        self.args = [str(a) for a in args]
        self.t0 = t0

    def __enter__(self):
        if not os.path.exists(STORMSERVER):
            raise FileNotFoundError("%s is not built (run make e2e)" % STORMSERVER)
        self.dir = tempfile.mkdtemp(prefix="tb-stormserver-")
        port_file = os.path.join(self.dir, "port")
        ctl_file = os.path.join(self.dir, "control")
        cmd = [STORMSERVER, "--port-file", port_file, "--control-port-file", ctl_file]
        if self.t0 is not None:
            cmd += ["--t0-ms", str(self.t0)]
        self.log = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen(cmd + self.args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.log,
                                     env=lib.native_env(clean=True))
        try:
            lib.wait_for(lambda: os.path.exists(port_file) or self.proc.poll() is not None,
                         what="the storm server's port file")
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("stormserver exited with %s: %s" % (self.proc.returncode,
                                                                        self.log.read()))
            self.port = int(open(port_file).read())
            self.control_port = int(open(ctl_file).read())
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def ask(self, line):
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=5) as s:
            s.sendall(line.encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        rec = {k: int(v) for k, v in (f.split("=", 1) for f in data.decode().split())}
        assert "error" not in rec, "stormserver did not understand %r: %r" % (line, data)
        return rec

    def stats(self):
        return self.ask("stats")

    def accepts(self, from_ms, to_ms):
        return self.ask("accepts %d %d" % (from_ms, to_ms))["count"]

    def inflight(self, from_ms, to_ms):
        return self.ask("inflight %d %d" % (from_ms, to_ms))


class CallerRun:
    """One stormcli run: .timeline [(sec, ok, failed, refused)], .total (dict: numbers as
    floats, err_* included), .stderr, .returncode; .breaker_lines, .config_errors (timebox's
    event=breaker and event=config_error records)."""

    def __init__(self, returncode, stdout, stderr):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timeline = []
        self.total = {}
        for line in stdout.splitlines():
            rec = lib.parse_logfmt(line)
            if "sec" in rec:
                self.timeline.append((int(rec["sec"]), int(rec["ok"]), int(rec["failed"]),
                                      int(rec["refused"])))
            elif "total" in rec:
                self.total = {k: float(v) for k, v in rec.items() if k != "total"}
        self.breaker_lines = lib.tb_records(stderr, event="breaker")
        self.config_errors = lib.tb_records(stderr, event="config_error")

    def openings(self):
        return [r for r in self.breaker_lines if r.get("state") == "open"]

    def __repr__(self):
        return "CallerRun(returncode=%r)\n--- stdout\n%s--- stderr (last 3000)\n%s" % (
            self.returncode, self.stdout, self.stderr[-3000:])


def caller_cmd(port, t0, **opts):
    """stormcli's argv: opts are its options with '_' for '-' (threads=50, rcvtimeo=250)."""
    cmd = [STORMCLI, "--port", str(port), "--t0-ms", str(t0)]
    for k, v in opts.items():
        if v is not None:
            cmd += ["--" + k.replace("_", "-"), str(v)]
    return cmd


def start_caller(port, t0, env, **opts):
    return subprocess.Popen(caller_cmd(port, t0, **opts), env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def finish_caller(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError("stormcli did not end within %d s:\n%s\n%s" % (timeout, out,
                                                                          err[-3000:]))
    return CallerRun(proc.returncode, out, err)


def run_caller(port, t0, env, timeout=60, **opts):
    return finish_caller(start_caller(port, t0, env, **opts), timeout)


def time_wait(port):
    """The caller's TIME_WAIT sockets towards 127.0.0.1:port (the side that closed first
    keeps the TIME_WAIT: the caller, for every call it gave up on)."""
    res = subprocess.run(["ss", "-Htan", "state", "time-wait", "( dport = :%d )" % port],
                         capture_output=True, text=True, check=True)
    return len([l for l in res.stdout.splitlines() if l.strip()])


# ---- the storm ------------------------------------------------------------------------------

# (name, timebox's settings or None for a native run, stormcli's options). Without timebox
# the program keeps its own 250 ms SO_RCVTIMEO; under timebox the limit is timebox's alone.
STORM_COLUMNS = [
    ("no timebox", None, {"rcvtimeo": READ_TIMEOUT_MS}),
    ("timeouts only", {"TIMEBOX_READ_TIMEOUT": "%dms" % READ_TIMEOUT_MS}, {}),
    ("timeouts + breaker", dict(BREAKER, TIMEBOX_READ_TIMEOUT="%dms" % READ_TIMEOUT_MS), {}),
]


def storm_column(env_extra, client_opts, threads=THREADS, secs=SECS):
    """One run of the storm: a fresh server stalling [STALL_FROM_MS, STALL_TO_MS), the caller
    natively (env_extra None) or under timebox with env_extra. Returns the figures:
    handshakes (accepted during the stall), after_first (accepted during the stall once the
    first calls could have timed out), time_wait (the caller's, at the stall's end),
    recovered_ms (the first success after the stall's end, -1 none), run (the CallerRun),
    stats (the server's)."""
    env = lib.native_env(clean=True) if env_extra is None else lib.preload_env(env_extra)
    t0 = t0_ahead()
    with StormServer(["--stall-from", STALL_FROM_MS, "--stall-to", STALL_TO_MS,
                      "--stall-ms", STALL_MS], t0=t0) as srv:
        proc = start_caller(srv.port, t0, env, threads=threads, secs=secs,
                            think_ms=THINK_MS, retry_pause_ms=RETRY_PAUSE_MS,
                            mark_ms=STALL_TO_MS, **client_opts)
        try:
            sleep_until(t0, STALL_TO_MS)
            tw = time_wait(srv.port)
        finally:
            run = finish_caller(proc, timeout=secs + 30)
        return {"handshakes": srv.accepts(STALL_FROM_MS, STALL_TO_MS),
                "after_first": srv.accepts(STALL_FROM_MS + READ_TIMEOUT_MS, STALL_TO_MS),
                "time_wait": tw, "recovered_ms": int(run.total.get("recovered_ms", -1)),
                "openings": len(run.openings()), "run": run, "stats": srv.stats(),
                "port": srv.port}


def print_storm(columns):
    """The three timelines side by side, then the figures."""
    names = [n for n, _ in columns]
    print("\nthe storm: %d threads, a %d s stall from t=%d s, read timeout %d ms"
          % (THREADS, STALL_MS // 1000, STALL_FROM_MS // 1000, READ_TIMEOUT_MS))
    print("  %-4s" % "sec" + "".join(" | %-24s" % n for n in names))
    print("  %-4s" % "" + " | ok/failed/refused       " * len(names))
    secs = max(len(c["run"].timeline) for _, c in columns)
    for i in range(secs):
        row = "  %-4d" % i
        for _, c in columns:
            tl = c["run"].timeline
            row += " | %-24s" % ("%d/%d/%d" % tl[i][1:] if i < len(tl) else "-")
        print(row)
    for label, key in (("handshakes during the stall", "handshakes"),
                       ("  of which after the first timeouts", "after_first"),
                       ("caller TIME_WAIT at the stall's end", "time_wait"),
                       ("recovery after the stall, ms", "recovered_ms"),
                       ("breaker openings", "openings")):
        print("  %-36s" % label + "".join(" %12s" % c[key] for _, c in columns))


# ---- the adaptive gate ----------------------------------------------------------------------

ADAPTIVE_THREADS = 50
ADAPTIVE_WORKERS, ADAPTIVE_SERVICE_MS = 8, 10
# "Near 8": the band the downstream's median in-flight must settle in with max_conns=auto.
# Envoy's gradient (limit x minRTT x 1.1 / RTT + sqrt(limit)) settles at about 12 here.
ADAPTIVE_BAND = (5, 16)
ADAPTIVE_COLUMNS = [("no gate", {}), ("max_conns 100", {"TIMEBOX_MAX_CONNS": 100}),
                    ("max_conns auto", {"TIMEBOX_MAX_CONNS": "auto"})]


def closed_loop(server_args, env_extra, secs, warmup_ms, threads=ADAPTIVE_THREADS):
    """threads closed-loop callers under timebox with env_extra for secs against a server
    with server_args; figures after warmup_ms: rps, p50/p99 of the whole call and of the
    exchange (request to first byte), the server's in-flight samples (p10/p50/p90/max)."""
    t0 = t0_ahead()
    with StormServer(server_args, t0=t0) as srv:
        run = run_caller(srv.port, t0, lib.preload_env(env_extra), timeout=secs + 30,
                         threads=threads, secs=secs, warmup_ms=warmup_ms)
        inflight = srv.inflight(warmup_ms, secs * 1000)
    t = run.total
    return {"rps": t.get("rps", 0), "p50_ms": t.get("p50_ms", -1), "p99_ms": t.get("p99_ms", -1),
            "xp50_ms": t.get("xp50_ms", -1), "xp99_ms": t.get("xp99_ms", -1),
            "failed": int(t.get("failed", 0)), "inflight": inflight, "run": run}


def print_closed_loop(title, columns):
    print("\n%s" % title)
    print("  %-16s %9s %9s %9s %9s %9s %7s  %s" % ("variant", "calls/s", "p50 ms", "p99 ms",
                                                  "xp50 ms", "xp99 ms", "failed",
                                                  "server in flight p10/p50/p90/max"))
    for name, c in columns:
        f = c["inflight"]
        print("  %-16s %9.0f %9.2f %9.2f %9.2f %9.2f %7d  %s" % (
            name, c["rps"], c["p50_ms"], c["p99_ms"], c["xp50_ms"], c["xp99_ms"], c["failed"],
            "%d/%d/%d/%d" % (f["p10"], f["p50"], f["p90"], f["max"]) if f["samples"] else "-"))
