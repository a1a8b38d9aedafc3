"""Shared helpers of the end-to-end tests: build paths, the preload environment, the fault
server fixture, a timed process runner, the blockcli wrapper, timebox's log lines and the
timing slack (python3 stdlib only)."""

import http.client
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("TB_BUILD", "build")
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)

LIB = os.path.join(BUILD, "lib", "libtimebox.so")
LAUNCHER = os.path.join(BUILD, "bin", "timebox")
FAULTSERVER = os.path.join(BUILD, "tests", "e2e", "faultserver")
CLIENTS = os.path.join(BUILD, "tests", "e2e", "clients")
BLOCKCLI = os.path.join(CLIENTS, "blockcli")
BLOCKCLI_FORTIFY = os.path.join(CLIENTS, "blockcli_fortify")

SANITIZE = os.environ.get("TB_SANITIZE", "")
_SAN_RUNTIME = {"address": "libasan.so", "undefined": "libubsan.so", "thread": "libtsan.so"}


class Skip(Exception):
    """Raised by skip(); the runner reports the test as SKIP with the reason."""


def skip(reason):
    """Skips the running test. A reason is mandatory: a skip must say why."""
    if not reason or not str(reason).strip():
        raise ValueError("skip() needs a reason")
    raise Skip(str(reason))


def timeout(seconds):
    """Decorator: the runner's time limit for this test, in seconds (default 60)."""
    def mark(func):
        func.tb_timeout = seconds
        return func
    return mark


def client(name):
    """Path of a test client built from tests/e2e/clients/<name>.c."""
    return os.path.join(CLIENTS, name)


def _sanitizer_runtime():
    lib = _SAN_RUNTIME.get(SANITIZE)
    if lib is None:
        raise RuntimeError("TB_SANITIZE=%r: expected address, undefined or thread" % SANITIZE)
    cc = os.environ.get("CC", "gcc")
    path = subprocess.run([cc, "-print-file-name=" + lib], capture_output=True, text=True,
                          check=True).stdout.strip()
    if not os.path.isabs(path):  # the compiler echoes the bare name when it has no such file
        raise RuntimeError("%s has no %s for TB_SANITIZE=%s" % (cc, lib, SANITIZE))
    return path


def sanitizer_preload():
    """[the sanitizer runtime] under a sanitized build (it must come first in LD_PRELOAD of
    an uninstrumented program that loads the sanitized library), [] otherwise."""
    return [_sanitizer_runtime()] if SANITIZE else []


def sanitizer_options(env):
    """Sets, in env, the options a sanitized build's runs need (nothing without one)."""
    if SANITIZE == "address":
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    elif SANITIZE == "undefined":
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    elif SANITIZE == "thread":
        # A child forked from a process with threads starts a watchdog of its own; TSan
        # cannot check the child of a multi-threaded fork and by default dies there.
        env.setdefault("TSAN_OPTIONS", "die_after_fork=0")
    return env


def preload_env(extra=None):
    """A copy of os.environ with LD_PRELOAD set to the timebox library, plus extra.

    A sanitized library in an uninstrumented program needs the sanitizer's runtime first in
    LD_PRELOAD; TB_SANITIZE (set by `make SANITIZE=...`) says which one."""
    if not os.path.exists(LIB):
        raise FileNotFoundError("%s is not built (run make)" % LIB)
    env = sanitizer_options(dict(os.environ))
    env["LD_PRELOAD"] = " ".join(sanitizer_preload() + [LIB])
    if extra:
        env.update({k: str(v) for k, v in extra.items()})
    return env


_runs_with_sanitizer = {}


def require_runs_with_sanitizer(argv):
    """Skips the test when, under a sanitized build, the program argv cannot run with just
    the sanitizer's runtime preloaded, timebox or not (curl and wget hang at exit with
    ASan's or TSan's runtime in them): such a run says nothing about timebox. The probe is
    a real run, so the skip is proven each time, never assumed."""
    if not SANITIZE:
        return
    key = tuple(argv)
    if key not in _runs_with_sanitizer:
        env = sanitizer_options(native_env())
        env["LD_PRELOAD"] = " ".join(sanitizer_preload())
        r = run(list(argv), env=env, timeout=5)
        _runs_with_sanitizer[key] = not r.timed_out and r.returncode == 0
    if not _runs_with_sanitizer[key]:
        skip("%s does not run with the %s sanitizer's runtime preloaded, even without "
             "timebox" % (argv[0], SANITIZE))


