"""Load-time and hostile-environment matrix: the library inside bash, perl, python3 and ruby
running networked scripts, behind or before jemalloc and tcmalloc, in a program of 1,000
threads; under garbage TIMEBOX_* values, an unusable log path, a huge environment,
RLIMIT_NOFILE=32 and closed standard fds; and in a setuid program (AT_SECURE), where it
must ignore every setting and write nothing. Each case: the program's own output is the
native one, and every error names the setting and its value (docs/reliability.md)."""

import os
import resource
import shutil
import subprocess
import tempfile
import time

import lib

lib.scrub_timebox_env()

# An interpreter's start-up under a sanitizer's runtime (none without one).
STARTUP_MS = {"": 0, "address": 500, "undefined": 200, "thread": 3000}[lib.SANITIZE]

TIMEOUT = {"test_interpreters_run_networked_scripts_unchanged": 120,
           "test_interpreters_are_governed": 90,
           "test_allocator_preloaded_before_and_after_timebox": 120,
           "test_thousand_threads_each_one_governed_exchange": 90,
           "test_setuid_copy_ignores_configuration_and_writes_nothing": 60}

LOADCHECK = lib.client("loadcheck")
PATHS = ["/ok?order=1", "/ok?order=2", "/delay?ms=150", "/big?bytes=3000"]

# One connection per path: send a GET, read to the end, print the body's last line (or
# the error). The same conversation in each language, with the language's own I/O.
SCRIPTS = {
    "bash": ["bash", "-c", r'''
port=$1; shift
for p in "$@"; do
  exec 3<>/dev/tcp/127.0.0.1/$port || { echo "connect failed"; continue; }
  printf 'GET %s HTTP/1.0\r\nHost: x\r\n\r\n' "$p" >&3
  last=""
  while IFS= read -r line <&3; do last=$line; done
  [ -n "$line" ] && last=$line
  echo "${last:0:60}"
  exec 3<&-
done''', "bash"],
    "perl": ["perl", "-e", r'''
use IO::Socket::INET;
my $port = shift @ARGV;
for my $p (@ARGV) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port, Proto => "tcp")
    or do { print "connect failed: $!\n"; next };
  print $s "GET $p HTTP/1.0\r\nHost: x\r\n\r\n";
  my ($last, $buf) = ("", "");
  while (1) {
    my $n = sysread($s, $buf, 4096);
    if (!defined $n) { $last = "error: $!"; last }
    last if $n == 0;
    $last .= $buf;
  }
  my @l = split /\n/, $last; print substr($l[-1], 0, 60), "\n";
}'''],
    "python3": ["python3", "-c", r'''
import socket, sys
port = int(sys.argv[1])
for p in sys.argv[2:]:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % p.encode())
    data = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        print(data.rstrip(b"\n").split(b"\n")[-1][:60].decode())
    except OSError as e:
        print("error:", e.strerror)
    s.close()
'''],
    "ruby": ["ruby", "-rsocket", "-e", r'''
port = ARGV.shift.to_i
ARGV.each do |p|
  s = TCPSocket.new("127.0.0.1", port)
  s.write("GET #{p} HTTP/1.0\r\nHost: x\r\n\r\n")
  begin
    data = s.read
    puts data.chomp.split("\n")[-1][0, 60]
  rescue SystemCallError => e
    puts "error: #{e.message}"
  end
  s.close
end'''],
}


def interpreter(name):
    """The argv prefix for name; skips when the interpreter is missing (after deps.sh)."""
    if shutil.which(SCRIPTS[name][0]) is None:
        lib.skip("%s is not installed (tests/deps.sh check installs it)" % SCRIPTS[name][0])
    return SCRIPTS[name]


def tb_only(stderr):
    return [line for line in stderr.splitlines() if line.startswith("timebox:")]


