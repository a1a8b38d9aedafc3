"""The musl column: the project's own C clients built with musl-gcc (blocking, poll, epoll,
stdio, getaddrinfo) run under the musl build (make MUSL=1) through `timebox run`, which
picks libtimebox-musl.so from the program's PT_INTERP. Connect, first byte, read,
deadline and gate behave as under glibc, with the same assertions as test_core, test_gate
and test_eventloops; a healthy exchange is byte-identical. A build preloaded by hand into
the other libc's program, and a musl root laid out as the container recipes of
docs/operations.md lay it out, are tested too.

make e2e builds the musl column first (make MUSL=1 all musl-clients; tests/deps.sh
installs musl-tools): a missing piece fails the test with what to run, never a skip."""

import os
import shutil
import signal
import subprocess
import tempfile

import lib
from lib import FaultServer

lib.scrub_timebox_env()

MUSL_BUILD = os.environ.get("TB_MUSL_BUILD", os.path.join(lib.ROOT, "build", "musl"))
MUSL_LIB = os.path.join(MUSL_BUILD, "lib", "libtimebox-musl.so")
MUSL_LAUNCHER = os.path.join(MUSL_BUILD, "bin", "timebox")
MUSL_CLIENTS = os.path.join(MUSL_BUILD, "tests", "e2e", "clients")
MUSL_LOADER = "/lib/ld-musl-x86_64.so.1"


def musl_client(name):
    """Path of a client built with musl-gcc; fails (not skips) when it is missing."""
    path = os.path.join(MUSL_CLIENTS, name)
    assert shutil.which("musl-gcc"), \
        "musl-gcc is missing: tests/deps.sh check installs musl-tools (Debian)"
    assert os.path.exists(path) and os.path.exists(MUSL_LIB), \
        "%s or %s is not built: run make musl-clients (make e2e does)" % (path, MUSL_LIB)
    return path


def require_plain_build():
    # The launcher under test finds the musl build beside it (build/bin -> build/musl/lib);
    # a sanitizer build's launcher lives in build/san-NAME/bin, with no musl build beside it,
    # and a sanitizer runtime cannot be preloaded into a musl program at all.
    if lib.SANITIZE:
        lib.skip("the musl column runs against the plain build (a %s sanitizer runtime "
                 "cannot load into a musl program)" % lib.SANITIZE)


def timebox_run(options, cmd, timeout=30, env=None):
    require_plain_build()
    return lib.run([lib.LAUNCHER, "run"] + options + ["--"] + cmd,
                   env=env if env is not None else lib.native_env(clean=True),
                   timeout=timeout)


def blockcli(args, options, timeout=30):
    return lib.BlockResult(timebox_run(options, [musl_client("blockcli"), "--host",
                                                 "127.0.0.1"] + [str(a) for a in args],
                                       timeout=timeout))


def assert_fired(ms, limit_ms, what, upper=None):
    upper = lib.slack(limit_ms) if upper is None else upper
    assert ms >= limit_ms, "%s fired early: %.1f ms < %d ms" % (what, ms, limit_ms)
    assert ms < upper, "%s fired late: %.1f ms >= %d ms" % (what, ms, upper)


def one_event(stderr, **fields):
    lines = lib.tb_records(stderr)
    assert len(lines) == 1, "expected one timebox line, got %r" % stderr
    for key, value in fields.items():
        assert lines[0].get(key) == str(value), (key, value, lines[0])
    return lines[0]


def is_musl_program(path):
    with open(path, "rb") as f:
        return b"ld-musl-" in f.read(4096)


# ---- the launcher's choice ------------------------------------------------------------------

