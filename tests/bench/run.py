#!/usr/bin/env python3
"""timebox benchmarks: what the library costs, side by side with the same program run
natively and through a HAProxy sidecar with the same limits (python3 stdlib only).

usage: run.py [--quick] [--out DIR] [--only NAME[,NAME...]]

Workloads (NAME): exchange, syscalls, fastpath, precision, scale, gate, epoll, framing,
storm, adaptive.
Every comparison
is measured in one run, its variants interleaved (A B C, C B A, ...); a cell is the median
of the repetitions with their min-max. Targets are printed PASS or MISS and never change
the exit status, which is non-zero only when a workload failed to produce numbers. A MISS
carries the load average when it was judged and the share of the CPUs' time that work
other than the run's took during its workload (/proc/stat less the run's own processes,
steal included): the load average counts the run's own threads. Neither sees a neighbour
sharing the physical cores of a virtual machine, which slows every instruction: a MISS at
0 % other work on a shared host is still not a quiet machine, and the runs' spread (each
cell's min-max) says how noisy it was.

The full run writes docs/benchmarks.md and docs/bench-latency.svg, and the numbers as
build/bench/results.json; --quick (seconds: it checks that the harness works, its numbers
mean little) and --only write all three to build/bench/. --out DIR puts them in DIR.
"""

import argparse
import json
import os
import platform
import re
import shutil
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import lib  # noqa: E402  (build paths and the preload environment)
import storm  # noqa: E402  (the downstream-protection workloads, shared with test_protect.py)

BENCH = os.path.join(lib.BUILD, "tests", "bench")
WORKLOADS = ["exchange", "syscalls", "fastpath", "precision", "scale", "gate", "epoll",
             "framing", "features", "storm", "adaptive"]

# Every phase and the deadline armed, long enough never to fire during a run: the cost of
# being governed, not of timing out. HAProxy gets the same numbers.
PHASE = "10s"
DEADLINE = "30s"
LIMITS = {
    "TIMEBOX_CONNECT_TIMEOUT": PHASE,
    "TIMEBOX_WRITE_TIMEOUT": PHASE,
    "TIMEBOX_FIRST_BYTE_TIMEOUT": PHASE,
    "TIMEBOX_READ_TIMEOUT": PHASE,
    "TIMEBOX_DEADLINE": DEADLINE,
}
GATE_CAP = 8
# What loading the library may add to a process's start (/bin/true, whole process).
START_UP_ADDED_MAX = 150000
# What the fork handlers may add to a fork child's page faults (a child that exits at once).
FORK_FAULTS_ADDED_MAX = 50
# What governing one raw exchange (a write and a read) may add to the client's instructions.
EXCHANGE_ADDED_MAX = 300

# With two CPUs or more, the client runs on CPU 1 and the echo server on CPU 0, always:
# otherwise the scheduler sometimes puts them on one CPU (an exchange then costs ~15 us)
# and sometimes on two (~45 us), and that, not timebox, decides the comparison. HAProxy
# keeps its defaults (a thread per CPU, unpinned), as a sidecar would.
PIN = os.cpu_count() is not None and os.cpu_count() >= 2
CLIENT_CPU, SERVER_CPU = 1, 0


def exe(name):
    return os.path.join(BENCH, name)


def say(text=""):
    print(text, flush=True)


# ---------------------------------------------------------------------------------------
# Processes


def parse_line(text):
    """The last 'k=v k=v' line a bench program printed, numbers converted."""
    lines = [l for l in text.splitlines() if "=" in l and not l.startswith("timebox:")]
    if not lines:
        raise RuntimeError("no result line in %r" % text[-2000:])
    out = {}
    for field in lines[-1].split():
        k, _, v = field.partition("=")
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


def env_for(variant, extra=None):
    """The environment of one variant: 'native' (no preload), 'timebox' (preloaded, with
    LIMITS and extra) or 'native+thread' (native with tests/bench/lib/idle_thread.c
    preloaded: one more thread that never runs, the floor of any library that keeps one)."""
    if variant == "timebox":
        return lib.preload_env(dict(LIMITS, **(extra or {})))
    if variant == "native+thread":
        return lib.native_env({"LD_PRELOAD": os.path.join(BENCH, "idle_thread.so")})
    return lib.native_env()


def on_cpu(cpu):
    """A preexec_fn that pins the child to one CPU (nothing without PIN)."""
    if not PIN:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def run_prog(cmd, env, timeout=300, cpu=CLIENT_CPU):
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                         preexec_fn=on_cpu(cpu) if cpu is not None else None)
    if res.returncode != 0:
        raise RuntimeError("%s exited with %s:\n%s%s" % (" ".join(cmd), res.returncode,
                                                       res.stdout[-2000:], res.stderr[-2000:]))
    return parse_line(res.stdout)