def test_interpreters_run_networked_scripts_unchanged():
    """Each interpreter runs a whole script (four connections, a delayed answer, a 3000-byte
    body) natively and under timebox with every limit armed but generous: the same output,
    the same status, and not a word from timebox."""
    gov = {"TIMEBOX_CONNECT_TIMEOUT": "5s", "TIMEBOX_READ_TIMEOUT": "5s",
           "TIMEBOX_DEADLINE": "10s", "TIMEBOX_MAX_CONNS": "2"}
    missing = []
    with lib.FaultServer() as srv:
        for name in SCRIPTS:
            if shutil.which(SCRIPTS[name][0]) is None:
                missing.append(name)
                continue
            argv = SCRIPTS[name] + [str(srv.port)] + PATHS
            native = lib.run(argv, env=lib.native_env(), timeout=30)
            assert native.returncode == 0 and native.stdout.count("\n") == 4, (name, native)
            assert "ok order=1" in native.stdout and "ok order=0" in native.stdout, native
            tb = lib.run(argv, env=lib.preload_env(gov), timeout=30)
            assert (tb.returncode, tb.stdout) == (native.returncode, native.stdout), (name, tb)
            assert tb_only(tb.stderr) == [], (name, tb)
    if missing:
        lib.skip("not installed: %s (tests/deps.sh check installs them); the others passed"
                 % ", ".join(missing))


def test_interpreters_are_governed():
    """The same scripts against a stalled server: timebox is loaded and governing in each
    interpreter (one cut at the read timeout, logged), never early."""
    limit = 400
    missing = []
    with lib.FaultServer() as srv:
        for name in SCRIPTS:
            if shutil.which(SCRIPTS[name][0]) is None:
                missing.append(name)
                continue
            argv = SCRIPTS[name] + [str(srv.port), "/stall"]
            r = lib.run(argv, env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "%dms" % limit}),
                        timeout=30)
            cuts = lib.tb_records(r.stderr, event="timeout")
            assert len(cuts) == 1, (name, r)
            # Never early; late by at most the slack and an interpreter's start-up, which a
            # sanitizer's runtime makes seconds long (ruby under TSan: 1.2 s).
            assert int(cuts[0]["elapsed_ms"]) >= limit, (name, r)
            assert limit <= r.elapsed_ms < lib.slack(limit) + lib.SLACK_MS + STARTUP_MS, \
                (name, r)
    if missing:
        lib.skip("not installed: %s; the others passed" % ", ".join(missing))