def test_launcher_picks_the_musl_build_for_a_musl_program():
    musl = musl_client("blockcli")
    assert is_musl_program(musl), musl
    env = lib.native_env(clean=True)
    r = timebox_run(["--print-env"], [musl])
    assert r.returncode == 0 and "LD_PRELOAD=%s\n" % os.path.realpath(MUSL_LIB) in r.stdout, r
    r = timebox_run(["--print-env"], [lib.BLOCKCLI])
    assert r.returncode == 0 and "LD_PRELOAD=%s\n" % os.path.realpath(lib.LIB) in r.stdout, r
    # No command (a manifest's variables): the launcher's own libc decides.
    require_plain_build()
    r = lib.run([lib.LAUNCHER, "run", "--print-env"], env=env)
    assert r.returncode == 0 and "LD_PRELOAD=%s\n" % os.path.realpath(lib.LIB) in r.stdout, r
    r = lib.run([MUSL_LAUNCHER, "run", "--print-env"], env=env)
    assert r.returncode == 0 and "LD_PRELOAD=%s\n" % os.path.realpath(MUSL_LIB) in r.stdout, r
    with tempfile.TemporaryDirectory() as d:
        # A #! script is judged by its interpreter, found on PATH through env.
        os.symlink(musl, os.path.join(d, "muslprog"))
        script = os.path.join(d, "script")
        with open(script, "w") as f:
            f.write("#!/usr/bin/env muslprog\n")
        os.chmod(script, 0o755)
        env["PATH"] = d + ":" + env.get("PATH", "/usr/bin:/bin")
        r = timebox_run(["--print-env"], [script], env=env)
        assert "LD_PRELOAD=%s\n" % os.path.realpath(MUSL_LIB) in r.stdout, r
        r = timebox_run(["--print-env"], ["muslprog"], env=env)
        assert "LD_PRELOAD=%s\n" % os.path.realpath(MUSL_LIB) in r.stdout, r


def test_musl_program_without_the_musl_build_is_refused():
    musl = musl_client("blockcli")
    with tempfile.TemporaryDirectory() as d:
        # A launcher whose tree holds only the glibc build.
        os.makedirs(os.path.join(d, "bin"))
        os.makedirs(os.path.join(d, "lib"))
        shutil.copy(lib.LAUNCHER, os.path.join(d, "bin", "timebox"))
        shutil.copy(lib.LIB, os.path.join(d, "lib", "libtimebox.so"))
        require_plain_build()
        r = lib.run([os.path.join(d, "bin", "timebox"), "run", "--read-timeout", "1s", "--",
                     musl, "--port", "1", "--path", "/"], env=lib.native_env(clean=True))
        assert r.returncode == 2 and r.stdout == "", r
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and "linked against musl and needs libtimebox-musl.so" in \
            lines[0] and "make MUSL=1" in lines[0], r


# ---- the contract, blocking calls -----------------------------------------------------------

def test_musl_connect_timeout_on_blackhole():
    with FaultServer() as srv:
        res = blockcli(["--port", srv.blackhole_port, "--connect-only"],
                       ["--connect-timeout", "100ms"])
        rec = res.calls()[-1]
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        assert_fired(rec["ms"], 100, "the connect timeout")
        one_event(res.run.stderr, event="timeout", phase="connect", limit_ms=100,
                  dest="127.0.0.1:%d" % srv.blackhole_port)


def test_musl_first_byte_timeout():
    with FaultServer() as srv:
        for extra in ([], ["--poll-slice-ms", "50"], ["--select"]):
            res = blockcli(["--port", srv.port, "--path", "/stall"] + extra,
                           ["--read-timeout", "250ms"])
            rec = res.calls()[-1]
            assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), (extra, res)
            assert_fired(rec["ms"], 250, "the first byte timeout %s" % extra)
            one_event(res.run.stderr, event="timeout", phase="first_byte", limit_ms=250)


def test_musl_read_timeout_after_first_byte():
    with FaultServer() as srv:
        # Each gap of the drip is 600 ms: the first one after the first byte is cut at 300.
        res = blockcli(["--port", srv.port, "--path", "/drip?ms=600&n=5"],
                       ["--read-timeout", "300ms"])
        rec = res.calls()[-1]
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        assert rec["rx"] > 0, res
        assert_fired(rec["ms"], 300, "the read timeout")
        one_event(res.run.stderr, event="timeout", phase="read", limit_ms=300)


def test_musl_deadline_cuts_a_drip():
    with FaultServer() as srv:
        res = blockcli(["--port", srv.port, "--path", "/drip?ms=100&n=30"],
                       ["--read-timeout", "2s", "--deadline", "700ms"])
        rec = res.calls()[-1]
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        assert_fired(rec["ms"], 700, "the deadline")
        one_event(res.run.stderr, event="timeout", phase="deadline", limit_ms=700)


