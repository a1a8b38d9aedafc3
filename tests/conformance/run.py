#!/usr/bin/env python3
"""Conformance tier: other projects' own test suites, natively and under timebox, compared
test by test. timebox's first principle is that a healthy program behaves as it does natively.

usage: run.py [--subset] [--build DIR] [--jobs N] [--reruns N] [--limit SECS]
              [--variants file,stderr,config] [--only NAME...] [--list]
              [--set VAR=VALUE]... [--json FILE]

Every suite unit (a CPython regrtest module, a GLib installed-test program) runs once
natively and once per variant, with every limit armed generously (no limit should fire):
  file    TIMEBOX_* limits in the environment, TIMEBOX_LOG at a file
  stderr  the same limits, TIMEBOX_LOG=stderr: a line that changes a test's outcome (a test
          that compares a child's stderr) is a difference, as a user would see it
  config  TIMEBOX_CONFIG: a file with the same limits whose rules frame every stream
          (IPv4 loopback forced to HTTP framing, IPv6 auto, every unix stream governed)
Every run has a network namespace of its own with only loopback (unshare -n; root only).
Each test's outcome (pass, fail, error, skip, missing) is compared with the native one. A
test that differs is rerun alone --reruns times natively and under the variant, alternately:
it is a difference only if no run of either side gives an outcome the other side gave;
otherwise it is counted "resolved on rerun" (the machine is noisy) and both sides' outcomes
are printed all the same. Exit 0 when no difference reproduces, 1 otherwise, 2 when the tier
cannot run (no network namespace: no traffic may leave 127.0.0.1).
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3.11"          # Debian's interpreter, whose suite is installed
PYTEST_DIR = "/usr/lib/python3.11/test"
GLIB_DIR = "/usr/libexec/installed-tests/glib"

# The suites. CPython's modules exercise sockets, TLS, event loops, select/poll/epoll,
# subprocesses and signals through one runtime; GLib's programs are C code with GSocket,
# GResolver, its own poll loop and GDBus over unix and TCP sockets.
CPYTHON_FULL = """test_socket test_ssl test_asyncio test_selectors test_select test_poll
test_epoll test_subprocess test_signal test_httplib test_httpservers test_urllib2_localnet
test_socketserver test_ftplib test_smtplib test_imaplib test_poplib test_xmlrpc test_wsgiref
test_logging test_timeout test_docxmlrpc test_asyncore test_asynchat test_telnetlib
test_urllib2net test_os test_posix test_fcntl test_pty test_threading test_io""".split()
GLIB_FULL = """socket socket-service socket-listener socket-address inet-address
network-address gsocketclient-slow proxy-test simple-proxy srvtarget resolver-parsing
gdbus-peer gdbus-server-auth gdbus-connection gdbus-auth unix-streams pollable io-stream
mainloop cancellable task timeout gsubprocess spawn-singlethread""".split()
CPYTHON_SUBSET = ["test_httplib", "test_selectors", "test_urllib2_localnet"]
GLIB_SUBSET = ["socket"]

LIMITS = {
    "TIMEBOX_CONNECT_TIMEOUT": "20s",
    "TIMEBOX_WRITE_TIMEOUT": "60s",
    "TIMEBOX_READ_TIMEOUT": "60s",
    "TIMEBOX_DEADLINE": "120s",
    "TIMEBOX_MAX_CONNS": "1000",
}

# Every stream framed: IPv4 loopback forced to HTTP (a TLS ClientHello or an SSH banner
# still says what its stream is; anything else gives up to raw, which is exercised too),
# IPv6 loopback detected, and every unix stream governed (only a unix: rule does that).
CONFIG = """# conformance: every limit generous, every stream framed
defaults = {
  connect_timeout = "20s"; write_timeout = "60s"; read_timeout = "60s";
  deadline = "120s"; max_conns = 1000; log = "%(log)s";
};
destinations = (
  { match = "127.0.0.0/8"; protocol = "http"; },
  { match = "::1"; protocol = "auto"; },
  { match = "unix:/*"; protocol = "auto"; },
  { match = "unix:@*"; protocol = "auto"; }
);
"""

VARIANTS = ("file", "stderr", "config")
LIVE = set()                # process groups of the runs under way
LIVE_LOCK = threading.Lock()
WORKDIR = []                # the run's scratch folder, removed on a kill too
OUTCOMES = ("pass", "fail", "error", "skip", "missing")
TB_LINE = re.compile(r"timebox: [^\n]*")
VERBOSE = re.compile(r"^\w+ \(([\w.]+)\) \.\.\. (ok|FAIL|ERROR|expected failure|"
                     r"unexpected success|skipped.*)$", re.M)
# Units whose runs must not overlap: a VSOCK port is the host's, not a network namespace's,
# and test_socket binds a fixed one (two at once: EADDRINUSE).
EXCLUSIVE = {"test_socket[vsock]"}
VSOCK = "*VSOCK*"
MAX_ALONE = 20      # more differing tests in one unit than this: rerun the unit whole


def log(msg):
    print(msg, flush=True)


# ---- the network namespace -------------------------------------------------------------

NS_WRAP = ["unshare", "-n", "--", "sh", "-c",
           'ip link set lo up || exit 125; exec env -i "$@"', "sh"]


def check_namespaces():
    """Exits unless each run can have a network namespace of its own with only loopback (up),
    so that a test that tries an outside host fails the same way natively and under timebox,
    and two runs never meet on a fixed port or an abstract unix name."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return "needs root, unshare(1) and ip(8)"
    r = subprocess.run(NS_WRAP + ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "ip", "-o", "link"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "unshare -n refused here: %s" % r.stderr.strip()
    others = [ln.split(":")[1].strip() for ln in r.stdout.splitlines()
              if ln.strip() and ln.split(":")[1].strip() != "lo"]
    if others:
        return "the namespace has interfaces other than lo: %s" % others
    return None


# ---- environments ----------------------------------------------------------------------

def sanitizer_runtime(sanitize):
    """The sanitizer runtime to put first in LD_PRELOAD (tests/regress/run.sh does the
    same), or None without a sanitized build."""
    if not sanitize:
        return None
    cc = os.environ.get("CC", "cc")
    name = {"address": "libasan.so", "undefined": "libubsan.so", "thread": "libtsan.so"}
    if sanitize not in name:
        sys.exit("conformance: TB_SANITIZE=%s: expected address, undefined or thread" % sanitize)
    return subprocess.run([cc, "-print-file-name=" + name[sanitize]], capture_output=True,
                          text=True, check=True).stdout.strip()


class Env:
    def __init__(self, build, sanitize, workdir, extra):
        self.lib = os.path.join(os.path.abspath(build), "lib", "libtimebox.so")
        if not os.path.exists(self.lib):
            sys.exit("conformance: %s is not built (run make)" % self.lib)
        self.runtime = sanitizer_runtime(sanitize)
        self.sanitize = sanitize
        self.workdir = workdir
        self.extra = extra
        self.seq = 0
        self.lock = threading.Lock()

    def base(self):
        """The environment every run starts from: no TIMEBOX_*, no inherited preload, no
        PYTHON* variable of the caller's interpreter (pyenv), the sanitizer's options."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TIMEBOX_", "PYTHON", "TB_", "TBR_"))
               and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        if self.sanitize == "address":
            env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        elif self.sanitize == "undefined":
            env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        elif self.sanitize == "thread":
            env["TSAN_OPTIONS"] = "die_after_fork=0"
        return env

    def make(self, mode):
        """(environment, log file or None) for one run. Natively a sanitized build still
        preloads the sanitizer's runtime alone, so that only timebox differs."""
        env = self.base()
        with self.lock:
            self.seq += 1
            n = self.seq
        logfile = None
        if mode == "native":
            if self.runtime:
                env["LD_PRELOAD"] = self.runtime
            return env, None
        env["LD_PRELOAD"] = " ".join(p for p in (self.runtime, self.lib) if p)
        if mode in ("file", "config"):
            logfile = os.path.join(self.workdir, "timebox-%d.log" % n)
        if mode == "config":
            conf = os.path.join(self.workdir, "framed-%d.conf" % n)
            with open(conf, "w") as f:
                f.write(CONFIG % {"log": logfile})
            env["TIMEBOX_CONFIG"] = conf
        else:
            env.update(LIMITS)
            env["TIMEBOX_LOG"] = logfile if mode == "file" else "stderr"
        env.update(self.extra)
        return env, logfile


# ---- suites ----------------------------------------------------------------------------

def run_limited(cmd, env, cwd, limit):
    """Runs cmd with exactly env, in a network namespace of its own (NS_WRAP) and its own
    process group, killed whole at limit seconds. Returns (returncode or None if killed,
    combined output)."""
    cmd = NS_WRAP + ["%s=%s" % kv for kv in sorted(env.items())] + cmd
    p = subprocess.Popen(cmd, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, cwd=cwd,
                         stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    with LIVE_LOCK:
        LIVE.add(p.pid)
    try:
        out, _ = p.communicate(timeout=limit)
        return p.returncode, out.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        return None, out.decode("utf-8", "replace")
    finally:
        with LIVE_LOCK:
            LIVE.discard(p.pid)


def kill_live(signum, frame):
    """On SIGTERM or SIGINT (make's time limit, ^C): the runs are in sessions of their
    own, so their process groups are killed here, not left running."""
    with LIVE_LOCK:
        for pid in LIVE:
            try:
                os.killpg(pid, 9)
            except OSError:
                pass
    if WORKDIR:
        shutil.rmtree(WORKDIR[0], ignore_errors=True)
    os._exit(128 + signum)


class CPython:
    kind = "cpython"

    def __init__(self, module, label=None, match=None, ignore=None, limit=None):
        """One regrtest module, or the part of it that match (or all but ignore) selects,
        named label, with a time limit of its own (seconds) if limit."""
        self.module = module
        self.name = label or module
        self.match, self.ignore, self.limit = match, ignore, limit

    def available(self):
        return os.path.exists(os.path.join(PYTEST_DIR, self.module + ".py")) or \
            os.path.isdir(os.path.join(PYTEST_DIR, self.module))

    def run(self, env, cwd, limit, test=None):
        """{test id: outcome} of one run of the module (or of one of its tests), plus the
        pseudo-test named after the unit that says how the whole run ended. The outcomes
        come from regrtest's junit XML; when a run killed at its limit wrote none, from the
        verbose lines ("name (id) ... ok") of the tests that ended."""
        limit = self.limit or limit
        xml = os.path.join(cwd, "junit.xml")
        if os.path.exists(xml):
            os.unlink(xml)
        cmd = [PYTHON, "-m", "test", "-v", "-u", "network", "--timeout",
               str(max(limit - 30, 30)), "--junit-xml", xml, self.module]
        if test:
            cmd += ["-m", test]
        elif self.match:
            cmd += ["-m", self.match]
        if self.ignore:
            cmd += ["-i", self.ignore]
        rc, out = run_limited(cmd, env, cwd, limit)
        res = {}
        try:
            for case in ET.parse(xml).getroot().iter("testcase"):
                tags = {c.tag for c in case}
                if "error" in tags:
                    o = "error"
                elif "failure" in tags:
                    o = "fail"
                elif "skipped" in tags:
                    o = "skip"
                else:
                    o = "pass"
                res[case.get("name")] = o
        except (OSError, ET.ParseError):
            for m in VERBOSE.finditer(out):
                word = m.group(2)
                res[m.group(1)] = ("pass" if word in ("ok", "expected failure") else
                                   "skip" if word.startswith("skipped") else
                                   "fail" if word in ("FAIL", "unexpected success")
                                   else "error")
        if test is None or not res:
            res[self.name] = whole_outcome(rc, out)
        return res, out

    def single(self, test_id):
        return test_id if test_id != self.name else None


class GLib:
    kind = "glib"

    def __init__(self, prog):
        self.name = "glib/" + prog
        self.prog = os.path.join(GLIB_DIR, prog)
        self.limit = None

    def available(self):
        return os.access(self.prog, os.X_OK)

    def run(self, env, cwd, limit, test=None):
        """{test id: outcome} from the program's TAP output ("ok N /path # SKIP"), plus the
        pseudo-test "glib/<prog>" for how the program ended (a crash after some tests)."""
        limit = self.limit or limit
        cmd = [self.prog, "--tap"] + (["-p", test.split(":", 1)[1]] if test else [])
        env = dict(env, G_TEST_SRCDIR=GLIB_DIR, G_TEST_BUILDDIR=GLIB_DIR)
        rc, out = run_limited(cmd, env, cwd, limit)
        res = {}
        for line in out.splitlines():
            m = re.match(r"^(not ok|ok) \d+ (/\S*)(.*)$", line)
            if not m:
                continue
            skip = re.search(r"#\s*SKIP", m.group(3), re.I)
            o = "skip" if skip else ("pass" if m.group(1) == "ok" else "fail")
            res["%s:%s" % (self.name, m.group(2))] = o
        if test is None or not res:
            res[self.name] = whole_outcome(rc, out)
        return res, out

    def single(self, test_id):
        return test_id if test_id != self.name else None


def whole_outcome(rc, out):
    """How a whole run ended: pass (exit 0), fail (a test failed), error (killed by a
    signal, a crash), or timeout (killed at the module's limit)."""
    if rc is None:
        return "timeout"
    if rc == 0:
        return "pass"
    if rc < 0 or rc >= 128:
        return "error(signal %d)" % (-rc if rc < 0 else rc - 128)
    return "fail"


# ---- the comparison --------------------------------------------------------------------

class Run:
    """One run of a unit in one mode: outcomes, output, timebox's lines."""

    def __init__(self, unit, mode, env_maker, limit, test=None):
        env, logfile = env_maker.make(mode)
        cwd = tempfile.mkdtemp(prefix=mode[0], dir=env_maker.workdir)
        # The suites' scratch files (regrtest's test_python_PID) go there too, so that a run
        # killed at its limit leaves nothing behind. Short names: unix socket paths made
        # there must stay within sun_path's 108 bytes.
        env["TMPDIR"] = cwd
        t0 = time.monotonic()
        self.res, self.out = unit.run(env, cwd, limit, test)
        self.secs = time.monotonic() - t0
        self.mode = mode
        self.tblines = []
        if logfile and os.path.exists(logfile):
            with open(logfile, errors="replace") as f:
                self.tblines = [ln.rstrip("\n") for ln in f if ln.strip()]
        elif mode == "stderr":
            self.tblines = TB_LINE.findall(self.out)
        shutil.rmtree(cwd, ignore_errors=True)


def outcome(res, test):
    return res.get(test, "missing")


def rerun(unit, tests, mode, env_maker, reruns, limit):
    """Both sides' outcomes of each test of tests, rerun reruns times each side,
    alternately: {test: (native outcomes, variant outcomes)}, and the last output of each
    side ({(test, or None for the whole unit, side): output}). One test is rerun alone;
    many (a crash or a time limit that left most of a unit unrun) by rerunning the whole
    unit, since thousands of single runs would not end."""
    outcomes = {t: ([], []) for t in tests}
    outs = {}
    alone = len(tests) <= MAX_ALONE
    for t in (tests if alone else [None]):
        single = unit.single(t) if t else None
        for _ in range(reruns):
            for i, side in enumerate(("native", mode)):
                r = Run(unit, side, env_maker, limit, single)
                outs[(t, side)] = r.out
                for tt in ([t] if t else tests):
                    outcomes[tt][i].append(outcome(r.res, tt))
    return outcomes, outs


class Scheduler:
    """Hands (unit, mode) jobs to workers in order, skipping a job of an EXCLUSIVE unit
    that already has a run under way; results() yields (unit, mode, Run) as runs end."""

    def __init__(self, jobs):
        self.todo = list(jobs)
        self.busy = set()
        self.done = []
        self.left = len(jobs)
        self.cond = threading.Condition()

    def work(self, env_maker, limit):
        while True:
            with self.cond:
                while True:
                    if not self.todo:
                        return
                    job = next((j for j in self.todo if j[0].name not in self.busy
                                or j[0].name not in EXCLUSIVE), None)
                    if job:
                        break
                    self.cond.wait()
                self.todo.remove(job)
                self.busy.add(job[0].name)
            try:
                r = Run(job[0], job[1], env_maker, limit)
            except Exception as e:          # a harness error must not hang the run
                r = None
                err = e
            with self.cond:
                self.busy.discard(job[0].name)
                self.done.append((job[0], job[1], r if r else err))
                self.cond.notify_all()

    def results(self):
        while self.left:
            with self.cond:
                while not self.done:
                    self.cond.wait()
                item = self.done.pop(0)
                self.left -= 1
            if isinstance(item[2], Exception):
                raise item[2]
            yield item


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--subset", action="store_true", help="the short subset of make test")
    ap.add_argument("--build", default=os.environ.get("TB_BUILD", "build"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--limit", type=int, default=0, help="seconds per module and mode")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--only", nargs="*", default=[], help="units whose name contains one")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--json", help="write every outcome there")
    ap.add_argument("--set", action="append", default=[], metavar="VAR=VALUE",
                    help="add VAR=VALUE to every run under timebox (--set "
                    "TIMEBOX_READ_TIMEOUT=1ms shows the tier catching differences)")
    args = ap.parse_args()

    py = CPYTHON_SUBSET if args.subset else CPYTHON_FULL
    gl = GLIB_SUBSET if args.subset else GLIB_FULL
    units = []
    for m in py:
        if m == "test_socket":
            # The VSOCK tests bind a fixed port of the host and, where no VSOCK transport
            # answers, wait in accept() for ever natively: a unit of their own with a short
            # limit, so that the rest of test_socket still reports test by test.
            units.append(CPython(m, ignore=VSOCK))
            units.append(CPython(m, label="test_socket[vsock]", match=VSOCK, limit=60))
        else:
            units.append(CPython(m))
    units += [GLib(p) for p in gl]
    if args.only:
        units = [u for u in units if any(o in u.name for o in args.only)]
    if args.list:
        for u in units:
            print(u.name)
        return 0
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            sys.exit("conformance: unknown variant %s (expected %s)" % (v, ",".join(VARIANTS)))
    # A sanitized library slows the programs under it (TSan: test_httplib 5 s -> 90 s).
    limit = args.limit or (150 if args.subset else 900) * (
        2 if os.environ.get("TB_SANITIZE") else 1)

    missing = [u.name for u in units if not u.available()]
    if missing:
        log("conformance: not installed: %s (tests/deps.sh conformance installs "
            "libpython3.11-testsuite and libglib2.0-tests)" % " ".join(missing))
        return 2
    if not os.access(PYTHON, os.X_OK):
        log("conformance: %s is missing (Debian's python3.11)" % PYTHON)
        return 2

    signal.signal(signal.SIGTERM, kill_live)
    signal.signal(signal.SIGINT, kill_live)
    why = check_namespaces()
    if why:
        log("%s conformance: %s for a loopback-only network namespace per run (no traffic "
            "may leave 127.0.0.1)" % ("SKIP" if args.subset else "FAIL", why))
        return 0 if args.subset else 2
    workdir = tempfile.mkdtemp(prefix="tbc-")
    WORKDIR.append(workdir)
    env_maker = Env(args.build, os.environ.get("TB_SANITIZE", ""), workdir,
                    dict(kv.split("=", 1) for kv in args.set))
    log("conformance: %d units x (native + %s), %d jobs, limit %d s per run, a "
        "loopback-only network namespace per run, %s%s" % (
            len(units), "+".join(variants), args.jobs, limit, PYTHON,
            ", SANITIZE=" + env_maker.sanitize if env_maker.sanitize else ""))

    # First pass: every (unit, mode), in parallel (each run has its own namespace).
    jobs = [(u, m) for m in ["native"] + variants for u in units]
    runs = {}
    t_start = time.monotonic()
    sched = Scheduler(jobs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for _ in range(max(1, args.jobs)):
            ex.submit(sched.work, env_maker, limit)
        for u, m, r in sched.results():
            runs[(u.name, m)] = r
            counts = {}
            for o in r.res.values():
                counts[o] = counts.get(o, 0) + 1
            log("  ran %-28s %-7s %6.1f s  %s" % (u.name, m, r.secs, " ".join(
                "%s=%d" % kv for kv in sorted(counts.items()))))

    compared = identical = 0
    diffs = []        # (unit, mode, test, native outcome, variant outcome)
    for u in units:
        nat = runs[(u.name, "native")]
        for v in variants:
            r = runs[(u.name, v)]
            for t in sorted(set(nat.res) | set(r.res)):
                compared += 1
                a, b = outcome(nat.res, t), outcome(r.res, t)
                if a == b:
                    identical += 1
                else:
                    diffs.append((u, v, t, a, b))

    # Differences are rerun alone, sequentially (a quieter machine than the first pass).
    resolved, reproduced = [], []
    if diffs:
        log("\nconformance: %d outcome(s) differ on the first pass; rerunning each alone %d "
            "times natively and under timebox" % (len(diffs), args.reruns))
    groups = {}
    for u, v, t, a, b in diffs:
        groups.setdefault((u.name, v), (u, v, []))[2].append((t, a, b))
    for u, v, items in groups.values():
        # A unit that passes on one side and fails on the other because of the tests that
        # differ: its own outcome follows theirs, without rerunning the whole unit.
        whole = [it for it in items if it[0] == u.name and {it[1], it[2]} == {"pass", "fail"}]
        if whole and len(items) > 1:
            items.remove(whole[0])
        else:
            whole = []
        outcomes, outs = rerun(u, [t for t, _, _ in items], v, env_maker, args.reruns, limit)
        shown = False
        first_reproduced = len(reproduced)
        for t, a, b in items:
            native, under = outcomes[t]
            line = "%s [%s]: first pass native=%s timebox=%s; reruns native=%s timebox=%s" % (
                t, v, a, b, ",".join(native), ",".join(under))
            if set([a] + native) & set([b] + under):
                resolved.append(line)
                log("  resolved on rerun: " + line)
                continue
            reproduced.append(line)
            log("  DIFFERENCE: " + line)
            if shown:
                continue
            shown = len(items) > MAX_ALONE
            for side in ("native", v):
                log("    --- %s output of the last rerun (last 25 lines) ---" % side)
                key = (None if len(items) > MAX_ALONE else t, side)
                for ln in outs.get(key, "").splitlines()[-25:]:
                    log("    | " + ln)
        for t, a, b in whole:
            line = "%s [%s]: first pass native=%s timebox=%s; as its tests above" % (t, v, a, b)
            if len(reproduced) > first_reproduced:
                reproduced.append(line)
                log("  DIFFERENCE: " + line)
            else:
                resolved.append(line)
                log("  resolved on rerun: " + line)

    # timebox's own lines: with generous limits none should be a timeout or a rejection.
    log("\ntimebox lines per variant (a healthy run should log nothing):")
    for v in variants:
        lines = [ln for u in units for ln in runs[(u.name, v)].tblines]
        events = {}
        for ln in lines:
            m = re.search(r"event=(\S+)", ln)
            key = m.group(1) if m else "other"
            if m and key == "notice":
                w = re.search(r"what=(\S+)", ln)
                key += ":" + (w.group(1) if w else "?")
            events[key] = events.get(key, 0) + 1
        log("  %-7s %d line(s) %s" % (v, len(lines), " ".join(
            "%s=%d" % kv for kv in sorted(events.items()))))
        for u in units:
            for ln in sorted(set(runs[(u.name, v)].tblines))[:5]:
                log("    %s: %s" % (u.name, ln[:220]))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"%s|%s" % k: r.res for k, r in runs.items()}, f, indent=1,
                      sort_keys=True)
    shutil.rmtree(workdir, ignore_errors=True)
    log("\nconformance: %d units, %d test outcomes compared (%d variants), %d identical, "
        "%d differed on the first pass: %d resolved on rerun (flaky), %d reproducible "
        "difference(s); %.0f s" % (len(units), compared, len(variants), identical,
                                  len(diffs), len(resolved), len(reproduced),
                                  time.monotonic() - t_start))
    for line in reproduced:
        log("  DIFFERENCE: " + line)
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