def allocator(soname):
    """The path of an installed allocator library, or None."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.strip().startswith(soname + " ") and "x86-64" in line:
            return line.split("=>")[-1].strip()
    return None


def test_allocator_preloaded_before_and_after_timebox():
    """jemalloc and tcmalloc preloaded before and after timebox: python3 and a 50-thread C
    client give their native output, and a stalled read is still cut."""
    found = {so: allocator(so) for so in ("libjemalloc.so.2", "libtcmalloc_minimal.so.4")}
    missing = [so for so, path in found.items() if path is None]
    script = SCRIPTS["python3"]
    with lib.FaultServer() as srv:
        native_py = lib.run(script + [str(srv.port)] + PATHS, env=lib.native_env(), timeout=30)
        native_c = lib.run([LOADCHECK, "--threads", "50", str(srv.port), "/ok"],
                           env=lib.native_env(), timeout=30)
        assert native_py.returncode == 0 and native_c.returncode == 0, (native_py, native_c)
        for so, path in found.items():
            if path is None:
                continue
            for order in ([path, lib.LIB], [lib.LIB, path]):
                env = lib.preload_env({"TIMEBOX_READ_TIMEOUT": "5s", "TIMEBOX_MAX_CONNS": "8"})
                env["LD_PRELOAD"] = " ".join(lib.sanitizer_preload() + order)
                py = lib.run(script + [str(srv.port)] + PATHS, env=env, timeout=30)
                assert (py.returncode, py.stdout) == (0, native_py.stdout), (order, py)
                c = lib.run([LOADCHECK, "--threads", "50", str(srv.port), "/ok"], env=env,
                            timeout=30)
                assert (c.returncode, c.stdout) == (0, native_c.stdout), (order, c)
                assert tb_only(py.stderr + c.stderr) == [], (order, py, c)
                env["TIMEBOX_READ_TIMEOUT"] = "300ms"
                cut = lib.run([LOADCHECK, str(srv.port), "/stall"], env=env, timeout=30)
                assert "err ETIMEDOUT 1" in cut.stdout, (order, cut)
                assert 300 <= cut.elapsed_ms < lib.slack(300) + lib.SLACK_MS, (order, cut)
    if missing:
        lib.skip("not installed: %s (tests/deps.sh check installs libjemalloc2 and "
                 "libtcmalloc-minimal4); the others passed" % ", ".join(missing))


def test_thousand_threads_each_one_governed_exchange():
    """1,000 threads, each one governed exchange through a gate of 64: every answer right,
    no fd left open by the program, every gate slot handed back, done in time."""
    with lib.FaultServer() as srv:
        r = lib.run([LOADCHECK, "--threads", "1000", str(srv.port), "/ok?order=7"],
                    env=lib.preload_env({"TIMEBOX_READ_TIMEOUT": "10s",
                                         "TIMEBOX_CONNECT_TIMEOUT": "10s",
                                         "TIMEBOX_MAX_CONNS": "64",
                                         "TIMEBOX_ACQUIRE_TIMEOUT": "30s",
                                         "TIMEBOX_LOG_LEVEL": "info"}),
                    timeout=60)
        assert r.returncode == 0, r
        assert r.stdout == "body ok order=7\nok 1000\nfds_leaked 0\n", r
        gates = lib.tb_records(r.stderr, event="gate")
        assert len(gates) == 1, r
        assert gates[0]["leased"] == "0" and gates[0]["acquired"] == "1000", gates
        assert gates[0]["timed_out"] == "0" and gates[0]["rejected"] == "0", gates
        assert [x for x in lib.tb_records(r.stderr) if x.get("event") != "gate"] == [], r


DLOPEN_SCRIPT = r'''
import ctypes, socket, sys
ctypes.CDLL(sys.argv[2])
for p in sys.argv[3:]:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"GET %s HTTP/1.0\r\n\r\n" % p.encode())
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    print(data.rstrip(b"\n").split(b"\n")[-1][:60].decode())
'''


def test_preloaded_twice_or_dlopened():
    """The library twice in LD_PRELOAD (the same path: loaded once, as if named once), two
    copies at different paths (both load: output as native, a stall cut once), and the
    library dlopen()ed by a running program (it governs nothing: output as native)."""
    gov = {"TIMEBOX_READ_TIMEOUT": "300ms", "TIMEBOX_MAX_CONNS": "2",
           "TIMEBOX_LOG_LEVEL": "info"}
    with lib.FaultServer() as srv, tempfile.TemporaryDirectory() as d:
        argv = [LOADCHECK, "--threads", "4", str(srv.port), "/ok?order=9"]
        native = lib.run(argv, env=lib.native_env(), timeout=30)
        once = lib.run(argv, env=lib.preload_env(gov), timeout=30)
        copy = os.path.join(d, "libtimebox.so")
        shutil.copy(lib.LIB, copy)
        for pre in ([lib.LIB, lib.LIB], [lib.LIB, copy]):
            env = lib.preload_env(gov)
            env["LD_PRELOAD"] = " ".join(lib.sanitizer_preload() + pre)
            r = lib.run(argv, env=env, timeout=30)
            assert (r.returncode, r.stdout) == (0, native.stdout), (pre, r)
            if pre[1] == lib.LIB:  # loaded once: one exit summary, as when named once
                assert len(lib.tb_records(r.stderr, event="gate")) == 1, r
                assert len(lib.tb_records(once.stderr, event="gate")) == 1, once
            cut = lib.run([LOADCHECK, str(srv.port), "/stall"], env=env, timeout=30)
            assert "err ETIMEDOUT 1" in cut.stdout, (pre, cut)
            lines = len(lib.tb_records(cut.stderr, event="timeout"))
            if pre[1] == lib.LIB:
                assert lines == 1, (pre, cut)
            else:
                # Two copies both govern (docs/limitations.md): each watchdog may log its
                # own cut of the one stall - one line or two, by which fires first.
                assert 1 <= lines <= 2, (pre, cut)
        py = ["python3", "-c", DLOPEN_SCRIPT, str(srv.port), lib.LIB] + PATHS
        lib.require_runs_with_sanitizer(["python3", "-c", "pass"])
        # A sanitized library dlopen()ed needs its sanitizer's runtime loaded first.
        envs = [lib.native_env(), lib.native_env(gov)]
        for env in envs:
            if lib.SANITIZE:
                env["LD_PRELOAD"] = " ".join(lib.sanitizer_preload())
                lib.sanitizer_options(env)
        nat = lib.run(py, env=envs[0], timeout=30)
        dl = lib.run(py, env=envs[1], timeout=30)
        assert nat.returncode == 0 and (dl.returncode, dl.stdout) == (0, nat.stdout), dl


HOSTILE = {
    "TIMEBOX_READ_TIMEOUT": b"\x01\xff\x7f garbage",
    "TIMEBOX_CONNECT_TIMEOUT": b"-5s",
    "TIMEBOX_DEADLINE": b"99999999999999999999999s",
    "TIMEBOX_WRITE_TIMEOUT": b"",
    "TIMEBOX_FIRST_BYTE_TIMEOUT": b"1 s",
    "TIMEBOX_MAX_CONNS": b"ten",
    "TIMEBOX_MAX_PENDING": b"-1",
    "TIMEBOX_SCOPE": b"x" * 200,
    "TIMEBOX_STRICT": b"maybe",
    "TIMEBOX_PROTOCOL": b"gopher",
    "TIMEBOX_RETRY_WINDOW": b"18446744073709551616ms",
    "TIMEBOX_LOG_LEVEL": b"info\ntimebox: event=forged \"x",
    "TIMEBOX_NOT_A_SETTING": b"1",
}


def environb(extra, preload=True):
    """os.environb with extra (bytes values) and LD_PRELOAD set or removed."""
    env = {k: v for k, v in os.environb.items() if not k.startswith(b"TIMEBOX_")}
    env.pop(b"LD_PRELOAD", None)
    if preload:
        env.update({k.encode(): v.encode() for k, v in lib.preload_env().items()
                    if k in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS")})
    env.update({k.encode(): v for k, v in extra.items()})
    return env


def run_bytes(argv, env, **kw):
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, timeout=30, **kw)
    return p, (time.monotonic() - t0) * 1000


def test_hostile_timebox_values_named_and_ignored():
    """Every TIMEBOX_* variable garbage at once (binary, negative, overflowing, empty, with
    a blank, a newline and a forged log line, unknown): the program's native output, and
    one line per variable naming it and its value, saying the setting is ignored; a value
    never starts a line of its own."""
    with lib.FaultServer() as srv:
        argv = [LOADCHECK, str(srv.port), "/ok?order=3"]
        native, _ = run_bytes(argv, environb({}, preload=False))
        tb, _ = run_bytes(argv, environb(HOSTILE))
        assert native.returncode == 0, native
        assert (tb.returncode, tb.stdout) == (0, native.stdout), tb
        lines = [x for x in tb.stderr.split(b"\n") if x.startswith(b"timebox:")]
        for name, value in HOSTILE.items():
            mine = [x for x in lines if b" name=%s " % name.encode() in x]
            assert len(mine) == 1, (name, lines)
            assert b"event=config_error" in mine[0], mine
            if all(0x20 <= c < 0x7f and c != 0x22 for c in value) and len(value) < 100:
                assert b'value="%s"' % value in mine[0], mine
        assert len(lines) == len(HOSTILE), lines


def test_unusable_log_path_named_and_logging_goes_to_stderr():
    """TIMEBOX_LOG naming a file in a missing directory, a directory, a FIFO (which must
    not hold the program in open) or a symbolic link: one error naming the setting and the
    path, the log goes to stderr instead, the program's output is native and a cut is
    still logged."""
    with lib.FaultServer() as srv, tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        link = os.path.join(d, "link.log")
        os.symlink(os.path.join(d, "real.log"), link)
        for path in ("/nonexistent-dir/timebox.log", d, fifo, link):
            env = lib.preload_env({"TIMEBOX_LOG": path, "TIMEBOX_READ_TIMEOUT": "300ms"})
            ok = lib.run([LOADCHECK, str(srv.port), "/ok?order=4"], env=env, timeout=30)
            assert (ok.returncode, ok.stdout) == (0, "body ok order=4\nok 1\nfds_leaked 0\n"), ok
            errs = lib.tb_records(ok.stderr, event="config_error")
            assert len(errs) == 1 and errs[0]["name"] == "TIMEBOX_LOG", ok
            assert errs[0]["value"] == path and errs[0]["effect"] == "logging to stderr", ok
            cut = lib.run([LOADCHECK, str(srv.port), "/stall"], env=env, timeout=30)
            assert "err ETIMEDOUT 1" in cut.stdout, (path, cut)
            assert len(lib.tb_records(cut.stderr, event="timeout")) == 1, (path, cut)


def test_huge_environment_unchanged():
    """A 1.5 MB environment (6,000 variables, one of 100 KB, TIMEBOX_-like names among
    them only as values): the program's native output, timebox silent and governing."""
    extra = {"FILLER_%d" % i: "v" * 200 + "TIMEBOX_READ_TIMEOUT=1ms" for i in range(6000)}
    extra["FILLER_BIG"] = "b" * 100000
    with lib.FaultServer() as srv:
        argv = [LOADCHECK, str(srv.port), "/ok?order=5"]
        native = lib.run(argv, env=lib.native_env(extra), timeout=30)
        extra["TIMEBOX_READ_TIMEOUT"] = "5s"
        tb = lib.run(argv, env=lib.preload_env(extra), timeout=30)
        assert native.returncode == 0, native
        assert (tb.returncode, tb.stdout, tb.stderr) == (0, native.stdout, ""), tb
        extra["TIMEBOX_READ_TIMEOUT"] = "300ms"
        cut = lib.run([LOADCHECK, str(srv.port), "/stall"], env=lib.preload_env(extra),
                      timeout=30)
        assert "err ETIMEDOUT 1" in cut.stdout, cut