def test_musl_gate_acquire_timeout():
    # test_gate's experiment B: 20 threads, 5 slots, a 500 ms downstream, 300 ms to acquire.
    with FaultServer() as srv:
        res = blockcli(["--port", srv.port, "--path", "/delay?ms=500", "--threads", 20],
                       ["--max-conns", "5", "--acquire-timeout", "300ms"])
        calls = res.calls()
        ok = [c for c in calls if c["result"] == "ok"]
        failed = [c for c in calls if c["result"] != "ok"]
        assert len(calls) == 20 and len(ok) == 5 and len(failed) == 15, res
        for c in ok:
            assert 500 <= c["ms"] < lib.slack(500), res
        for c in failed:
            assert c["errno"] == "ETIMEDOUT" and 300 <= c["ms"] < 800, res
        assert len(lib.tb_records(res.run.stderr, event="timeout", phase="gate",
                                  limit_ms=300)) == 15, res.run.stderr
        assert srv.stats()["requests"] == 5, srv.stats()


# ---- epoll, stdio, byte identity ------------------------------------------------------------

EV_MODES = [[], ["--et"], ["--oneshot"], ["--slice", "50"]]


def test_musl_evcli_stall_cut_at_first_byte():
    evcli = musl_client("evcli")
    with FaultServer() as srv:
        for mode in EV_MODES:
            r = timebox_run(["--read-timeout", "500ms"], [evcli] + mode + [str(srv.port),
                                                                           "/stall"],
                            timeout=10)
            assert r.returncode != 0 and not r.timed_out, (mode, r)
            # musl's strerror(ETIMEDOUT) is "Operation timed out" (glibc's: "Connection").
            assert "evcli: recv: Operation timed out" in r.stderr, (mode, r)
            rec = one_event(r.stderr, event="timeout", phase="first_byte", limit_ms=500)
            assert 500 <= int(rec["elapsed_ms"]) < lib.slack(500), (mode, r)


STDIO_APIS = ["fgets", "fgets_unlocked", "fread", "getc", "getc_unlocked", "getline",
              "fscanf"]
# The writers stdiocli can send with (--write, --flood): fflush is fputs into a 1 MiB
# buffer, then fflush.
STDIO_WRITERS = ["fprintf", "fputs", "fwrite", "putc", "putc_unlocked", "fflush"]


def test_musl_stdio_readers_are_governed():
    # musl refills a FILE with its own readv, unseen by any hook: the musl build reads a
    # governed socket's FILE itself, one wait per refill (shim/hooks_stdio_musl.c). fscanf
    # ("%c" a call) cannot be split: its first refill is a wait of its own, so its first
    # byte limit and its deadline hold, and a steady drip (one refill per call) is not cut.
    stdiocli = musl_client("stdiocli")
    with FaultServer() as srv:
        for api in STDIO_APIS:
            cmd = [stdiocli, "--port", str(srv.port), "--api", api, "--path"]
            r = timebox_run(["--read-timeout", "250ms"], cmd + ["/stall"], timeout=10)
            rec = lib.parse_logfmt(r.stdout.strip())
            assert (rec.get("result"), rec.get("errno"), rec.get("ferror"), rec.get("feof")) \
                == ("error", "ETIMEDOUT", "1", "0"), (api, r)
            assert_fired(float(rec["ms"]), 250, "%s's first byte timeout" % api)
            one_event(r.stderr, event="timeout", phase="first_byte", limit_ms=250)

            r = timebox_run(["--read-timeout", "2s", "--deadline", "700ms"],
                            cmd + ["/drip?ms=100&n=30"], timeout=10)
            rec = lib.parse_logfmt(r.stdout.strip())
            assert (rec.get("result"), rec.get("errno")) == ("error", "ETIMEDOUT"), (api, r)
            assert int(rec["bytes"]) > 0, (api, r)
            assert_fired(float(rec["ms"]), 700, "%s's deadline" % api)
            one_event(r.stderr, event="timeout", phase="deadline", limit_ms=700)

            # Gaps of 150 ms under a 400 ms read timeout: each refill is its own wait, so
            # a response slower in all than the limit is read whole, as natively.
            native = lib.run(cmd + ["/drip?ms=150&n=8"], env=lib.native_env(clean=True))
            r = timebox_run(["--read-timeout", "400ms"], cmd + ["/drip?ms=150&n=8"])
            assert native.returncode == 0 and r.returncode == 0, (api, r)
            assert no_times(r.stdout) == no_times(native.stdout) and r.stderr == "", (api, r)