def native_env(extra=None, clean=False):
    """A copy of os.environ without LD_PRELOAD (the "without timebox" baseline), plus extra.
    clean=True also drops the TIMEBOX_* variables inherited from the environment (extra's
    still apply)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if clean:
        env = {k: v for k, v in env.items() if not k.startswith("TIMEBOX_")}
    if extra:
        env.update({k: str(v) for k, v in extra.items()})
    return env


def scrub_timebox_env():
    """Removes every TIMEBOX_* variable from os.environ. A test module calls it at import:
    its tests then see only the settings they set themselves."""
    for name in [n for n in os.environ if n.startswith("TIMEBOX_")]:
        del os.environ[name]


def free_port():
    """A 127.0.0.1 port that was free a moment ago: nothing listens there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- timing: never early, generous slack ----------------------------------------------------

# Room after a limit for a whole program run (start-up and exit of python3, perl, curl on a
# busy 2-core machine), when the time is measured around the process.
SLACK_MS = 700


def slack(limit_ms):
    """The latest an expiry of limit_ms may be seen: generous on a noisy 2-core machine."""
    return max(limit_ms + 500, limit_ms * 1.5 + 300)


class Result:
    """What run() observed: returncode (None if killed at the time limit), stdout, stderr
    (text), elapsed_ms (monotonic), timed_out."""

    def __init__(self, returncode, stdout, stderr, elapsed_ms, timed_out):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed_ms = elapsed_ms
        self.timed_out = timed_out

    def __repr__(self):
        return ("Result(returncode=%r, elapsed_ms=%.1f, timed_out=%r)\n--- stdout\n%s"
                "--- stderr\n%s" % (self.returncode, self.elapsed_ms, self.timed_out,
                                    self.stdout, self.stderr))


def run(cmd, env=None, timeout=30, input=None):
    """Runs cmd (a list) to completion and returns a Result. At the time limit the process
    is killed and Result.timed_out is True, so a hang fails an assertion, not the suite."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, text=True, stdin=subprocess.PIPE if input else
                            subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    elapsed = (time.monotonic() - start) * 1000.0
    return Result(None if timed_out else proc.returncode, out, err, elapsed, timed_out)


TB_PREFIX = "timebox: "


def tb_lines(stderr):
    """timebox's own lines of stderr, as text ("timebox: " prefix kept)."""
    return [line for line in stderr.splitlines() if line.startswith(TB_PREFIX)]


def tb_records(stderr, **fields):
    """timebox's lines of stderr, each as a dict (quoted logfmt values unquoted), keeping
    those that carry every field given (compared as text)."""
    records = [dict(f.partition("=")[::2] for f in shlex.split(line[len(TB_PREFIX):]))
               for line in tb_lines(stderr)]
    return [r for r in records if all(r.get(k) == str(v) for k, v in fields.items())]


def parse_logfmt(line):
    """'a=1 b=x' -> {'a': '1', 'b': 'x'} (values stay strings; no quoting is supported)."""
    record = {}
    for field in line.split():
        key, sep, value = field.partition("=")
        record[key] = value if sep else True
    return record


_NUMERIC = {"thread": int, "call": int, "attempt": int, "status": int, "bytes": int,
            "rx": int, "ms": float, "total_ms": float}


def _typed(record):
    return {k: _NUMERIC[k](v) if k in _NUMERIC else v for k, v in record.items()}


class BlockResult:
    """blockcli's output: records (one dict per attempt line, numbers converted), total_ms,
    ok (exit status 0) and run (the Result)."""

    def __init__(self, result):
        self.run = result
        self.records = []
        self.total_ms = None
        for line in result.stdout.splitlines():
            rec = _typed(parse_logfmt(line))
            if "total_ms" in rec:
                self.total_ms = rec["total_ms"]
            elif "call" in rec:
                self.records.append(rec)
        self.ok = result.returncode == 0

    def calls(self, thread=None):
        """The last attempt of each call (of one thread), in call order."""
        last = {}
        for rec in self.records:
            if thread is None or rec.get("thread") == thread:
                last[(rec.get("thread", 0), rec["call"])] = rec
        return [last[k] for k in sorted(last)]

    def __repr__(self):
        return "BlockResult(ok=%r, records=%r)\n%r" % (self.ok, self.records, self.run)