def limit_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))


def test_rlimit_nofile_32():
    """RLIMIT_NOFILE=32: timebox cannot put its own fds at 512 and up. The program's 8
    threads still get their native answers through a gate of 4, and a stall is cut. What
    it costs (docs/limitations.md): the stats segment's two fds, which cannot move up, stay
    among the program's 32 (the client counts them as left open: at most 2)."""
    with lib.FaultServer() as srv:
        argv = [LOADCHECK, "--threads", "8", str(srv.port), "/ok?order=6"]
        native = subprocess.run(argv, env=lib.native_env(), capture_output=True, text=True,
                                timeout=30, preexec_fn=limit_nofile)
        env = lib.preload_env({"TIMEBOX_READ_TIMEOUT": "300ms", "TIMEBOX_MAX_CONNS": "4"})
        tb = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30,
                            preexec_fn=limit_nofile)
        assert native.returncode == 0 and "ok 8\n" in native.stdout, native
        assert tb.stdout.startswith("body ok order=6\nok 8\nfds_leaked "), tb
        assert int(tb.stdout.split("fds_leaked ")[1]) <= 2, tb
        assert tb_only(tb.stderr) == [], tb
        cut = subprocess.run([LOADCHECK, str(srv.port), "/stall"], env=env,
                             capture_output=True, text=True, timeout=30,
                             preexec_fn=limit_nofile)
        assert "err ETIMEDOUT 1" in cut.stdout, cut