def test_musl_stdio_writers_to_a_peer_that_never_reads_are_cut():
    # musl sends a FILE's buffer with its own writev, unseen by any hook: the musl build
    # makes a stdio write that may reach a governed socket a write-side wait
    # (shim/hooks_stdio_musl_w.c). stdiocli --flood writes 64 KiB lines to a peer that never
    # reads, SIGPIPE at its default: the blocked call fails with ETIMEDOUT and ferror set,
    # never before the limit, and the program lives to say so (the SIGPIPE the cut's EPIPE
    # raised is consumed). The upper bound is generous: a flush that still moves bytes into the peer's
    # receive buffer is progress (the watchdog's SIOCOUTQ samples), as for a blocked send.
    stdiocli = musl_client("stdiocli")
    for api in STDIO_WRITERS:
        r = timebox_run(["--write-timeout", "400ms"], [stdiocli, "--flood", api], timeout=20)
        assert r.returncode == 1 and not r.timed_out, (api, r)
        rec = lib.parse_logfmt(r.stdout.strip())
        assert (rec.get("result"), rec.get("errno"), rec.get("ferror")) == \
            ("error", "ETIMEDOUT", "1"), (api, r)
        assert int(rec["bytes"]) > 0, (api, r)
        assert_fired(float(rec["ms"]), 400, "%s's write timeout" % api, upper=2500)
        one_event(r.stderr, event="timeout", phase="write", limit_ms=400)

        # A genuine EPIPE (the peer closed) still raises SIGPIPE, as natively: the one
        # held back during a governed write is delivered, not consumed.
        cmd = [stdiocli, "--flood", api, "--peer-closes"]
        native = lib.run(cmd, env=lib.native_env(clean=True), timeout=20)
        r = timebox_run(["--write-timeout", "400ms"], cmd, timeout=20)
        assert native.returncode == -signal.SIGPIPE, (api, native)
        assert r.returncode == -signal.SIGPIPE and r.stdout == "", (api, r)

    # The deadline bounds a stdio write as it bounds write(); on_timeout=eagain reports the
    # first cut as EAGAIN. The deadline runs from the connect, so the event says when.
    for api, options, err in (("fprintf", [], "ETIMEDOUT"),
                              ("fwrite", ["--on-timeout", "eagain"], "EAGAIN")):
        r = timebox_run(["--deadline", "700ms"] + options, [stdiocli, "--flood", api],
                        timeout=20)
        rec = lib.parse_logfmt(r.stdout.strip())
        assert (rec.get("result"), rec.get("errno"), rec.get("ferror")) == \
            ("error", err, "1"), (api, r)
        event = one_event(r.stderr, event="timeout", phase="deadline", limit_ms=700)
        assert 700 <= int(event["elapsed_ms"]) < lib.slack(700), (api, r)


def musl_regress(name):
    """Runs tests/regress/NAME, built with musl-gcc (make musl-clients): the program runs
    itself under the library TBR_PRELOAD names, the musl build."""
    require_plain_build()
    prog = os.path.join(MUSL_BUILD, "tests", "regress", name)
    musl_client("stdiocli")  # the musl column's prerequisites
    assert os.path.exists(prog), "%s is not built: run make musl-clients" % prog
    env = lib.native_env(clean=True)
    env["TBR_PRELOAD"] = MUSL_LIB
    return lib.run([prog], env=env)


def test_musl_stdio_on_a_memory_stream_keeps_errno():
    # tests/regress/stdio_memory_errno.c, built with musl-gcc: musl's fileno of a memory
    # stream sets errno to EBADF, and the hooks' pass-through left it so after calls that
    # succeeded. The program runs itself under the library named by TBR_PRELOAD.
    r = musl_regress("stdio_memory_errno")
    assert r.returncode == 0 and r.stderr == "", r


def test_musl_stdio_response_closes_the_inbound_budget():
    # tests/regress/inbound_stdio_keepalive.c, built with musl-gcc: a scope=request server
    # answering a keep-alive connection with fprintf + fflush ran its second request under
    # the first one's budget in the musl build (musl's stdio writes inside libc, and its
    # writers' hooks did not tell the inbound connection a response had begun): the second
    # request's downstream connect failed with ETIMEDOUT at once.
    r = musl_regress("inbound_stdio_keepalive")
    assert r.returncode == 0 and "timebox:" not in r.stderr, r
    assert "budget of its own" in r.stdout, r