def blockcli(args, preload=True, env_extra=None, timeout=30, fortify=False, wrapper=None):
    """Runs blockcli with args (a list; --host defaults to 127.0.0.1) under the library
    (preload=True) or natively, optionally behind a wrapper command such as
    ["timeout", "1"], and returns a BlockResult."""
    exe = BLOCKCLI_FORTIFY if fortify else BLOCKCLI
    env = preload_env(env_extra) if preload else native_env(env_extra)
    cmd = list(wrapper or []) + [exe] + [str(a) for a in args]
    return BlockResult(run(cmd, env=env, timeout=timeout))


def wait_for(predicate, timeout=5.0, interval=0.01, what="condition"):
    """Polls predicate() until it is true; raises AssertionError after timeout seconds.
    For readiness checks only: never a substitute for synchronising on an event."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


class FaultServer:
    """Context manager running build/tests/e2e/faultserver on ephemeral ports.

    .port, .blackhole_port, .url(path), .get(path), .stats(), .count(key), .reset_stats(),
    .wait_idle(). The server's stderr is kept in .log(). Exiting the context stops the
    server and fails if it died on its own meanwhile."""

    def __init__(self, blackhole=True):
        self._blackhole = blackhole
        self._dir = None
        self._proc = None
        self._log = None
        self._final_log = None
        self.port = None
        self.blackhole_port = None

    def __enter__(self):
        self._dir = tempfile.mkdtemp(prefix="tb-faultserver-")
        port_file = os.path.join(self._dir, "port")
        bh_file = os.path.join(self._dir, "blackhole-port")
        cmd = [FAULTSERVER, "--port", "0", "--port-file", port_file]
        if self._blackhole:
            cmd += ["--blackhole-port-file", bh_file]
        self._log = open(os.path.join(self._dir, "stderr"), "w+")
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=self._log,
                                      env=native_env())
        try:
            # The server writes its port file (by rename) only once everything listens.
            wait_for(lambda: os.path.exists(port_file) or self._proc.poll() is not None,
                     timeout=5.0, what="the fault server's port file")
            if self._proc.poll() is not None:
                raise RuntimeError("faultserver exited with %s: %s"
                                   % (self._proc.returncode, self.log()))
            self.port = int(open(port_file).read())
            if self._blackhole:
                self.blackhole_port = int(open(bh_file).read())
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        died = self._proc.poll()
        status = self._stop()
        log = self.log()
        if exc_type is None:
            if died is not None:
                raise AssertionError("faultserver died during the test (status %s): %s"
                                     % (died, log))
            if status != 0:
                raise AssertionError("faultserver ended with status %s on SIGTERM: %s"
                                     % (status, log))
        return False

    def _stop(self):
        """Stops the server (SIGTERM, then SIGKILL after 5 s); returns its exit status."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()
        self._final_log = self.log()
        shutil.rmtree(self._dir, ignore_errors=True)
        return self._proc.returncode

    def log(self):
        """What the server wrote on stderr so far."""
        if self._final_log is not None:
            return self._final_log
        try:
            with open(os.path.join(self._dir, "stderr")) as f:
                return f.read()
        except OSError:
            return ""

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def get(self, path, timeout=10):
        """GET path on a fresh connection; returns (status, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def stats(self):
        """The server's counters: requests, active, max_active, inflight, max_inflight,
        connections (see faultserver.c)."""
        status, body = self.get("/stats")
        assert status == 200, (status, body)
        return json.loads(body)

    def count(self, key):
        """How many requests carried key=<key> since the start or the last reset."""
        status, body = self.get("/count?key=" + key)
        assert status == 200, (status, body)
        return int(body)

    def reset_stats(self):
        status, body = self.get("/reset-stats")
        assert status == 200, (status, body)

    def wait_idle(self, timeout=5.0):
        """Waits until the server has seen every client connection close; returns stats."""
        return wait_for(lambda: (lambda s: s if s["active"] == 0 and s["inflight"] == 0
                                 else None)(self.stats()),
                        timeout=timeout, what="the fault server to go idle")