def close_std_fds():
    for fd in (0, 1, 2):
        os.close(fd)


def test_std_fds_closed():
    """stdin, stdout and stderr closed (the governed socket takes fd 0): the native report,
    and a stall still cut (the log line has nowhere to go and is dropped)."""
    with lib.FaultServer() as srv, tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "report")

        def run(path, env):
            if os.path.exists(out):
                os.unlink(out)
            p = subprocess.run([LOADCHECK, "--out", out, str(srv.port), path], env=env,
                               preexec_fn=close_std_fds, close_fds=True, timeout=30)
            with open(out) as f:
                return p.returncode, f.read()

        gov = lib.preload_env({"TIMEBOX_READ_TIMEOUT": "300ms", "TIMEBOX_LOG_LEVEL": "info",
                               "TIMEBOX_MAX_CONNS": "2"})
        native = run("/ok?order=8", lib.native_env())
        assert native == (0, "body ok order=8\nok 1\nfds_leaked 0\n"), native
        assert run("/ok?order=8", gov) == native
        assert run("/stall", gov) == (1, "body \nok 0\nerr ETIMEDOUT 1\nfds_leaked 0\n")


FD2_SCRIPT = r'''
import os, socket, sys, threading
# Started with fds 0-2 closed. A peer connection is put on fd 2, where stderr was. The three
# numbers are taken first: else the recorder's accepted socket could land on fd 2 and be
# replaced by the dup2 below (a race that hangs the script natively too).
held = [os.open(os.devnull, os.O_RDWR) for _ in range(3)]
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
got = []
def recorder():
    c, _ = srv.accept()
    data = b""
    while True:
        b = c.recv(4096)
        if not b:
            break
        data += b
    got.append(data)
th = threading.Thread(target=recorder); th.start()
peer = socket.create_connection(srv.getsockname())
os.dup2(peer.fileno(), 2)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.sendall(b"GET /stall HTTP/1.0\r\n\r\n")
try:
    s.recv(10)
    res = "answered"
except OSError as e:
    res = "error"
s.close()
peer.shutdown(socket.SHUT_WR)
os.close(2)
th.join(5)
with open(sys.argv[2], "w") as f:
    f.write("%s %r\n" % (res, got[0] if got else None))
'''