def test_musl_msghdr_padding_left_to_musl():
    # tests/regress/musl_msghdr_padding.c, built with musl-gcc: a transfer that cannot block
    # was made as its system call with the program's msghdr, whose 32 bits of padding beside
    # msg_iovlen musl's own sendmsg/recvmsg zero in a copy; a header filled field by field
    # kept the stack's bytes there, and each call failed with EMSGSIZE.
    r = musl_regress("musl_msghdr_padding")
    assert r.returncode == 0 and "timebox:" not in r.stderr, r
    assert "moved their bytes" in r.stdout, r


def test_musl_scanf_of_nothing_does_not_wait():
    # tests/regress/stdio_scanf_no_input.c, built with musl-gcc: fscanf(f, "%n", &n) returns
    # 0 at once natively; the governed fscanf first filled an empty buffer, and waited for a
    # peer that speaks only after the request (cut at the first-byte timeout).
    r = musl_regress("stdio_scanf_no_input")
    assert r.returncode == 0 and "timebox:" not in r.stderr, r


def no_times(out):
    """out without the fields that carry times (ms=, total_ms=): what must be identical."""
    return [" ".join(f for f in line.split() if not f.startswith(("ms=", "total_ms=")))
            for line in out.splitlines()]


def test_musl_healthy_exchanges_are_byte_identical():
    evcli, blockcli_m, stdiocli = (musl_client("evcli"), musl_client("blockcli"),
                                   musl_client("stdiocli"))
    limits = ["--connect-timeout", "1s", "--read-timeout", "2s", "--deadline", "5s"]
    with FaultServer() as srv:
        for cmd in ([evcli, str(srv.port), "/ok?order=3"],
                    [evcli, "--slice", "20", str(srv.port), "/big?bytes=300000"],
                    [blockcli_m, "--host", "127.0.0.1", "--port", str(srv.port), "--path",
                     "/big?bytes=100000", "--calls", "3"],
                    [stdiocli, "--port", str(srv.port), "--path", "/big?bytes=200000",
                     "--api", "fread"],
                    [stdiocli, "--port", str(srv.port), "--path", "/big?bytes=50000",
                     "--api", "fgets"]) + tuple(
                    # The request through each governed writer, the answer through fgets.
                    [stdiocli, "--port", str(srv.port), "--path", "/big?bytes=30000",
                     "--api", "fgets", "--write", api] for api in STDIO_WRITERS) + (
                    # Written out, read back with fread through an echo server, at once:
                    # in chunks that fill the buffer (no wait) and chunks that flush (a
                    # wait; fprintf's text formatted on the heap).
                    [stdiocli, "--loop", "67108864", "--chunk", "65536"],
                    [stdiocli, "--loop", "4000000", "--chunk", "777"]) + tuple(
                    [stdiocli, "--loop", "2000000", "--chunk", "5000", "--write", api]
                    for api in STDIO_WRITERS):
            native = lib.run(cmd, env=lib.native_env(clean=True))
            governed = timebox_run(limits, cmd)
            assert native.returncode == 0, native
            assert governed.returncode == 0 and governed.stderr == native.stderr, \
                (cmd, governed)
            if "evcli" in cmd[0]:
                assert governed.stdout == native.stdout, (cmd, governed)
            else:
                assert no_times(governed.stdout) == no_times(native.stdout), (cmd, governed)


# ---- getaddrinfo: musl's resolver is inside libc --------------------------------------------

def test_musl_getaddrinfo_cut_at_dns_timeout():
    import test_dns
    gaicli = musl_client("gaicli")
    require_plain_build()
    cmd = [lib.LAUNCHER, "run", "--dns-timeout", "300ms", "--", gaicli, "svc.example.com"]
    out = test_dns.in_ns(cmd, options="options timeout:2 attempts:1", preload=False)
    assert out["rc"] == 3 and "error EAI=" in out["stdout"], out
    test_dns.assert_cut(out, 300, "svc.example.com")
    # Natively, musl waits its own timeout (2 s here) for the silent resolver.
    out = test_dns.in_ns([gaicli, "svc.example.com"], options="options timeout:2 attempts:1",
                         preload=False)
    assert out["rc"] == 3 and out["elapsed_ms"] >= 1900, out
    # A resolver that answers: the same addresses as natively, and nothing said.
    cmd[-1] = "svc.tbtest"
    out = test_dns.in_ns(cmd, mode="answer", preload=False)
    native = test_dns.in_ns([gaicli, "svc.tbtest"], mode="answer", preload=False)
    assert out["rc"] == 0 and out["stdout"] == native["stdout"] == "ok 127.0.0.7\n", \
        (out, native)
    assert lib.tb_lines(out["stderr"]) == [], out