def wait_port(port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_proc(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class EchoServer:
    """build/tests/bench/echo_server on an ephemeral port; .port, .stats() (the connections
    it saw open at once since the last call). answer="http" or "tls": the server plays
    canned.h's script instead of echoing."""

    def __init__(self, delay_us=0, answer=None):
        self.delay_us = delay_us
        self.answer = answer

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="tb-bench-echo-")
        port_file = os.path.join(self.dir, "port")
        self.stats_file = os.path.join(self.dir, "stats")
        self.proc = subprocess.Popen(
            [exe("echo_server"), "--port-file", port_file, "--stats-file", self.stats_file,
             "--delay-us", str(self.delay_us)] +
            (["--answer", self.answer] if self.answer else []), env=lib.native_env(),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=on_cpu(SERVER_CPU))
        lib.wait_for(lambda: os.path.exists(port_file) or self.proc.poll() is not None,
                     what="the echo server's port file")
        if self.proc.poll() is not None:
            raise RuntimeError("echo_server exited with %s" % self.proc.returncode)
        self.port = int(open(port_file).read())
        self.stats()
        return self

    def stats(self):
        if os.path.exists(self.stats_file):
            os.unlink(self.stats_file)
        self.proc.send_signal(signal.SIGUSR1)
        lib.wait_for(lambda: os.path.exists(self.stats_file), what="the echo server's stats")
        return parse_line(open(self.stats_file).read())

    def __exit__(self, *exc):
        stop_proc(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


class HAProxy:
    """A HAProxy sidecar in tcp mode in front of backend_port, with timeouts equal to
    timebox's limits and `server maxconn`; .port, .pid."""

    def __init__(self, backend_port, maxconn):
        self.backend_port = backend_port
        self.maxconn = maxconn

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="tb-bench-haproxy-")
        self.port = free_port()
        cfg = os.path.join(self.dir, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write("""global
    maxconn 8000
defaults
    mode tcp
    timeout connect %(phase)s
    timeout client %(phase)s
    timeout server %(phase)s
    timeout queue %(phase)s
frontend fe
    bind 127.0.0.1:%(port)d
    default_backend be
backend be
    server downstream 127.0.0.1:%(backend)d maxconn %(maxconn)d
""" % {"phase": PHASE, "port": self.port, "backend": self.backend_port,
                "maxconn": self.maxconn})
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen(["haproxy", "-f", cfg, "-db"], env=lib.native_env(),
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        try:
            wait_port(self.port)
        except OSError:
            stop_proc(self.proc)
            self.log.seek(0)
            raise RuntimeError("haproxy did not start: %s" % self.log.read())
        return self

    def cpu_secs(self):
        """User+system CPU the sidecar has used so far."""
        fields = open("/proc/%d/stat" % self.pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc):
        stop_proc(self.proc)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


# ---------------------------------------------------------------------------------------
# Statistics and formatting


def summary(values):
    values = [v for v in values if v is not None]
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def fmt(x, digits=None):
    if x is None:
        return "-"
    if digits is None:
        digits = 0 if abs(x) >= 1000 else 1 if abs(x) >= 10 else 2
    return "{:,.{}f}".format(x, digits)


def cell(s, digits=None):
    """'median (min-max)' of a summary."""
    if s["n"] == 1 or s["min"] == s["max"]:
        return fmt(s["median"], digits)
    return "%s (%s–%s)" % (fmt(s["median"], digits), fmt(s["min"], digits),
                           fmt(s["max"], digits))


def interleaved(variants, reps):
    """A B C, C B A, A B C, ...: every variant at every position, no drift favoured."""
    for r in range(reps):
        for v in (variants if r % 2 == 0 else list(reversed(variants))):
            yield r, v


def paired_ratio(runs, a, b, metric="xps"):
    """The throughput ratio a/b from interleaved runs (runs[v][r]: variant v's run of round r),
    as the median of each round's own ratio: a round's runs follow one another within a few
    seconds, so a host whose speed drifts over minutes (this VM's runs of one variant spread
    by ±25 %) moves both sides of a round's ratio alike, where it would move a ratio of the
    two medians taken over the whole workload. Returns (median, first quartile, third
    quartile): the quartiles say how far the rounds disagree, i.e. what the machine lets the
    median mean."""
    ratios = sorted(x[metric] / y[metric] for x, y in zip(runs[a], runs[b]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    return statistics.median(ratios), q[0], q[2]


class Report:
    def __init__(self, quick):
        self.quick = quick
        self.sections = []  # (title, markdown)
        self.targets = []   # (label, ok, detail)
        self.results = {}

    def section(self, title, text):
        self.sections.append((title, text))
        say("\n== %s\n%s" % (title, text))

    def target(self, label, ok, detail):
        """A MISS carries the load average when it was judged: on a shared machine, a miss
        at load 2 says the CPUs were busy, at load 0.1 that timebox is slow. The load
        average counts the run's own threads too; workload_done adds what other work took."""
        if not ok:
            detail = "%s (load average %.2f)" % (detail, os.getloadavg()[0])
        self.targets.append((label, ok, detail))
        say("%s  %s: %s" % ("PASS" if ok else "MISS", label, detail))

    def workload_done(self, first_target, others):
        """The targets judged since index first_target belong to a workload during which
        other work (not this run's processes) took `others` of the machine's CPU time
        (a share, None where /proc/stat could not say): each MISS among them says so."""
        if others is None:
            return
        for i in range(first_target, len(self.targets)):
            label, ok, detail = self.targets[i]
            if not ok:
                self.targets[i] = (label, ok, "%s; other work took %.0f %% of the CPUs "
                                   "during the workload" % (detail[:-1] if detail.endswith(")")
                                                            else detail, others * 100) +
                                   (")" if detail.endswith(")") else ""))


def machine_busy():
    """CPU seconds the machine's CPUs spent busy since boot, all of them together
    (/proc/stat: user, nice, system, irq, softirq and steal - the time a hypervisor gave to
    other guests), or None where /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(v) < 7:
        return None
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / \
        os.sysconf("SC_CLK_TCK")


def own_cpu():
    """CPU seconds of this run: this process and every child it has waited for (the
    programs measured, the servers stopped at the end of their workload)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class OtherWork:
    """The share of the machine's CPU time that work other than this run took between
    start and share(): other processes, and steal where the hypervisor reports it - what
    the load average (it counts the run's own threads) cannot tell apart. A neighbour on
    the same physical cores does not show here."""

    def __init__(self):
        self.busy, self.own, self.t = machine_busy(), own_cpu(), time.monotonic()

    def share(self):
        busy = machine_busy()
        wall = (time.monotonic() - self.t) * (os.cpu_count() or 1)
        if busy is None or self.busy is None or wall <= 0:
            return None
        return min(1.0, max(0.0, (busy - self.busy) - (own_cpu() - self.own)) / wall)


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# Workloads


def exchange_cmd(port, conns, n, extra=()):
    return [exe("exchange"), "--port", str(port), "--conns", str(conns), "--n", str(n)] + \
        [str(a) for a in extra]


def bench_exchange(rep, cfg):
    """Workload 1: keep-alive request/response, native vs timebox vs HAProxy."""
    res = {}
    rows = []
    with EchoServer() as srv, HAProxy(srv.port, 1000) as hap:
        for conns, n in cfg["exchange"]:
            runs = {"native": [], "timebox": [], "haproxy": []}
            for _, variant in interleaved(list(runs), cfg["reps_exchange"]):
                port = hap.port if variant == "haproxy" else srv.port
                cpu0 = hap.cpu_secs()
                r = run_prog(exchange_cmd(port, conns, n), env_for(variant))
                r["sidecar_cpu_us"] = (hap.cpu_secs() - cpu0) * 1e6 / r["n"] \
                    if variant == "haproxy" else 0.0
                runs[variant].append(r)
            key = "%d" % conns
            res[key] = {}
            for variant, rs in runs.items():
                s = {m: summary([r[m] for r in rs])
                     for m in ("xps", "p50_us", "p99_us", "cpu_us", "sidecar_cpu_us")}
                res[key][variant] = s
                s["xps_runs"] = [r["xps"] for r in rs]  # in the order they ran
                rows.append(["%d" % conns, variant, cell(s["xps"]), cell(s["p50_us"]),
                             cell(s["p99_us"]), cell(s["cpu_us"]),
                             fmt(s["sidecar_cpu_us"]["median"]) if variant == "haproxy"
                             else "–"])
            ratio, lo, hi = paired_ratio(runs, "timebox", "native")
            res[key]["ratio_native"] = ratio
            res[key]["ratio_native_quartiles"] = [lo, hi]
            res[key]["ratio_haproxy"] = paired_ratio(runs, "timebox", "haproxy")[0]
    rep.results["exchange"] = res
    text = table(["conns", "variant", "exchanges/s", "p50 µs", "p99 µs", "client CPU µs/exch",
                  "sidecar CPU µs/exch"], rows)
    for conns, _ in cfg["exchange"]:
        r = res["%d" % conns]
        text += "\n\n%d connection%s: timebox/native throughput %.3f (rounds' quartiles " \
            "%.3f-%.3f), timebox/HAProxy %.2f." % (
                conns, "" if conns == 1 else "s", r["ratio_native"],
                r["ratio_native_quartiles"][0], r["ratio_native_quartiles"][1],
                r["ratio_haproxy"])
    text += "\n\nEach ratio is the median of the rounds' own ratios (the variants run one " \
        "after another in each round, the order reversed every other round), not a ratio of " \
        "medians: the host's speed drifts between rounds, and a round's runs share it."
    rep.section("Exchange cost (64 B request/response, blocking keep-alive client)", text)
    for conns, _ in cfg["exchange"]:
        r = res["%d" % conns]
        rep.target("exchange, %d conn: timebox ≥ 0.97 × native" % conns,
                   r["ratio_native"] >= 0.97, "%.3f (rounds' quartiles %.3f-%.3f)" % (
                       r["ratio_native"], r["ratio_native_quartiles"][0],
                       r["ratio_native_quartiles"][1]))
        rep.target("exchange, %d conn: timebox ≥ 1.3 × HAProxy" % conns,
                   r["ratio_haproxy"] >= 1.3, "%.2f" % r["ratio_haproxy"])


def perf_works():
    if shutil.which("perf") is None:
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "raw_syscalls:sys_enter" in r.stderr and \
        "not supported" not in r.stderr


# The calls an exchange could make, counted one by one; raw_syscalls:sys_enter counts them
# all, and whatever is not named here shows up as "other". (The whole syscalls:* glob
# takes perf some 14 s to set up per run.)
SYSCALLS = ["read", "write", "readv", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg",
            "futex", "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait",
            "epoll_pwait2", "epoll_ctl",
            "clock_gettime", "newfstatat", "fstat", "ioctl", "shutdown", "getsockopt",
            "getpid", "gettid", "sched_yield", "nanosleep", "clock_nanosleep", "rt_sigprocmask",
            "mmap", "munmap", "mprotect", "madvise", "brk"]


def tracepoints():
    for base in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        d = os.path.join(base, "events", "syscalls")
        if os.path.isdir(d):
            return [n for n in SYSCALLS if os.path.isdir(os.path.join(d, "sys_enter_" + n))]
    return SYSCALLS


def count_syscalls(cmd, env, use_perf):
    """{syscall name: count} for cmd and its threads; with perf, "other" holds the calls
    not in SYSCALLS."""
    counts = {}
    with tempfile.NamedTemporaryFile("r", prefix="tb-bench-sys-") as out:
        if use_perf:
            events = ",".join(["raw_syscalls:sys_enter"] +
                              ["syscalls:sys_enter_" + n for n in tracepoints()])
            full = ["perf", "stat", "-x,", "-o", out.name, "-e", events, "--"] + cmd
        else:
            full = ["strace", "-f", "-c", "-o", out.name, "--"] + cmd
        res = subprocess.run(full, env=env, capture_output=True, text=True, timeout=300,
                             preexec_fn=on_cpu(CLIENT_CPU))
        if res.returncode != 0:
            raise RuntimeError("%s failed: %s" % (full[0], res.stderr[-2000:]))
        total = None
        for line in out.read().splitlines():
            if use_perf:
                f = line.split(",")
                if len(f) > 2 and f[0].isdigit():
                    if f[2] == "raw_syscalls:sys_enter":
                        total = int(f[0])
                    elif f[2].startswith("syscalls:sys_enter_"):
                        counts[f[2][len("syscalls:sys_enter_"):]] = int(f[0])
            else:
                f = line.split()
                if len(f) >= 5 and f[3].isdigit() and not line.startswith("100.00"):
                    counts[f[-1]] = int(f[3])
        if total is not None:
            counts["other"] = total - sum(counts.values())
    return {k: v for k, v in counts.items() if v}


def bench_syscalls(rep, cfg):
    """Workload 2: system calls per exchange in steady state: the difference between a long
    and a short run of the same client, so start-up and exit cancel out."""
    use_perf = perf_works()
    short, long_ = cfg["sys_n"]
    res = {"tool": "perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_<name>..."
           if use_perf else "strace -c -f"}
    rows = []
    with EchoServer() as srv:
        for conns in (1, 32):
            per = {}
            for variant in ("native", "timebox"):
                env = env_for(variant)
                # env(1) keeps the preload off the counting tool itself; it runs once in
                # both runs, so it cancels out like the start-up.
                c = {}
                for n in (short, long_):
                    cmd = ["env", "LD_PRELOAD=" + env.get("LD_PRELOAD", "")] + \
                        exchange_cmd(srv.port, conns, n // conns, ["--warmup", 200])
                    c[n] = count_syscalls(cmd, {k: v for k, v in env.items()
                                                if k != "LD_PRELOAD"}, use_perf)
                diff = {k: (c[long_].get(k, 0) - c[short].get(k, 0)) /
                        ((long_ // conns - short // conns) * conns)
                        for k in set(c[long_]) | set(c[short])}
                per[variant] = {k: v for k, v in diff.items() if abs(v) >= 0.0005}
            total = {v: sum(per[v].values()) for v in per}
            extra = total["timebox"] - total["native"]
            names = sorted(set(per["native"]) | set(per["timebox"]))
            for v in ("native", "timebox"):
                rows.append([conns, v, "%.3f" % total[v],
                             ", ".join("%s %.3f" % (k, per[v][k]) for k in names
                                       if k in per[v])])
            res["%d" % conns] = {"native": total["native"], "timebox": total["timebox"],
                                 "extra": extra, "detail": per}
    rep.results["syscalls"] = res
    text = table(["conns", "variant", "syscalls/exchange", "by name (per exchange)"], rows)
    text += "\n\nCounted with %s on runs of %d and %d exchanges; the difference divided " \
            "by the %d exchanges between them." % (res["tool"], short, long_, long_ - short)
    rep.section("System calls per exchange (steady state)", text)
    for conns in (1, 32):
        e = res["%d" % conns]["extra"]
        rep.target("syscalls, %d conn: 0 extra per exchange" % conns, abs(e) < 0.01,
                   "%+.4f per exchange" % e)


def callgrind_instructions(cmd, env):
    with tempfile.TemporaryDirectory(prefix="tb-bench-cg-") as d:
        res = subprocess.run(["valgrind", "--tool=callgrind",
                              "--callgrind-out-file=" + os.path.join(d, "out")] + cmd,
                             env=env, capture_output=True, text=True, timeout=600)
        m = re.search(r"Collected : (\d+)", res.stderr)
        if res.returncode != 0 or m is None:
            raise RuntimeError("callgrind failed: %s" % res.stderr[-2000:])
        return int(m.group(1))


def bench_fastpath(rep, cfg):
    """Workload 3: the untracked fast path: callgrind instructions per read/write on a file
    and a pipe, native vs preloaded (limits set, so the fd table is live); and dd."""
    res = {}
    rows = []
    short, long_ = cfg["cg_n"]
    for mode, calls in (("file", 1), ("pipe", 2)):
        per = {}
        for variant in ("native", "timebox"):
            counts = [callgrind_instructions([exe("reads"), "--mode", mode, "--n", str(n)],
                                             env_for(variant)) for n in (short, long_)]
            per[variant] = (counts[1] - counts[0]) / ((long_ - short) * calls)
        res[mode] = dict(per, extra=per["timebox"] - per["native"])
        rows.append([mode, "read" if mode == "file" else "write + read", "%.2f" % per["native"],
                     "%.2f" % per["timebox"], "%+.2f" % res[mode]["extra"]])
    count = cfg["dd_count"]
    times = {"native": [], "timebox": []}
    for _, variant in interleaved(list(times), cfg["reps"]):
        t0 = time.monotonic()
        subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=%d" % count],
                       env=env_for(variant), check=True, capture_output=True)
        times[variant].append(time.monotonic() - t0)
    dd = {v: summary(t) for v, t in times.items()}
    res["dd"] = {"native_s": dd["native"], "timebox_s": dd["timebox"],
                 "ratio": dd["native"]["median"] / dd["timebox"]["median"]}
    # A process's start: what loading the library costs every exec, governed or not.
    start = {v: callgrind_instructions(["/bin/true"], env_for(v)) for v in ("native", "timebox")}
    spawns = cfg["spawns"]
    cpu = {"native": [], "timebox": []}
    for _, variant in interleaved(list(cpu), cfg["reps"]):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(spawns):
            subprocess.run(["/bin/true"], env=env_for(variant), check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[variant].append((after.ru_utime + after.ru_stime - before.ru_utime -
                             before.ru_stime) / spawns * 1e3)
    cpu = {v: summary(t) for v, t in cpu.items()}
    # A fork: what the library's fork handlers cost a process that forks (a shell, a
    # pre-fork server): its children's page faults (a count) and the time per fork.
    fork_runs = {"native": [], "timebox": []}
    for _, variant in interleaved(list(fork_runs), cfg["reps"]):
        out = subprocess.run([exe("reads"), "--mode", "fork", "--n", str(cfg["forks"])],
                             env=env_for(variant), check=True, capture_output=True,
                             text=True).stdout
        fork_runs[variant].append({k: float(v) for k, v in
                                   re.findall(r"(faults_per_child|us_per_fork)=([\d.]+)", out)})
    res["fork"] = {v: {"faults_per_child": summary([r["faults_per_child"] for r in runs]),
                       "us_per_fork": summary([r["us_per_fork"] for r in runs])}
                   for v, runs in fork_runs.items()}
    res["fork"]["faults_added"] = (res["fork"]["timebox"]["faults_per_child"]["median"] -
                                   res["fork"]["native"]["faults_per_child"]["median"])
    # A process's first connect: what starting timebox's threads and its statistics segment
    # costs, once per process (and, for comparison, the connects after it).
    conn_runs = {"native": [], "timebox": []}
    for _, variant in interleaved(list(conn_runs), cfg["spawns"]):
        out = subprocess.run([exe("reads"), "--mode", "connect", "--n", "20"],
                             env=env_for(variant), check=True, capture_output=True,
                             text=True).stdout
        conn_runs[variant].append({k: float(v) for k, v in
                                   re.findall(r"(first_us|later_us)=([\d.]+)", out)})
    res["first_connect"] = {v: {"first_us": summary([r["first_us"] for r in runs]),
                                "later_us": summary([r["later_us"] for r in runs])}
                            for v, runs in conn_runs.items()}
    res["start_up"] = {"native": start["native"], "timebox": start["timebox"],
                       "added": start["timebox"] - start["native"],
                       "cpu_ms_native": cpu["native"], "cpu_ms_timebox": cpu["timebox"]}
    rep.results["fastpath"] = res
    text = table(["fd", "calls", "instructions/call native", "preloaded", "added"], rows)
    text += "\n\nInstructions in user space (`valgrind --tool=callgrind`), from runs of " \
            "%d and %d iterations; preloaded with every limit set, so the fd table is " \
            "mapped and each call pays the lookup.\n\n" % (short, long_)
    text += table(["dd bs=64 count=%d" % count, "seconds"],
                  [["native", cell(dd["native"], 3)], ["timebox", cell(dd["timebox"], 3)]])
    text += "\n\nThroughput ratio timebox/native: %.3f." % res["dd"]["ratio"]
    su = res["start_up"]
    text += "\n\n" + table(["start-up of /bin/true", "instructions", "CPU ms per process"],
                           [["native", fmt(su["native"]), cell(su["cpu_ms_native"], 3)],
                            ["timebox", fmt(su["timebox"]), cell(su["cpu_ms_timebox"], 3)]])
    text += "\n\nWhat every exec pays for loading the library, governed or not: " \
            "instructions by callgrind (the whole process), CPU time (user + system) per " \
            "process from %d spawns per run, interleaved." % cfg["spawns"]
    fk = res["fork"]
    text += "\n\n" + table(["fork (child exits at once)", "page faults per child",
                            "us per fork"],
                           [[v, cell(fk[v]["faults_per_child"], 1), cell(fk[v]["us_per_fork"], 1)]
                            for v in ("native", "timebox")])
    text += "\n\nA process that forks, with a limit set (so the fork handlers run) and no " \
            "socket: %d forks per run, one after the other, interleaved." % cfg["forks"]
    fc = res["first_connect"]
    text += "\n\n" + table(["connect to 127.0.0.1", "first of the process, us",
                            "later ones (median), us"],
                           [[v, cell(fc[v]["first_us"], 1), cell(fc[v]["later_us"], 1)]
                            for v in ("native", "timebox")])
    text += "\n\nA process's first connect, with every limit set: under timebox it starts " \
            "the watchdog and creates the statistics segment (the statistics thread is " \
            "started by the watchdog's thread). %d processes per variant, interleaved; " \
            "each makes 20 connects (socket + connect timed) to a listener of its own." % \
            cfg["spawns"]
    rep.section("Untracked fast path (files, pipes)", text)
    for mode in ("file", "pipe"):
        rep.target("fast path (%s): ≤ 30 extra instructions per call" % mode,
                   res[mode]["extra"] <= 30, "%+.2f" % res[mode]["extra"])
    rep.target("dd bs=64: ratio ≥ 0.98", res["dd"]["ratio"] >= 0.98, "%.3f" % res["dd"]["ratio"])
    rep.target("fork: ≤ %d page faults added to each child" % FORK_FAULTS_ADDED_MAX,
               fk["faults_added"] <= FORK_FAULTS_ADDED_MAX,
               "%+.1f (native %.1f, timebox %.1f; %.0f vs %.0f us per fork)" %
               (fk["faults_added"], fk["native"]["faults_per_child"]["median"],
                fk["timebox"]["faults_per_child"]["median"], fk["native"]["us_per_fork"]["median"],
                fk["timebox"]["us_per_fork"]["median"]))
    rep.target("start-up: ≤ %s instructions added to a process (/bin/true)" %
               fmt(START_UP_ADDED_MAX), su["added"] <= START_UP_ADDED_MAX,
               "%s%s (native %s, timebox %s)" % ("+" if su["added"] >= 0 else "",
                                                  fmt(su["added"]), fmt(su["native"]),
                                                  fmt(su["timebox"])))


def bench_precision(rep, cfg):
    """Workload 4: lateness of a 300 ms limit with T concurrent waiters."""
    res = {}
    rows = []
    variants = ["poll", "poll_deadline", "timebox", "first_byte", "rcvtimeo", "one_cutter"]
    for threads in cfg["precision_threads"]:
        runs = {v: [] for v in variants}
        for _, variant in interleaved(variants, cfg["reps_precision"]):
            env = lib.preload_env({"TIMEBOX_DEADLINE": "300ms"}) if variant == "timebox" \
                else lib.preload_env({"TIMEBOX_FIRST_BYTE_TIMEOUT": "300ms"}) \
                if variant == "first_byte" else lib.native_env()
            runs[variant].append(run_prog([exe("precision"), "--threads", str(threads),
                                           "--mode", variant], env, cpu=None))
        res[str(threads)] = {}
        for v in variants:
            rs = runs[v]
            s = {m: summary([r[m] / 1000 for r in rs]) for m in ("p50_us", "p99_us", "max_us")}
            s["min_ms"] = min(r["min_us"] for r in rs) / 1000
            s["early"] = sum(r["early"] for r in rs)
            res[str(threads)][v] = s
            label = {"poll": "poll(300)", "poll_deadline": "ppoll to 300 ms after the start",
                     "timebox": "timebox deadline 300ms",
                     "first_byte": "timebox first_byte 300ms",
                     "rcvtimeo": "SO_RCVTIMEO 300 ms",
                     "one_cutter": "one thread shuts each down at 300 ms after the start"}[v]
            rows.append([threads, label, cell(s["p50_us"], 2), cell(s["p99_us"], 2),
                         cell(s["max_us"], 2), "%.3f" % s["min_ms"], int(s["early"])])
    rep.results["precision"] = res
    text = table(["threads", "limit", "p50 late ms", "p99 late ms", "max late ms",
                  "min late ms", "early"], rows)
    text += "\n\nLateness = return time − 300 ms, all threads starting together. For the " \
            "deadline the clock starts before `connect` (where the deadline opens); for " \
            "first_byte, poll and SO_RCVTIMEO, after it. ppoll waits natively until 300 ms " \
            "after a clock started before `connect`, as the deadline's: every thread's limit " \
            "then falls at once (the connects spread the others' over a few ms). The last " \
            "row is natively a blocking recv ended by one other thread that sleeps until " \
            "each wait's instant in turn (the deadline's) and shuts its reading half: what " \
            "cutting every wait from one thread costs at best, with none of timebox's " \
            "work, the floor of a watchdog when many limits fall at once."
    rep.section("Deadline precision (300 ms, stalled downstream)", text)
    early = sum(res[t][v]["early"] for t in res for v in ("timebox", "first_byte"))
    rep.target("precision: timebox never early", early == 0,
               "%d early of all runs; earliest %+.3f ms" %
               (early, min(res[t][v]["min_ms"] for t in res for v in ("timebox", "first_byte"))))
    # At every concurrency, each of timebox's limits at most 1 ms behind the kernel's own
    # lateness for the same instants, measured in the same interleaved runs: first_byte's
    # clock starts after connect, as poll(300)'s; the deadline's before it, as the ppoll
    # variant's, so that every thread's limit falls at once (at 1,000 threads that bunching
    # is the kernel's floor too, and poll's spread limits do not show it).
    for t in cfg["precision_threads"]:
        r = res[str(t)]
        pairs = [("deadline", r["timebox"], "ppoll at once", r["poll_deadline"]),
                 ("first_byte", r["first_byte"], "poll", r["poll"])]
        ok = all(a["p99_us"]["median"] - b["p99_us"]["median"] <= 1.0
                 for _, a, _, b in pairs)
        rep.target("precision, %d threads: p99 within 1 ms of the kernel's for the same "
                   "limits" % t, ok,
                   "; ".join("%s %.2f ms vs %s %.2f ms" % (na, a["p99_us"]["median"], nb,
                                                         b["p99_us"]["median"])
                             for na, a, nb, b in pairs) +
                   "; deadline vs poll %.2f ms; one thread's cuts alone %.2f ms" %
                   (r["poll"]["p99_us"]["median"], r["one_cutter"]["p99_us"]["median"]) +
                   floor_note(r))


def floor_note(r):
    """Where the deadline misses: whether one thread cutting every wait natively, with none
    of timebox's work (the floor of any single watchdog), misses the same bound."""
    bound = r["poll_deadline"]["p99_us"]["median"] + 1.0
    if r["timebox"]["p99_us"]["median"] <= bound:
        return ""
    floor = r["one_cutter"]["p99_us"]["median"]
    return (" (a single cutter's floor misses it too: %.2f ms > %.2f)" % (floor, bound)
            if floor > bound else
            " (a single cutter's floor is within it: %.2f ms <= %.2f)" % (floor, bound))


def bench_scale(rep, cfg):
    """Workload 5: one connection's exchange cost while K-1 other governed sockets are open
    and filed with the watchdog, or while 1,000 threads block on sockets of their own."""
    res = {}
    rows = []
    n = cfg["scale_n"]
    cases = [("sockets", k) for k in cfg["scale_sockets"]] + \
        [("threads", t) for t in cfg["scale_threads"]]
    with EchoServer() as srv:
        for kind, k in cases:
            extra = ["--idle", k - 1] if kind == "sockets" else ["--blocked", k]
            runs = {"native": [], "timebox": []}
            for _, variant in interleaved(list(runs), cfg["reps"]):
                runs[variant].append(run_prog(exchange_cmd(srv.port, 1, n, extra),
                                              env_for(variant)))
            key = "%s=%d" % (kind, k)
            res[key] = {}
            for v, rs in runs.items():
                s = {m: summary([r[m] for r in rs])
                     for m in ("xps", "p50_us", "p99_us", "cpu_us", "idle_rss_kb")}
                s["us_per_exch"] = summary([1e6 / r["xps"] for r in rs])
                res[key][v] = s
                rows.append([("%d socket%s" % (k, "" if k == 1 else "s")) if kind == "sockets" else
                             "1 socket + %d blocked threads" % k, v,
                             cell(s["us_per_exch"], 2), cell(s["p50_us"]), cell(s["p99_us"]),
                             cell(s["cpu_us"])])
    # The p50 exchange time: the mean (µs/exchange) also carries the scheduler's tail.
    # Judged as timebox over native at each size, measured in the same interleaved runs:
    # what the kernel itself loses with 10,000 open sockets (seen: native 28.3 -> 32.1 µs)
    # is not timebox's.
    first = "sockets=%d" % cfg["scale_sockets"][0]
    base = res[first]["timebox"]["p50_us"]["median"]
    worst = max(res[k]["timebox"]["p50_us"]["median"] for k in res)

    def over_native(k):
        return res[k]["timebox"]["p50_us"]["median"] / res[k]["native"]["p50_us"]["median"]
    worst_rel = max(over_native(k) for k in res) / over_native(first)
    big = cfg["scale_sockets"][-1]
    rss = {v: res["sockets=%d" % big][v]["idle_rss_kb"]["median"] for v in ("native", "timebox")}
    per_sock = (rss["timebox"] - rss["native"]) * 1024 / max(big - 1, 1)
    res["flat_ratio"] = worst / base
    res["flat_ratio_vs_native"] = worst_rel
    res["bytes_per_socket"] = per_sock
    rep.results["scale"] = res
    text = table(["open governed sockets", "variant", "µs/exchange", "p50 µs", "p99 µs",
                  "CPU µs/exch"], rows)
    text += "\n\nWorst timebox p50 over its 1-socket p50: %.3f; worst timebox/native p50 " \
            "ratio over the 1-socket ratio: %.3f. " % (worst / base, worst_rel)
    text += "Memory: opening %d idle sockets grew RSS by %s KB natively and %s KB under " \
            "timebox: %.0f bytes per governed socket." % (big - 1, fmt(rss["native"]),
                                                          fmt(rss["timebox"]), per_sock)
    rep.section("Scale: open governed sockets and blocked threads", text)
    rep.target("scale: per-exchange cost within 10%% from 1 to %d sockets and %s threads" %
               (big, "/".join(str(t) for t in cfg["scale_threads"])),
               worst_rel <= 1.10,
               "worst p50 over native's %.3f × the 1-socket one (timebox alone: %.3f × its "
               "1-socket p50)" % (worst_rel, worst / base))
    rep.target("scale: ≤ 256 bytes per governed socket", per_sock <= 256,
               "%.0f bytes" % per_sock)


def bench_gate(rep, cfg):
    """Workload 6: 64 threads, one connection per request, 1 ms downstream; timebox's gate
    (cap 8) vs no cap vs HAProxy maxconn 8."""
    threads, n = cfg["gate"]
    res = {}
    rows = []
    with EchoServer(delay_us=1000) as srv, HAProxy(srv.port, GATE_CAP) as hap:
        runs = {"native": [], "timebox": [], "haproxy": []}
        for _, variant in interleaved(list(runs), cfg["reps"]):
            port = hap.port if variant == "haproxy" else srv.port
            env = env_for(variant, {"TIMEBOX_MAX_CONNS": GATE_CAP,
                                    "TIMEBOX_ACQUIRE_TIMEOUT": PHASE})
            srv.stats()
            r = run_prog(exchange_cmd(port, threads, n, ["--reconnect", "--warmup", 2]), env)
            r["max_inflight"] = srv.stats()["max_inflight"]
            runs[variant].append(r)
        for v, rs in runs.items():
            s = {m: summary([r[m] for r in rs])
                 for m in ("xps", "p50_us", "p99_us", "cpu_us", "errors", "max_inflight")}
            res[v] = s
            rows.append([{"native": "native, no cap", "timebox": "timebox, cap %d" % GATE_CAP,
                          "haproxy": "HAProxy maxconn %d" % GATE_CAP}[v],
                         cell(s["xps"]), cell(s["p50_us"]), cell(s["p99_us"]),
                         cell(s["cpu_us"]), int(s["max_inflight"]["max"]),
                         int(s["errors"]["max"])])
    rep.results["gate"] = res
    text = table(["variant", "requests/s", "p50 µs", "p99 µs", "client CPU µs/req",
                  "max in flight at server", "errors"], rows)
    text += "\n\n%d threads, each connecting, sending 64 B, reading the echo (sent 1 ms " \
            "late by the server) and closing." % threads
    rep.section("Gate under contention", text)
    held = res["timebox"]["max_inflight"]["max"]
    if held > GATE_CAP:
        rep.target("gate: cap %d holds" % GATE_CAP, False,
                   "gate: not available in this build (%d requests in flight at once)" % held)
    else:
        rep.target("gate: cap %d holds" % GATE_CAP, True,
                   "at most %d requests in flight" % held)


EPOLL_MODES = [("level", [], "EPOLLIN registered once (level-triggered)"),
               ("churn", ["--churn"], "EPOLL_CTL_MOD out/in twice per exchange (libuv-style)")]


def epoll_cmd(port, conns, n, extra=()):
    return [exe("epoll_client"), "--port", str(port), "--conns", str(conns), "--n", str(n)] + \
        [str(a) for a in extra]


def bench_epoll(rep, cfg):
    """Workload 7: an event loop: one thread, one epoll instance, 64 keep-alive connections
    with one exchange outstanding each; native vs timebox vs HAProxy, then system calls per
    exchange (native vs timebox) by the difference of a short and a long run."""
    conns, n = cfg["epoll"]
    res = {}
    rows = []
    with EchoServer() as srv, HAProxy(srv.port, 1000) as hap:
        for mode, extra, _ in EPOLL_MODES:
            runs = {"native": [], "native+thread": [], "timebox": [], "haproxy": []}
            for _, variant in interleaved(list(runs), cfg["reps_exchange"]):
                port = hap.port if variant == "haproxy" else srv.port
                cpu0 = hap.cpu_secs()
                r = run_prog(epoll_cmd(port, conns, n, extra), env_for(variant))
                r["sidecar_cpu_us"] = (hap.cpu_secs() - cpu0) * 1e6 / r["n"] \
                    if variant == "haproxy" else 0.0
                runs[variant].append(r)
            res[mode] = {}
            for variant, rs in runs.items():
                s = {m: summary([r[m] for r in rs])
                     for m in ("xps", "p50_us", "p99_us", "cpu_us", "sidecar_cpu_us", "waits")}
                res[mode][variant] = s
            nat = res[mode]["native"]["xps"]["median"]
            for variant in runs:
                s = res[mode][variant]
                rows.append([mode, variant, cell(s["xps"]), "%.3f" % (s["xps"]["median"] / nat),
                             cell(s["p50_us"]), cell(s["p99_us"]), cell(s["cpu_us"]),
                             fmt(s["sidecar_cpu_us"]["median"]) if variant == "haproxy"
                             else "–", "%.3f" % s["waits"]["median"]])
            ratio, lo, hi = paired_ratio(runs, "timebox", "native")
            res[mode]["ratio_native"] = ratio
            res[mode]["ratio_native_quartiles"] = [lo, hi]
            res[mode]["ratio_thread_floor"] = paired_ratio(runs, "native+thread", "native")[0]
            res[mode]["ratio_haproxy"] = paired_ratio(runs, "timebox", "haproxy")[0]

        # System calls: the client's only (HAProxy's client makes the native client's calls).
        use_perf = perf_works()
        short, long_ = cfg["epoll_sys_n"]
        res["syscall_tool"] = "perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_<name>..." \
            if use_perf else "strace -c -f"
        sys_rows = []
        for mode, extra, _ in EPOLL_MODES:
            per = {}
            for variant in ("native", "timebox"):
                env = env_for(variant)
                c = {}
                for k in (short, long_):
                    cmd = ["env", "LD_PRELOAD=" + env.get("LD_PRELOAD", "")] + \
                        epoll_cmd(srv.port, conns, k, list(extra) + ["--warmup", 20])
                    c[k] = count_syscalls(cmd, {kk: v for kk, v in env.items()
                                                if kk != "LD_PRELOAD"}, use_perf)
                diff = {name: (c[long_].get(name, 0) - c[short].get(name, 0)) /
                        ((long_ - short) * conns) for name in set(c[long_]) | set(c[short])}
                per[variant] = {name: v for name, v in diff.items() if abs(v) >= 0.0005}
            total = {v: sum(per[v].values()) for v in per}
            # epoll_wait's count follows timing (a slower loop finds more sockets ready per
            # wait), so the calls per exchange are compared without the waits as well.
            waits = ("epoll_wait", "epoll_pwait", "epoll_pwait2")
            busy = {v: sum(x for name, x in per[v].items() if name not in waits) for v in per}
            names = sorted(set(per["native"]) | set(per["timebox"]))
            for v in ("native", "timebox"):
                sys_rows.append([mode, v, "%.3f" % total[v], "%.3f" % busy[v],
                                 ", ".join("%s %.3f" % (name, per[v][name]) for name in names
                                           if name in per[v])])
            res[mode]["syscalls"] = {"detail": per, "total": total, "without_waits": busy,
                                     "extra": total["timebox"] - total["native"],
                                     "extra_without_waits": busy["timebox"] - busy["native"]}

        # Instructions: what the CPU time above shows through the machine's noise.
        cg_short, cg_long = cfg["epoll_cg_n"]
        cg_rows = []
        for mode, extra, _ in EPOLL_MODES:
            per = {}
            for variant in ("native", "timebox"):
                counts = [callgrind_instructions(
                    epoll_cmd(srv.port, conns, k, list(extra) + ["--warmup", 20]),
                    env_for(variant)) for k in (cg_short, cg_long)]
                per[variant] = (counts[1] - counts[0]) / ((cg_long - cg_short) * conns)
            res[mode]["instructions"] = dict(per, added=per["timebox"] - per["native"])
            cg_rows.append([mode, fmt(per["native"]), fmt(per["timebox"]),
                            "%+.0f" % (per["timebox"] - per["native"])])
    rep.results["epoll"] = res
    text = table(["registration", "variant", "exchanges/s", "× native", "p50 µs", "p99 µs",
                  "client CPU µs/exch", "sidecar CPU µs/exch", "epoll_wait calls/exch"], rows)
    text += "\n\nOne thread, one epoll instance, %d keep-alive connections to the echo " \
            "server, each with one 64 B request outstanding; %d measured exchanges per " \
            "connection. Registration: %s. timebox with every limit armed (read timeout and " \
            "deadline included); HAProxy in tcp mode as above; native+thread is the native " \
            "client with one more thread that never runs (tests/bench/lib/idle_thread.c): " \
            "a second thread makes the kernel take a reference on every file each system " \
            "call looks up and glibc toggle asynchronous cancellation around each call, so " \
            "it is the floor of any library that keeps a thread, as timebox's watchdog " \
            "is." % (conns, n, "; ".join("%s = %s" % (m, d) for m, _, d in EPOLL_MODES))
    for mode, _, _ in EPOLL_MODES:
        r = res[mode]
        text += " %s: timebox/native throughput %.3f (rounds' quartiles %.3f-%.3f), " \
            "timebox/HAProxy %.2f, native+thread/native %.3f." % (
                mode.capitalize(), r["ratio_native"], r["ratio_native_quartiles"][0],
                r["ratio_native_quartiles"][1], r["ratio_haproxy"], r["ratio_thread_floor"])
    text += " Each ratio is the median of the rounds' own ratios, as in the exchange workload."
    text += "\n\n" + table(["registration", "variant", "syscalls/exchange",
                             "without epoll_wait", "by name (per exchange)"], sys_rows)
    text += "\n\nCounted with %s on the client, runs of %d and %d exchanges per connection " \
            "(× %d connections); the difference divided by the exchanges between them." % (
                res["syscall_tool"], short, long_, conns)
    for mode, _, _ in EPOLL_MODES:
        d = res[mode]["syscalls"]["detail"]
        more = ["%s %+.3f" % (name, d["timebox"].get(name, 0) - d["native"].get(name, 0))
                for name in sorted(set(d["native"]) | set(d["timebox"]))
                if name not in ("epoll_wait", "epoll_pwait", "epoll_pwait2", "write", "sendto")
                and abs(d["timebox"].get(name, 0) - d["native"].get(name, 0)) >= 0.01]
        text += " %s: %s." % (mode.capitalize(), "timebox adds " + ", ".join(more) if more
                              else "no call added by timebox (its send() is the write)")
    text += "\n\n" + table(["registration", "instructions/exchange native", "timebox",
                             "added by timebox"], cg_rows)
    text += "\n\nUser-space instructions of the client (`valgrind --tool=callgrind`), runs " \
            "of %d and %d exchanges per connection; the difference divided by the exchanges " \
            "between them." % (cg_short, cg_long)
    rep.section("Event loop: epoll, %d connections" % conns, text)
    for mode, _, _ in EPOLL_MODES:
        r = res[mode]
        rep.target("epoll %s, %d conns: timebox ≥ 0.97 × native" % (mode, conns),
                   r["ratio_native"] >= 0.97,
                   "%.3f (rounds' quartiles %.3f-%.3f; one idle thread alone: %.3f)" % (
                       r["ratio_native"], r["ratio_native_quartiles"][0],
                       r["ratio_native_quartiles"][1], r["ratio_thread_floor"]))
        rep.target("epoll %s, %d conns: timebox ≥ 1.3 × HAProxy" % (mode, conns),
                   r["ratio_haproxy"] >= 1.3, "%.2f" % r["ratio_haproxy"])
        e = r["syscalls"]["extra_without_waits"]
        rep.target("epoll %s: 0 extra syscalls per exchange (epoll_wait aside)" % mode,
                   abs(e) < 0.01, "%+.4f per exchange (epoll_wait included: %+.4f)" %
                   (e, r["syscalls"]["extra"]))


FRAMING_KINDS = [
    ("raw", "64 B each way, echoed"),
    ("http", "HTTP/1.1 POST, 14 header lines + 64 B body; 200 OK, 14 header lines + 128 B "
             "body (Content-Length)"),
    ("tls", "TLS 1.2-looking records after a handshake: one 256 B application_data record "
            "out, two (1,024 + 512 B) back"),
    ("writev", "raw, the request written with writev(2) in two pieces (16 + 48 B), as a "
               "client that writes a header and a body does"),
    ("poll", "raw, from a non-blocking socket: write, poll(2) for POLLIN, read, as a client "
             "with timeouts of its own does (curl, libpq)"),
]

# Rows of FRAMING_KINDS that carry raw bytes (no framing above raw's to show).
RAW_KINDS = ("raw", "writev", "poll")


def framing_args(kind):
    """exchange's options for a row of FRAMING_KINDS (writev: raw bytes, gathered; poll: raw
    bytes from a non-blocking socket, each read after a poll)."""
    if kind in ("writev", "poll"):
        return ["--kind", "raw", "--" + kind]
    return ["--kind", kind]


def bench_framing(rep, cfg):
    """Workload 8: instructions per governed exchange (callgrind, the fast path's method:
    the difference of a short and a long run) for raw bytes, HTTP/1.1 and TLS records,
    native vs timebox; timebox - native is what governing an exchange costs, and its excess
    over raw's is what framing that protocol costs."""
    short, long_ = cfg["frame_n"]
    res = {}
    rows = []
    for kind, _ in FRAMING_KINDS:
        with EchoServer(answer=None if kind in RAW_KINDS else kind) as srv:
            per = {}
            for variant in ("native", "timebox"):
                counts = [callgrind_instructions(
                    exchange_cmd(srv.port, 1, k, framing_args(kind) + ["--warmup", 50]),
                    env_for(variant)) for k in (short, long_)]
                per[variant] = (counts[1] - counts[0]) / (long_ - short)
            res[kind] = dict(per, added=per["timebox"] - per["native"])
    for kind, desc in FRAMING_KINDS:
        r = res[kind]
        r["above_raw"] = r["added"] - res["raw"]["added"]
        rows.append([kind, desc, fmt(r["native"]), fmt(r["timebox"]), "%+.0f" % r["added"],
                     "–" if kind in RAW_KINDS else "%+.0f" % r["above_raw"]])
    rep.results["framing"] = res
    rep.target("governed exchange (raw): ≤ native + %d instructions" % EXCHANGE_ADDED_MAX,
               res["raw"]["added"] <= EXCHANGE_ADDED_MAX,
               "%+.0f (native %s, timebox %s)" % (res["raw"]["added"], fmt(res["raw"]["native"]),
                                                 fmt(res["raw"]["timebox"])))
    text = table(["payload", "exchange", "instructions/exchange native", "timebox",
                  "added by timebox", "framing above raw"], rows)
    text += "\n\nUser-space instructions of the whole client process (`valgrind " \
            "--tool=callgrind`: the blocking client, one connection, all its threads), from " \
            "runs of %d and %d exchanges; the difference divided by the %d exchanges between " \
            "them, so connection set-up and the TLS handshake cancel out. The server answers " \
            "with canned bytes (tests/bench/canned.h), so the framing sees a real protocol " \
            "in both directions. timebox with every limit armed and `protocol = auto`: it " \
            "detects each kind from the first bytes." % (short, long_, long_ - short)
    rep.section("Framing cost per governed exchange", text)


# The features a rule may turn on, each alone on top of LIMITS: what one raw exchange costs
# with it configured, against LIMITS alone (where every one of them is off and costs what
# its "is it on?" test costs, which the framing workload's raw row already counts).
FEATURES = [
    ("breaker", {"TIMEBOX_BREAKER": "on"}, "circuit breaker (5 in a row, or 50 % of 20 in 10 s)"),
    ("retry budget", {"TIMEBOX_RETRY_BUDGET": "20%"}, "retries within 20 % of first attempts"),
    ("gate", {"TIMEBOX_MAX_CONNS": 100}, "a fixed gate of 100 per destination"),
    ("adaptive gate", {"TIMEBOX_MAX_CONNS": "auto"}, "the gate sized by latency"),
    ("propagation", {"TIMEBOX_SCOPE": "request", "TIMEBOX_PROPAGATE": 1},
     "scope request, deadline propagation (a raw exchange carries no header)"),
    ("all of them", {"TIMEBOX_BREAKER": "on", "TIMEBOX_RETRY_BUDGET": "20%",
                     "TIMEBOX_MAX_CONNS": "auto", "TIMEBOX_SCOPE": "request",
                     "TIMEBOX_PROPAGATE": 1}, "every row above at once"),
]


def bench_features(rep, cfg):
    """Workload 9: what each feature costs one governed raw exchange when it is configured
    (callgrind, the framing workload's method), against every limit armed and nothing else."""
    short, long_ = cfg["frame_n"]
    res = {}

    def per_exchange(srv, env):
        counts = [callgrind_instructions(
            exchange_cmd(srv.port, 1, k, ["--kind", "raw", "--warmup", 50]), env)
            for k in (short, long_)]
        return (counts[1] - counts[0]) / (long_ - short)

    with EchoServer() as srv:
        native = per_exchange(srv, env_for("native"))
        base = per_exchange(srv, env_for("timebox"))
        rows = [["none (every limit armed)", "", fmt(base), "%+.0f" % (base - native), "–"]]
        for name, extra, desc in FEATURES:
            n = per_exchange(srv, env_for("timebox", extra))
            res[name] = {"instructions": n, "above_limits": n - base}
            rows.append([name, desc, fmt(n), "%+.0f" % (n - native), "%+.0f" % (n - base)])
    res["native"], res["limits"] = native, base
    rep.results["features"] = res
    text = table(["configured", "what", "instructions/exchange", "added to native %s" %
                  fmt(native), "above the limits alone"], rows)
    text += "\n\nThe raw exchange of the framing workload (64 B each way, echoed; runs of %d " \
            "and %d exchanges, the difference divided by the exchanges between them), with " \
            "each feature configured alone on top of every limit armed. A feature that is " \
            "not configured costs the test that finds it off, which the first row includes." \
            % (short, long_)
    rep.section("What each feature costs when configured", text)


def unknown_settings(run):
    """'' or the settings this build of timebox refused (event=config_error), for a target's
    detail: a column that needs the breaker's runtime measured nothing of it without them."""
    return "; ".join("%s: %s" % (r.get("name"), r.get("error")) for r in run.config_errors)


def bench_storm(rep, cfg):
    """Workload 9: the seed's storm: a downstream that stalls 3 s from t=1 s (a GC pause),
    50 threads calling it in a loop with a 250 ms read timeout; no timebox (the program's
    own SO_RCVTIMEO) vs timebox's read timeout vs the read timeout and the breaker."""
    cols = [(name, storm.storm_column(env, opts, secs=cfg["storm_secs"]))
            for name, env, opts in storm.STORM_COLUMNS]
    res = {}
    rows = []
    for name, c in cols:
        run = c["run"]
        res[name] = {k: c[k] for k in ("handshakes", "after_first", "time_wait",
                                       "recovered_ms", "openings")}
        res[name]["refused"] = run.total.get("refused", 0)
        res[name]["ok"] = run.total.get("ok", 0)
        rows.append([name, c["handshakes"], c["after_first"], c["time_wait"],
                     c["recovered_ms"], c["openings"], int(res[name]["refused"])])
    rep.results["storm"] = res
    text = table(["variant", "handshakes during the stall", "of which after the first "
                  "timeouts", "caller TIME_WAIT at the stall's end", "recovery after the "
                  "stall (ms)", "breaker openings", "connects refused"], rows)
    secs = max(len(c["run"].timeline) for _, c in cols)
    text += "\n\nCalls per second (ok / failed / refused at once):\n\n" + table(
        ["second"] + [n for n, _ in cols],
        [[i] + ["%d / %d / %d" % c["run"].timeline[i][1:] if i < len(c["run"].timeline)
                else "-" for _, c in cols] for i in range(secs)])
    text += "\n\n%d threads for %d s, each calling (connect, request, answer, close) with " \
            "%d ms between calls and retrying a failed call after %d ms; the downstream " \
            "answers at once except from t=%d s to t=%d s, when every request waits %d s. " \
            "Breaker: %s. One run of each variant." % (
                storm.THREADS, cfg["storm_secs"], storm.THINK_MS, storm.RETRY_PAUSE_MS,
                storm.STALL_FROM_MS // 1000, storm.STALL_TO_MS // 1000, storm.STALL_MS // 1000,
                ", ".join("%s=%s" % kv for kv in storm.BREAKER.items()))
    brk = dict(cols)["timeouts + breaker"]
    missing = unknown_settings(brk["run"])
    if missing:
        text += " **This build refused the breaker's settings (%s): its column ran with " \
                "timeouts only.**" % missing
    rep.section("The storm: a downstream's GC pause", text)
    allowed = storm.BREAKER_FAILURES + storm.BREAKER_PROBES * brk["openings"]
    rep.target("storm: with the breaker, the stall's handshakes after the first timeouts "
               "<= threshold + probes per opening",
               not missing and brk["openings"] > 0 and brk["after_first"] <= allowed,
               "not in this build: " + missing if missing else
               "%d handshakes, %d allowed (%d openings)" % (brk["after_first"], allowed,
                                                             brk["openings"]))
    rep.target("storm: with the breaker, calls succeed within breaker_open + 1 s of the "
               "stall's end",
               not missing and 0 <= brk["recovered_ms"] <= storm.BREAKER_OPEN_MS + 1000,
               "not in this build: " + missing if missing else
               "%d ms" % brk["recovered_ms"])


def bench_adaptive(rep, cfg):
    """Workload 10: the gate that sizes itself: 50 closed-loop callers against a downstream
    that serves 8 at a time and queues the rest, no gate vs max_conns 100 vs auto; then a
    healthy downstream (20 ms, any number at once), no gate vs auto."""
    secs, warm = cfg["adaptive"]
    queue = ["--workers", storm.ADAPTIVE_WORKERS, "--service-ms", storm.ADAPTIVE_SERVICE_MS]
    res = {"queue": {}, "healthy": {}}
    rows = []
    runs = {}
    for kind, server, cols in (("queue", queue, storm.ADAPTIVE_COLUMNS),
                               ("healthy", ["--delay-ms", 20], storm.ADAPTIVE_COLUMNS[::2])):
        for name, env in cols:
            c = storm.closed_loop(server, env, secs=secs, warmup_ms=warm)
            runs[(kind, name)] = c
            f = c["inflight"]
            res[kind][name] = {k: c[k] for k in ("rps", "p50_ms", "p99_ms", "xp50_ms",
                                                 "xp99_ms", "failed")}
            res[kind][name]["inflight_p50"] = f.get("p50", -1)
            rows.append(["8 at a time, 10 ms" if kind == "queue" else "healthy, 20 ms", name,
                         fmt(c["rps"]), fmt(c["p50_ms"]), fmt(c["p99_ms"]), fmt(c["xp50_ms"]),
                         fmt(c["xp99_ms"]), "%d / %d / %d" % (f.get("p10", -1), f.get("p50", -1),
                                                              f.get("p90", -1)), c["failed"]])
    rep.results["adaptive"] = res
    text = table(["downstream", "gate", "calls/s", "p50 ms", "p99 ms", "exchange p50 ms",
                  "exchange p99 ms", "in flight at the server p10 / p50 / p90", "failed"], rows)
    text += "\n\n%d closed-loop threads for %d s (figures after the first %.1f s): connect, " \
            "request, answer, close, at once again. The call's time includes the wait at the " \
            "gate; the exchange's runs from the request sent to the first answer byte (what " \
            "the downstream makes the caller wait, and what the controller measures)." % (
                storm.ADAPTIVE_THREADS, secs, warm / 1000.0)
    auto = runs[("queue", "max_conns auto")]
    missing = unknown_settings(auto["run"])
    if missing:
        text += " **This build refused max_conns = auto (%s): its rows ran with no gate.**" \
                % missing
    rep.section("The gate that sizes itself", text)
    f = auto["inflight"]
    low, high = storm.ADAPTIVE_BAND
    rep.target("adaptive: in flight settles near %d (p50 within %d..%d)" % (
               storm.ADAPTIVE_WORKERS, low, high),
               not missing and low <= f.get("p50", -1) <= high,
               "not in this build: " + missing if missing else "p50 %d" % f.get("p50", -1))
    others = min(runs[("queue", "no gate")]["xp99_ms"], runs[("queue", "max_conns 100")]["xp99_ms"])
    rep.target("adaptive: exchange p99 below no gate's and max_conns 100's",
               not missing and 0 < auto["xp99_ms"] < others,
               "not in this build: " + missing if missing else
               "%.1f ms vs %.1f ms" % (auto["xp99_ms"], others))
    free, hauto = runs[("healthy", "no gate")], runs[("healthy", "max_conns auto")]
    rep.target("adaptive: a healthy downstream keeps >= 90% of its throughput (or every "
               "caller in flight)",
               not missing and (hauto["rps"] >= 0.9 * free["rps"] or
                                hauto["inflight"].get("p50", 0) >= storm.ADAPTIVE_THREADS - 2),
               "not in this build: " + missing if missing else
               "%.0f vs %.0f calls/s" % (hauto["rps"], free["rps"]))


# ---------------------------------------------------------------------------------------
# Output


def machine():
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    hap = subprocess.run(["haproxy", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "loadavg_start": os.getloadavg()[0],
            "haproxy": (hap.split() + ["?"] * 3)[2], "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def svg_bars(x0, y0, w, h, title, unit, groups, series, log=False):
    """A grouped bar chart: groups = [(label, {series: value})], series = [(name, colour)]."""
    import math
    vals = [v for _, d in groups for v in d.values() if v is not None and v > 0]
    top = max(vals) * 1.15 if vals else 1
    bottom = min(vals) / 2 if log and vals else 0

    def ypos(v):
        if log:
            v = max(v, bottom)
            return y0 + h - h * (math.log10(v) - math.log10(bottom)) / \
                (math.log10(top) - math.log10(bottom))
        return y0 + h - h * v / top

    out = ['<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>' %
           (x0, y0 - 12, title),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (x0, y0 + h, x0 + w, y0 + h),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (x0, y0, x0, y0 + h)]
    ticks = [10 ** e for e in range(int(math.floor(math.log10(bottom))),
                                    int(math.ceil(math.log10(top))) + 1)] if log else \
        [top * i / 5 for i in range(6)]
    for t in ticks:
        if (log and (t < bottom or t > top)):
            continue
        y = ypos(t)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' %
                   (x0, y, x0 + w, y))
        out.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%s</text>' %
                   (x0 - 4, y + 3, fmt(t, (0 if t >= 1 else 1 if t >= 0.1 else 3) if log
                                       else None)))
    out.append('<text x="%d" y="%d" font-size="11" transform="rotate(-90 %d %d)">%s</text>' %
               (x0 - 44, y0 + h // 2 + 30, x0 - 44, y0 + h // 2 + 30, unit))
    gw = w / max(len(groups), 1)
    bw = gw * 0.8 / len(series)
    for i, (label, d) in enumerate(groups):
        gx = x0 + i * gw + gw * 0.1
        for j, (name, colour) in enumerate(series):
            v = d.get(name)
            if v is None:
                continue
            y = ypos(v)
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">'
                       '<title>%s %s: %s</title></rect>' %
                       (gx + j * bw, y, bw - 1, y0 + h - y, colour, label, name, fmt(v)))
        out.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>' %
                   (x0 + i * gw + gw / 2, y0 + h + 16, label))
    for j, (name, colour) in enumerate(series):
        lx = x0 + w + 12
        ly = y0 + 4 + j * 15
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (lx, ly, colour))
        out.append('<text x="%d" y="%d" font-size="11">%s</text>' % (lx + 14, ly + 9, name))
    return out


def write_svg(path, results):
    colours = {"native": "#4c72b0", "timebox": "#55a868", "haproxy": "#c44e52",
               "poll": "#4c72b0", "rcvtimeo": "#c44e52", "first_byte": "#8172b2"}
    parts = []
    ex = results.get("exchange")
    if ex:
        groups = []
        for conns in sorted(ex, key=int):
            for p in ("p50", "p99"):
                groups.append(("%s conn %s" % (conns, p),
                               {v: ex[conns][v]["%s_us" % p]["median"]
                                for v in ("native", "timebox", "haproxy")}))
        parts += svg_bars(70, 40, 600, 220, "Exchange latency (64 B, loopback; log scale)",
                          "µs", groups,
                          [(v, colours[v]) for v in ("native", "timebox", "haproxy")], log=True)
    pr = results.get("precision")
    if pr:
        groups = []
        for t in sorted(pr, key=int):
            for p in ("p50", "p99"):
                groups.append(("%s thr %s" % (t, p),
                               {v: pr[t][v]["%s_us" % p]["median"]
                                for v in ("poll", "timebox", "first_byte", "rcvtimeo")
                                if v in pr[t]}))
        parts += svg_bars(70, 340, 600, 220, "Lateness of a 300 ms limit (log scale)", "ms",
                          groups, [(v, colours[v]) for v in
                                   ("poll", "timebox", "first_byte", "rcvtimeo")], log=True)
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="780" height="600" '
           'font-family="sans-serif">', '<rect width="780" height="600" fill="white"/>']
    svg += parts + ["</svg>"]
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")


def write_markdown(path, rep, mach, svg_name, elapsed):
    lines = ["# timebox benchmarks", "",
             "Written by `make bench%s` (tests/bench/run.py); do not edit by hand." %
             (" QUICK=1" if rep.quick else ""), "",
             "Machine: %d CPUs, %s, Linux %s. HAProxy %s. timebox at commit %s. Run on %s, "
             "%.0f s; load average %.1f before, %.1f after (anything above ~0.5 means other "
             "work shared the CPUs and widened the ranges); %s." %
             (mach["nproc"], mach["cpu"], mach["kernel"], mach["haproxy"], mach["commit"],
              mach["date"], elapsed, mach["loadavg_start"], mach["loadavg_end"],
              "work other than this run's took %.0f %% of the CPUs' time during it (from "
              "/proc/stat, less the run's own processes, steal included; a MISS names its "
              "workload's share; a neighbour sharing the physical cores does not show, the "
              "ranges do)"
              % (mach["other_work"] * 100) if mach.get("other_work") is not None else
              "what other work took could not be measured (no /proc/stat)"), "",
             "Each cell is the median of the repetitions, min–max in parentheses. The "
             "variants of a comparison ran in one run, interleaved; a throughput ratio against "
             "native is the median of each round's own ratio, with the rounds' quartiles. "
             "Client, server and "
             "sidecar share the machine's CPUs. timebox runs with every limit armed "
             "(phases %s, deadline %s); HAProxy in tcp mode with `timeout connect/client/"
             "server/queue %s`." % (PHASE, DEADLINE, PHASE), "",
             "Reproduce with `make bench` (about %d minutes here; `make bench QUICK=1` checks "
             "the harness in seconds; `make bench BENCH_ARGS=--only=exchange,gate` runs "
             "some workloads into build/bench/)." % max(1, round(elapsed / 60)), "",
             "## Targets", "",
             table(["target", "result", "measured"],
                   [[label, "PASS" if ok else "**MISS**", detail]
                    for label, ok, detail in rep.targets]), "",
             "![latency percentiles](%s)" % svg_name, ""]
    for title, text in rep.sections:
        lines += ["## " + title, "", text, ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


# ---------------------------------------------------------------------------------------


def config(quick):
    if quick:
        return {"reps": 2, "reps_exchange": 2, "reps_precision": 1,
                "exchange": [(1, 2000), (32, 100)],
                "sys_n": (1000, 3000), "cg_n": (1000, 11000), "dd_count": 65536, "spawns": 20, "forks": 200,
                "precision_threads": [10, 100, 1000], "scale_sockets": [1, 100, 1000],
                "scale_threads": [100], "scale_n": 2000, "gate": (64, 10),
                "epoll": (64, 200), "epoll_sys_n": (50, 250), "frame_n": (200, 1200),
                "epoll_cg_n": (20, 70), "storm_secs": 6, "adaptive": (5, 3000)}
    return {"reps": 5, "reps_exchange": 15, "reps_precision": 5,
            "exchange": [(1, 10000), (32, 1200)],
            "sys_n": (10000, 60000), "cg_n": (50000, 1050000), "dd_count": 2097152, "spawns": 300, "forks": 2000,
            "precision_threads": [10, 100, 1000], "scale_sockets": [1, 100, 1000, 10000],
            "scale_threads": [1000], "scale_n": 20000, "gate": (64, 300),
            "epoll": (64, 1000), "epoll_sys_n": (200, 1200), "frame_n": (1000, 11000),
            "epoll_cg_n": (50, 350), "storm_secs": 8, "adaptive": (8, 3000)}


def main():
    ap = argparse.ArgumentParser(description="timebox benchmarks")
    ap.add_argument("--quick", action="store_true", help="seconds, not minutes")
    ap.add_argument("--out", help="directory for benchmarks.md, the plot and results.json")
    ap.add_argument("--only", help="comma-separated workloads (%s)" % ", ".join(WORKLOADS))
    args = ap.parse_args()

    # Only a full run of every workload may replace the published page.
    out = args.out or (os.path.join(lib.BUILD, "bench") if args.quick or args.only
                       else os.path.join(ROOT, "docs"))
    os.makedirs(out, exist_ok=True)
    only = args.only.split(",") if args.only else WORKLOADS
    for name in only:
        if name not in WORKLOADS:
            ap.error("unknown workload %r" % name)
    for prog in ("echo_server", "exchange", "precision", "reads", "epoll_client"):
        if not os.path.exists(exe(prog)):
            sys.exit("%s is not built (run make bench)" % exe(prog))

    cfg = config(args.quick)
    rep = Report(args.quick)
    mach = machine()
    say("timebox bench%s: %d CPUs, %s, Linux %s" % (" (quick)" if args.quick else "",
                                                     mach["nproc"], mach["cpu"],
                                                     mach["kernel"]))
    start = time.monotonic()
    whole = OtherWork()
    failed = []
    rep.results["other_work"] = {}
    for name in only:
        t0 = time.monotonic()
        other, first_target = OtherWork(), len(rep.targets)
        try:
            globals()["bench_" + name](rep, cfg)
        except Exception as e:  # one broken workload must not hide the others' numbers
            failed.append(name)
            rep.section(name, "FAILED: %s" % e)
            rep.target("%s produced numbers" % name, False, str(e).splitlines()[0])
        share = other.share()
        rep.workload_done(first_target, share)
        rep.results["other_work"][name] = share if share is not None else -1.0
        say("(%s: %.1f s%s)" % (name, time.monotonic() - t0,
                                "" if share is None else
                                ", other work %.0f %% of the CPUs" % (share * 100)))
    elapsed = time.monotonic() - start
    mach["loadavg_end"] = os.getloadavg()[0]
    mach["other_work"] = whole.share()

    svg_name = "bench-latency.svg"
    write_svg(os.path.join(out, svg_name), rep.results)
    write_markdown(os.path.join(out, "benchmarks.md"), rep, mach, svg_name, elapsed)
    # The numbers as data, for the harness's own test; kept out of docs/.
    data_dir = out if out != os.path.join(ROOT, "docs") else os.path.join(lib.BUILD, "bench")
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, "results.json"), "w") as f:
        json.dump({"machine": mach, "quick": args.quick, "results": rep.results,
                   "failed": failed,
                   "targets": [{"target": l, "pass": ok, "measured": d}
                               for l, ok, d in rep.targets]}, f, indent=1)
    missed = sum(1 for _, ok, _ in rep.targets if not ok)
    say("\n%d targets met, %d missed; %.0f s; written to %s" %
        (len(rep.targets) - missed, missed, elapsed, out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