def test_stderr_closed_log_never_reaches_a_socket_on_fd_2():
    """A program started with stderr closed later holds a socket on fd 2. timebox's cut
    line must not go to that peer (it remembers what fd 2 was at start-up): the peer
    receives nothing, as natively."""
    with lib.FaultServer() as srv, tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "report")
        for env in (lib.native_env(), lib.preload_env({"TIMEBOX_READ_TIMEOUT": "300ms"})):
            subprocess.run(["python3", "-c", FD2_SCRIPT, str(srv.port), out], env=env,
                           preexec_fn=close_std_fds, close_fds=True, timeout=30)
            with open(out) as f:
                assert f.read() == "error b''\n", env.get("LD_PRELOAD")


def test_setuid_copy_ignores_configuration_and_writes_nothing():
    """A setuid-root copy of the client run by nobody (AT_SECURE). Preloaded by path, the
    loader does not load timebox at all; linked in (an absolute RUNPATH, which secure mode
    honours), timebox is loaded but ignores every TIMEBOX_* variable, even TIMEBOX_STRICT
    with a broken value, and writes nothing: no line, no log file, no stats segment
    (docs/limitations.md). The same binary without the set-id bit is governed."""
    if os.geteuid() != 0:
        lib.skip("making a setuid-root copy needs root")
    if shutil.which("setpriv") is None:
        lib.skip("setpriv (util-linux) is not installed")
    cc = os.environ.get("CC", "cc")
    d = tempfile.mkdtemp(prefix="tb-secure-")
    try:
        os.chmod(d, 0o755)
        lib_copy = os.path.join(d, "libtimebox.so")
        shutil.copy(lib.LIB, lib_copy)
        os.chmod(lib_copy, 0o755)
        preloaded = os.path.join(d, "loadcheck")
        shutil.copy(LOADCHECK, preloaded)
        linked = os.path.join(d, "loadcheck_linked")
        src = os.path.join(lib.ROOT, "tests", "e2e", "clients", "loadcheck.c")
        subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-O2", "-pthread", "-o", linked, src,
                        "-Wl,--no-as-needed", lib_copy, "-Wl,-rpath," + d], check=True)
        for b in (preloaded, linked):
            os.chown(b, 0, 0)
            os.chmod(b, 0o4755)
        logfile = os.path.join(d, "tb.log")
        env = lib.native_env({"TIMEBOX_READ_TIMEOUT": "300ms", "TIMEBOX_LOG": logfile,
                              "TIMEBOX_STRICT": "1", "TIMEBOX_CONNECT_TIMEOUT": "bogus",
                              "TIMEBOX_LOG_LEVEL": "info", "TIMEBOX_MAX_CONNS": "1"},
                             clean=True)
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "env",
                  "LD_PRELOAD=" + lib_copy]
        shm_before = set(os.listdir("/dev/shm"))
        with lib.FaultServer() as srv:
            args = ["--whoami", str(srv.port), "/delay?ms=800"]
            for b, mapped in ((preloaded, "absent"), (linked, "mapped")):
                r = lib.run(nobody + [b] + args, env=env, timeout=20)
                refused = ("Sanitizer" in r.stderr or "runtime does not come first" in r.stderr)
                if lib.SANITIZE and b == linked and r.returncode != 0 and refused:
                    # Proven by this very run: a set-id program ignores LD_PRELOAD, so a
                    # sanitized libtimebox linked into it cannot have its runtime first.
                    lib.skip("a setuid program ignores LD_PRELOAD: the %s sanitizer's runtime "
                             "cannot come first in it (%s)"
                             % (lib.SANITIZE, r.stderr.strip().splitlines()[-1][:120]))
                assert r.returncode == 0, (b, r)
                assert r.stdout == ("timebox %s\nsecure 1\nbody ok order=0\nok 1\n"
                                    "fds_leaked 0\n" % mapped), (b, r)
                assert r.stderr == "", (b, r)
                assert r.elapsed_ms >= 800, r
            assert not os.path.exists(logfile)
            assert set(os.listdir("/dev/shm")) - shm_before == set()
            # The control: the same linked binary without the set-id bit, the same user,
            # the same environment but a valid connect timeout, is governed.
            os.chmod(linked, 0o755)
            env["TIMEBOX_CONNECT_TIMEOUT"] = "5s"
            env["TIMEBOX_LOG"] = "stderr"
            r = lib.run(nobody + [linked] + args, env=env, timeout=20)
            if lib.SANITIZE and ("cannot start the watchdog thread" in r.stderr or
                                 (r.returncode is not None and r.returncode < 0)):
                # Proven by this run: the sanitized copy, linked into a program the
                # sanitizer's runtime does not come first in, cannot run its threads - it
                # cannot create them, or (ThreadSanitizer, once timebox falls back to the
                # default stack that holds the runtime's TLS) a thread it creates dies in
                # the uninitialised runtime's __tsan_func_entry.
                lib.skip("the %s sanitizer's runtime, not first in the linked program, "
                         "cannot run timebox's threads (%s)"
                         % (lib.SANITIZE, "signal %d" % -r.returncode
                            if r.returncode is not None and r.returncode < 0 else
                            "\"cannot start the watchdog thread\""))
            assert r.returncode == 1, r
            assert r.stdout.startswith("timebox mapped\nsecure 0\nbody \nok 0\n"
                                       "err ETIMEDOUT 1\n"), r
            assert len(lib.tb_records(r.stderr, event="timeout")) == 1, r
    finally:
        shutil.rmtree(d, ignore_errors=True)