def test_musl_getnameinfo_cut_at_dns_timeout():
    """musl's reverse lookup has no temporary failure: without an answer it gives the numeric
    host (EAI_NONAME under NI_NAMEREQD), after its own timeout natively, at dns_timeout under
    timebox."""
    import test_dns
    gnicli = musl_client("gnicli")
    require_plain_build()
    for flags, rc, said in (("0", 0, "ok 10.1.2.3 "), ("8", 3, "error EAI=-2 ")):
        cmd = [lib.LAUNCHER, "run", "--dns-timeout", "300ms", "--", gnicli, "10.1.2.3", flags]
        out = test_dns.in_ns(cmd, options="options timeout:2 attempts:1", preload=False)
        native = test_dns.in_ns([gnicli, "10.1.2.3", flags],
                                options="options timeout:2 attempts:1", preload=False)
        assert native["rc"] == rc and native["stdout"].startswith(said), native
        assert native["elapsed_ms"] >= 1900, native
        assert out["rc"] == rc and out["stdout"] == native["stdout"], (out, native)
        test_dns.assert_cut(out, 300, "10.1.2.3")
    # A resolver that answers: the PTR record's name, and nothing said.
    cmd = [lib.LAUNCHER, "run", "--dns-timeout", "300ms", "--", gnicli, "127.0.0.7"]
    out = test_dns.in_ns(cmd, mode="answer", preload=False)
    native = test_dns.in_ns([gnicli, "127.0.0.7"], mode="answer", preload=False)
    assert out["rc"] == 0 and out["stdout"] == native["stdout"], (out, native)
    assert out["stdout"].startswith("ok svc.tbtest "), out
    assert lib.tb_lines(out["stderr"]) == [], out


def test_musl_gethostbyaddr_cut_at_dns_timeout():
    """musl's gethostbyaddr and gethostbyaddr_r have no temporary failure either: without an
    answer they give a hostent of the numeric address, after musl's own timeout natively, at
    dns_timeout under timebox. An answered lookup and an /etc/hosts address are as natively,
    and nothing is said of them."""
    import test_dns
    ghbacli = musl_client("ghbacli")
    require_plain_build()
    for args, said in ((["10.1.2.3"], "ok 10.1.2.3 10.1.2.3 10.1.2.3\n"),
                       (["2001:db8::1", "r"], "ok 2001:db8::1 2001:db8::1 2001:db8::1\n")):
        cmd = [lib.LAUNCHER, "run", "--dns-timeout", "300ms", "--", ghbacli] + args
        out = test_dns.in_ns(cmd, options="options timeout:2 attempts:1", preload=False)
        native = test_dns.in_ns([ghbacli] + args, options="options timeout:2 attempts:1",
                                preload=False)
        assert native["rc"] == 0 and native["stdout"] == said, native
        assert native["elapsed_ms"] >= 1900, native
        assert out["rc"] == 0 and out["stdout"] == native["stdout"], (out, native)
        test_dns.assert_cut(out, 300, args[0])
    for args, mode, said in ((["127.0.0.7"], "answer", "ok svc.tbtest svc.tbtest 127.0.0.7\n"),
                             (["127.0.0.7", "r"], "answer",
                              "ok svc.tbtest svc.tbtest 127.0.0.7\n"),
                             (["127.0.0.1", "r"], "silent",
                              "ok localhost localhost 127.0.0.1\n")):
        cmd = [lib.LAUNCHER, "run", "--dns-timeout", "300ms", "--", ghbacli] + args
        out = test_dns.in_ns(cmd, mode=mode, preload=False)
        native = test_dns.in_ns([ghbacli] + args, mode=mode, preload=False)
        assert native["stdout"] == said, native
        assert out["rc"] == 0 and out["stdout"] == native["stdout"], (out, native)
        assert lib.tb_lines(out["stderr"]) == [], out


# ---- a library preloaded by hand into the other libc's program ------------------------------

def test_musl_build_in_a_glibc_program_is_inactive():
    musl_client("blockcli")
    with FaultServer() as srv:
        cmd = [lib.BLOCKCLI, "--host", "127.0.0.1", "--port", str(srv.port), "--path",
               "/ok", "--calls", "2"]
        native = lib.run(cmd, env=lib.native_env(clean=True))
        for extra in ({}, {"LD_BIND_NOW": "1"}):
            env = lib.native_env(dict(extra, LD_PRELOAD=MUSL_LIB,
                                      TIMEBOX_READ_TIMEOUT="1s"), clean=True)
            r = lib.run(cmd, env=env)
            assert r.returncode == 0 == native.returncode, (extra, r)
            assert no_times(r.stdout) == no_times(native.stdout), r
            assert r.stderr == ("timebox: inactive: this library is built for musl but the "
                                "program runs on glibc; preload libtimebox.so instead "
                                "(timebox run picks the right one)\n"), (extra, r)
        # Inactive means ungoverned: a stall is not cut.
        env = lib.native_env({"LD_PRELOAD": MUSL_LIB, "TIMEBOX_READ_TIMEOUT": "200ms"},
                             clean=True)
        r = lib.run(cmd[:-4] + ["--path", "/stall"], env=env, timeout=1.5)
        assert r.timed_out, r


def test_glibc_build_in_a_musl_program_is_inactive():
    # musl's loader binds every name a preloaded object imports when it loads it, and fails
    # the program on one it cannot find: the glibc build names no libconfig.so.9 and no
    # glibc loader, and its glibc-only imports are weak (shim/libc_compat.h), so musl takes
    # it and the constructor says, once, why it stays inert.
    if lib.SANITIZE:
        lib.skip("a %s sanitizer build of the library needs its runtime, which a musl "
                 "program cannot load" % lib.SANITIZE)
    blockcli_m, evcli, stdiocli = (musl_client("blockcli"), musl_client("evcli"),
                                   musl_client("stdiocli"))
    why = ("timebox: inactive: this library is built for glibc but the program runs on musl; "
           "preload libtimebox-musl.so instead (timebox run picks the right one)\n")
    with FaultServer() as srv:
        for cmd in ([blockcli_m, "--host", "127.0.0.1", "--port", str(srv.port), "--path",
                     "/big?bytes=100000", "--calls", "2"],
                    [evcli, str(srv.port), "/ok?order=3"],
                    [stdiocli, "--port", str(srv.port), "--path", "/big?bytes=50000",
                     "--api", "fgets"],
                    [stdiocli, "--port", str(srv.port), "--path", "/big?bytes=50000",
                     "--api", "fread"]):
            native = lib.run(cmd, env=lib.native_env(clean=True))
            env = lib.native_env({"LD_PRELOAD": lib.LIB, "TIMEBOX_READ_TIMEOUT": "1s"},
                                 clean=True)
            r = lib.run(cmd, env=env)
            assert native.returncode == 0 and r.returncode == 0, (cmd, native, r)
            assert no_times(r.stdout) == no_times(native.stdout), (cmd, r)
            assert r.stderr == native.stderr + why, (cmd, r)
        # Inactive means ungoverned: a stall is not cut.
        env = lib.native_env({"LD_PRELOAD": lib.LIB, "TIMEBOX_READ_TIMEOUT": "200ms"},
                             clean=True)
        r = lib.run([blockcli_m, "--host", "127.0.0.1", "--port", str(srv.port), "--path",
                     "/stall"], env=env, timeout=1.5)
        assert r.timed_out, r


def test_glibc_build_imports_only_names_musl_has():
    # What lets musl's loader take the glibc build (the test above covers one program; this,
    # every name): each strong import is one musl's libc exports, and it needs no library
    # but libc.so.6, which musl's loader takes for itself.
    if lib.SANITIZE:
        lib.skip("a %s sanitizer build of the library needs its runtime, which a musl "
                 "program cannot load" % lib.SANITIZE)
    musl_client("blockcli")  # the musl column's prerequisites
    musl_libc = "/lib/x86_64-linux-musl/libc.so"
    assert os.path.exists(musl_libc), musl_libc
    def names(args, path):
        out = subprocess.run(["nm", "-D"] + args + [path], capture_output=True, text=True,
                             check=True).stdout
        return [line.split() for line in out.splitlines() if line.strip()]
    have = {f[-1] for f in names(["--defined-only"], musl_libc)}
    strong = {f[-1].split("@")[0] for f in names(["--undefined-only"], lib.LIB) if f[0] == "U"}
    assert strong and not (strong - have), sorted(strong - have)
    dyn = subprocess.run(["readelf", "-d", lib.LIB], capture_output=True, text=True,
                         check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]
    assert needed == ["libc.so.6"], needed


# ---- a musl root laid out as the container recipes lay it out --------------------------------

def musl_root(d, layout):
    """A minimal musl system under d: musl's loader, the static launcher and the musl build
    where the recipe puts them, and the musl blockcli. Returns (launcher, client) as seen
    inside the root."""
    real_loader = os.path.realpath(MUSL_LOADER)
    assert os.path.exists(real_loader), "%s is missing: install musl (musl-tools)" % \
        MUSL_LOADER
    bindir, libdir = {"alpine": ("usr/local/bin", "usr/local/lib/timebox"),
                      "volume": ("timebox/bin", "timebox/lib")}[layout]
    for sub in ("lib", "usr/bin", "proc", "dev/shm", "tmp", bindir, libdir):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    shutil.copy(real_loader, os.path.join(d, "lib", os.path.basename(MUSL_LOADER)))
    shutil.copy(MUSL_LAUNCHER, os.path.join(d, bindir, "timebox"))
    shutil.copy(MUSL_LIB, os.path.join(d, libdir, "libtimebox-musl.so"))
    shutil.copy(musl_client("blockcli"), os.path.join(d, "usr", "bin", "blockcli"))
    return "/" + bindir + "/timebox", "/usr/bin/blockcli"


def in_root(d, cmd, env_extra=None, timeout=30):
    """Runs cmd chrooted into d with /proc and a /dev/shm mounted (as a container has them:
    the statistics segment lives in /dev/shm), in a mount namespace of its own so that
    nothing stays mounted."""
    if os.geteuid() != 0:
        lib.skip("needs root to chroot into the musl root (unshare -m, chroot)")
    script = ('mount -t proc proc "$0/proc" && mount -t tmpfs shm "$0/dev/shm" && '
              'exec chroot "$0" "$@"')
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}
    env.update(env_extra or {})
    return lib.run(["unshare", "-m", "sh", "-c", script, d] + cmd, env=env,
                   timeout=timeout)


def test_musl_root_alpine_and_init_container_layouts():
    with FaultServer() as srv:
        for layout in ("alpine", "volume"):
            with tempfile.TemporaryDirectory() as d:
                launcher, client = musl_root(d, layout)
                r = in_root(d, [launcher, "run", "--print-env", "--", client])
                lib_in_root = os.path.dirname(os.path.dirname(launcher)) + \
                    ("/lib/timebox/" if layout == "alpine" else "/lib/") + \
                    "libtimebox-musl.so"
                assert r.returncode == 0 and "LD_PRELOAD=%s\n" % lib_in_root in r.stdout, r
                r = in_root(d, [launcher, "run", "--read-timeout", "250ms", "--", client,
                                "--host", "127.0.0.1", "--port", str(srv.port), "--path",
                                "/stall"])
                res = lib.BlockResult(r)
                rec = res.calls()[-1]
                assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), (layout, r)
                assert_fired(rec["ms"], 250, "the first byte timeout in the %s root" % layout)
                one_event(r.stderr, event="timeout", phase="first_byte", limit_ms=250)
                # The init-container way: the application's own command line, with
                # LD_PRELOAD pointing into the shared volume.
                if layout == "volume":
                    r = in_root(d, [client, "--host", "127.0.0.1", "--port", str(srv.port),
                                    "--path", "/stall"],
                                {"LD_PRELOAD": lib_in_root, "TIMEBOX_READ_TIMEOUT": "250ms"})
                    rec = lib.BlockResult(r).calls()[-1]
                    assert rec["errno"] == "ETIMEDOUT", r
                    assert_fired(rec["ms"], 250, "LD_PRELOAD from the volume")
