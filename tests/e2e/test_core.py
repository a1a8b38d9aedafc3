"""The core contract, end to end: unmodified programs under the preload against the fault
server. Every timing assertion has a strict lower bound (a timeout never fires early) and a
generous upper bound (it does fire, on a loaded machine); precision is the benchmark's job."""

import hashlib
import os
import subprocess
import tempfile

import lib
from lib import FaultServer

lib.scrub_timebox_env()

ERRNOCHECK = lib.client("errnocheck")

# The seed's InventoryClient: connect 100 ms, read 250 ms, a 300 ms deadline.
SEED = {"TIMEBOX_CONNECT_TIMEOUT": "100ms", "TIMEBOX_READ_TIMEOUT": "250ms",
        "TIMEBOX_DEADLINE": "300ms"}


def assert_fired(ms, limit_ms, what, upper=None):
    """ms is when an expiry was seen: never before limit_ms, and not much after."""
    upper = lib.slack(limit_ms) if upper is None else upper
    assert ms >= limit_ms, "%s fired early: %.1f ms < %d ms" % (what, ms, limit_ms)
    assert ms < upper, "%s fired late: %.1f ms >= %d ms" % (what, ms, upper)


def one_event(stderr, **fields):
    """The only timebox line of stderr; asserts it carries fields."""
    lines = lib.tb_records(stderr)
    assert len(lines) == 1, "expected one timebox line, got %r" % stderr
    for key, value in fields.items():
        assert lines[0].get(key) == str(value), (key, value, lines[0])
    return lines[0]


def no_event(stderr):
    assert "timebox:" not in stderr, "unexpected timebox output: %r" % stderr


def call(srv, path, env=None, preload=True, **kw):
    """One blockcli call of path; returns (its last attempt's record, the BlockResult)."""
    args = ["--port", srv.port, "--path", path] + kw.pop("args", [])
    res = lib.blockcli(args, preload=preload, env_extra=env, **kw)
    assert res.records, res
    return res.calls()[-1], res


def errnocheck(mode, port, env, *args):
    """Runs errnocheck MODE under the preload; returns (steps by name, Result)."""
    r = lib.run([ERRNOCHECK, mode, "--port", str(port)] + [str(a) for a in args],
                env=lib.preload_env(env))
    steps = {}
    for line in r.stdout.splitlines():
        rec = lib.parse_logfmt(line)
        if "step" in rec and "ms" in rec:
            rec["ms"] = float(rec["ms"])
            steps[rec["step"]] = rec
    assert r.returncode == 0 and r.stdout.rstrip().endswith("result=ok"), r
    return steps, r


# ---- 1. the seed's table ------------------------------------------------------------------

def test_seed_inventory_client_table():
    with FaultServer() as srv:
        rec, res = call(srv, "/ok", SEED)
        assert rec["result"] == "ok" and rec["status"] == 200, res
        assert rec["ms"] < 250, res
        no_event(res.run.stderr)

        rec, res = call(srv, "/delay?ms=1000", SEED)
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        # first_byte, not the deadline: it fires before 300 ms.
        assert 250 <= rec["ms"] < 300, res
        one_event(res.run.stderr, event="timeout", phase="first_byte", limit_ms=250)

        rec, res = call(srv, "/drip?ms=100&n=10", SEED)
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        assert_fired(rec["ms"], 300, "the deadline")
        assert 0 < rec["bytes"] < 10, res
        one_event(res.run.stderr, event="timeout", phase="deadline", limit_ms=300)


def test_seed_table_natively():
    with FaultServer() as srv:
        for path, at_least in (("/ok", 0), ("/delay?ms=1000", 1000),
                               ("/drip?ms=100&n=10", 1000)):
            rec, res = call(srv, path, preload=False)
            assert rec["result"] == "ok" and rec["status"] == 200, (path, res)
            assert at_least <= rec["ms"] < at_least + 1500, (path, res)


# ---- 2. a read timeout is not a call limit -------------------------------------------------

def test_experiment_a_drip_needs_a_deadline():
    with FaultServer() as srv:
        rec, res = call(srv, "/drip?ms=400&n=10", {"TIMEBOX_READ_TIMEOUT": "1s"})
        assert rec["result"] == "ok" and rec["bytes"] == 10, res
        assert_fired(rec["ms"], 4000, "the drip")
        assert res.run.stderr == "", res

        rec, res = call(srv, "/drip?ms=400&n=10",
                        {"TIMEBOX_READ_TIMEOUT": "1s", "TIMEBOX_DEADLINE": "1500ms"})
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        assert_fired(rec["ms"], 1500, "the deadline")
        one_event(res.run.stderr, event="timeout", phase="deadline", limit_ms=1500)


# ---- 3. connect ----------------------------------------------------------------------------

def test_connect_timeout_on_blackhole():
    with FaultServer() as srv:
        res = lib.blockcli(["--port", srv.blackhole_port, "--connect-only"],
                           env_extra={"TIMEBOX_CONNECT_TIMEOUT": "100ms"})
        rec = res.calls()[-1]
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        assert_fired(rec["ms"], 100, "the connect timeout")
        one_event(res.run.stderr, event="timeout", phase="connect", limit_ms=100,
                  dest="127.0.0.1:%d" % srv.blackhole_port)


def test_refused_connect_fails_at_once():
    port = lib.free_port()
    res = lib.blockcli(["--port", port, "--path", "/ok"],
                       env_extra={"TIMEBOX_CONNECT_TIMEOUT": "100ms",
                                  "TIMEBOX_DEADLINE": "300ms"})
    rec = res.calls()[-1]
    assert (rec["result"], rec["errno"]) == ("error", "ECONNREFUSED"), res
    assert rec["ms"] < 100, res
    assert res.run.stderr == "", res


# ---- 4. retries fit inside the deadline ----------------------------------------------------

def test_retries_inside_the_deadline():
    with FaultServer() as srv:
        srv.reset_stats()
        args = ["--attempts", 3]
        path = "/delay?ms=1200&key="

        # Seed question 4: ~300 ms, and the downstream ran the request twice, not three times.
        _, res = call(srv, path + "dl", SEED, args=args)
        assert [r["errno"] for r in res.records] == ["ETIMEDOUT"] * 3, res
        assert_fired(res.total_ms, 300, "the deadline", upper=600)
        assert_fired(res.records[0]["ms"], 250, "the first attempt's first_byte")
        events = [(e["event"], e["phase"]) for e in lib.tb_records(res.run.stderr)]
        assert events == [("timeout", "first_byte"), ("timeout", "deadline"),
                          ("reject", "deadline")], res
        assert lib.tb_records(res.run.stderr)[2]["reason"] == "retry_window", res

        # Without the deadline each attempt waits its full 250 ms: ~752 ms, 3 requests.
        no_deadline = dict(SEED)
        del no_deadline["TIMEBOX_DEADLINE"]
        _, res = call(srv, path + "nodl", no_deadline, args=args)
        assert [r["errno"] for r in res.records] == ["ETIMEDOUT"] * 3, res
        assert all(r["ms"] >= 250 for r in res.records), res
        assert_fired(res.total_ms, 750, "three read timeouts")

        # No retry window: the third attempt opens a fresh budget.
        _, res = call(srv, path + "rw0", dict(SEED, TIMEBOX_RETRY_WINDOW="0"), args=args)
        assert [r["errno"] for r in res.records] == ["ETIMEDOUT"] * 3, res
        assert_fired(res.records[2]["ms"], 250, "the third attempt's first_byte")
        assert_fired(res.total_ms, 550, "two budgets")

        # Every connection has closed: the server has read every request it was sent.
        srv.wait_idle(timeout=10)
        assert (srv.count("dl"), srv.count("nodl"), srv.count("rw0")) == (2, 3, 3)


# ---- 5. a timed-out socket is dead -------------------------------------------------------

def test_timed_out_socket_is_never_reused():
    with FaultServer() as srv:
        steps, r = errnocheck("reuse", srv.port, {"TIMEBOX_READ_TIMEOUT": "200ms"},
                              "--path", "/delay?ms=400", "--wait-ms", 600)
        assert_fired(steps["read"]["ms"], 200, "the read timeout")
        for name in ("send", "write", "read_again", "recv_again", "read_late", "recv_late"):
            assert (steps[name]["rc"], steps[name]["errno"]) == ("-1", "ETIMEDOUT"), r
            assert steps[name]["ms"] < 100, ("a dead socket must fail at once", r)
        assert "so_error=ETIMEDOUT" in r.stdout, r
        one_event(r.stderr, event="timeout", phase="first_byte", limit_ms=200)


# ---- 6. keep-alive -------------------------------------------------------------------------

def test_keep_alive_connection_resting_is_not_cut():
    with FaultServer() as srv:
        srv.reset_stats()
        res = lib.blockcli(["--port", srv.port, "--path", "/ok", "--calls", 20,
                            "--pause-ms", 300],
                           env_extra={"TIMEBOX_READ_TIMEOUT": "250ms",
                                      "TIMEBOX_DEADLINE": "300ms"})
        assert res.ok, res
        assert [(r["result"], r["attempt"]) for r in res.calls()] == [("ok", 1)] * 20, res
        assert res.run.stderr == "", res
        stats = srv.wait_idle()
        assert stats["connections"] == 1 and stats["requests"] == 20, stats


# ---- 7. a slow program ---------------------------------------------------------------------

def test_slow_program_with_data_queued_is_not_cut():
    """The program naps 1 s before each read of at most 64 KiB of a 60000-byte body that
    the server queued at once: no read ever waits for the peer, so nothing is cut."""
    with FaultServer() as srv:
        rec, res = call(srv, "/big?bytes=60000", {"TIMEBOX_READ_TIMEOUT": "250ms"},
                        args=["--read-sleep-ms", 1000, "--chunk", 65536])
        assert rec["result"] == "ok" and rec["bytes"] == 60000, res
        assert rec["ms"] >= 2000, ("expected at least two 1 s naps", res)
        assert res.run.stderr == "", res


# ---- 8. FORTIFY ----------------------------------------------------------------------------

def test_fortify_client_times_out():
    with FaultServer() as srv:
        rec, res = call(srv, "/stall", {"TIMEBOX_READ_TIMEOUT": "250ms"}, fortify=True)
        assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), res
        assert_fired(rec["ms"], 250, "the read timeout")
        one_event(res.run.stderr, event="timeout", phase="first_byte", limit_ms=250)
    # Only a program that imports the _chk entry points proves the hooks on that path.
    syms = lib.run(["nm", "-D", "--undefined-only", lib.BLOCKCLI_FORTIFY])
    assert syms.returncode == 0, syms
    imported = {line.split()[-1].split("@")[0] for line in syms.stdout.splitlines()}
    assert imported & {"__read_chk", "__recv_chk"}, \
        "blockcli_fortify imports neither __read_chk nor __recv_chk: %s" % sorted(imported)


def test_chk_entry_points_are_governed():
    with FaultServer() as srv:
        steps, r = errnocheck("chk", srv.port, {"TIMEBOX_READ_TIMEOUT": "250ms"})
        for name in ("read_chk", "recv_chk"):
            assert (steps[name]["rc"], steps[name]["errno"]) == ("-1", "ETIMEDOUT"), r
            assert_fired(steps[name]["ms"], 250, name)
        assert [e["phase"] for e in lib.tb_records(r.stderr)] == ["first_byte"] * 2, r


# ---- 9. the program's own poll loops -------------------------------------------------------

def test_idle_sums_across_poll_slices():
    with FaultServer() as srv:
        for extra in (["--poll-slice-ms", 1000], ["--select"]):
            rec, res = call(srv, "/stall", {"TIMEBOX_READ_TIMEOUT": "2s"}, args=extra)
            assert (rec["result"], rec["errno"]) == ("error", "ETIMEDOUT"), (extra, res)
            assert_fired(rec["ms"], 2000, "the read timeout", upper=3000)
            one_event(res.run.stderr, event="timeout", phase="first_byte", limit_ms=2000)


# ---- 10. on_timeout=eagain -----------------------------------------------------------------

def test_on_timeout_eagain():
    with FaultServer() as srv:
        rec, res = call(srv, "/stall", {"TIMEBOX_READ_TIMEOUT": "250ms",
                                        "TIMEBOX_ON_TIMEOUT": "eagain"})
        assert (rec["result"], rec["errno"]) == ("error", "EAGAIN"), res
        assert_fired(rec["ms"], 250, "the read timeout")
        one_event(res.run.stderr, event="timeout", phase="first_byte")


# ---- 11. untracked fds ---------------------------------------------------------------------

ALL_LIMITS = {"TIMEBOX_CONNECT_TIMEOUT": "1ms", "TIMEBOX_WRITE_TIMEOUT": "1ms",
              "TIMEBOX_FIRST_BYTE_TIMEOUT": "1ms", "TIMEBOX_READ_TIMEOUT": "1ms",
              "TIMEBOX_DEADLINE": "1ms", "TIMEBOX_RETRY_WINDOW": "1h"}


def test_untracked_fds_are_untouched():
    data = os.urandom(5 * 1024 * 1024)
    digest = hashlib.sha256(data).hexdigest()
    with tempfile.TemporaryDirectory(prefix="tb-core-") as d:
        path = os.path.join(d, "random")
        with open(path, "wb") as f:
            f.write(data)
        for scope in ("call", "process"):
            env = lib.preload_env(dict(ALL_LIMITS, TIMEBOX_SCOPE=scope))
            for cmd, stdin in ((["cat", path], None),
                               (["dd", "bs=65536", "status=none"], data)):
                p = subprocess.run(cmd, env=env, input=stdin, capture_output=True,
                                   timeout=30, stdin=None if stdin else subprocess.DEVNULL)
                assert p.returncode == 0, (cmd, scope, p.stderr)
                assert hashlib.sha256(p.stdout).hexdigest() == digest, (cmd, scope)
                assert p.stderr == b"", (cmd, scope, p.stderr)


# ---- 12. errno -----------------------------------------------------------------------------

def test_errno_preserved_on_success():
    with FaultServer() as srv:
        env = {"TIMEBOX_CONNECT_TIMEOUT": "1s", "TIMEBOX_WRITE_TIMEOUT": "1s",
               "TIMEBOX_READ_TIMEOUT": "1s", "TIMEBOX_DEADLINE": "2s"}
        _, r = errnocheck("errno", srv.port, env)
        assert "errno ok" in r.stdout.splitlines(), r
        assert r.stderr == "", r



# A governed send that cannot block is made as its system call (real.h, tb_real_send_nowait):
# what libc's send does around it must not be lost.
SENDCHECK = lib.client("sendcheck")
SENDWRAP = os.path.join(lib.BUILD, "tests", "e2e", "sendwrap.so")
LIMITS = {"TIMEBOX_CONNECT_TIMEOUT": "1s", "TIMEBOX_WRITE_TIMEOUT": "1s",
          "TIMEBOX_READ_TIMEOUT": "1s", "TIMEBOX_DEADLINE": "2s"}


def test_send_is_still_a_cancellation_point():
    """A thread with a cancellation request pending ends at its send, before anything is
    sent: natively, and under timebox."""
    native = lib.run([SENDCHECK, "cancel"], env=lib.native_env())
    governed = lib.run([SENDCHECK, "cancel"], env=lib.preload_env(LIMITS))
    assert native.returncode == 0 and native.stdout.strip() == "canceled=1 bytes=0", native
    assert governed.returncode == 0 and governed.stdout == native.stdout, governed
    assert governed.stderr == "", governed


def test_send_wrapped_by_a_later_library_reaches_it():
    """A library preloaded after timebox that wraps send (a tracer, socket_wrapper) still
    sees every send of a governed socket."""
    env = lib.preload_env(LIMITS)
    env["LD_PRELOAD"] += " " + SENDWRAP
    r = lib.run([SENDCHECK, "count"], env=env)
    assert r.returncode == 0 and r.stdout.strip() == "sends=10 wrapped=10", r
    assert r.stderr == "", r


def test_nonblocking_reads_and_sends_are_still_cancellation_points():
    """On a non-blocking socket timebox makes reads and sends as their system calls (they
    cannot block): a thread with a cancellation request pending still ends at read() and
    at send(), before anything moves, as natively."""
    native = lib.run([SENDCHECK, "nbcancel"], env=lib.native_env())
    governed = lib.run([SENDCHECK, "nbcancel"], env=lib.preload_env(LIMITS))
    want = "read: canceled=1 bytes=0 send: canceled=1 bytes=0"
    assert native.returncode == 0 and native.stdout.strip() == want, native
    assert governed.returncode == 0 and governed.stdout == native.stdout, governed
    assert governed.stderr == "", governed


def test_nonblocking_calls_wrapped_by_a_later_library_reach_it():
    """A library preloaded after timebox that wraps send, read and recv sees every one of
    them on a non-blocking governed socket too."""
    env = lib.preload_env(LIMITS)
    env["LD_PRELOAD"] += " " + SENDWRAP
    r = lib.run([SENDCHECK, "nbcount"], env=env)
    assert r.returncode == 0, r
    assert r.stdout.strip() == "sends=10 wrapped=10 reads=10 rwrapped=10", r
    assert r.stderr == "", r


def test_gathered_send_moves_every_byte():
    """writev and sendmsg of 3 MB in 100 pieces through a 64 KB send buffer: tried without
    blocking, then the rest under a wait; every byte arrives, in order, as natively."""
    native = lib.run([SENDCHECK, "gather"], env=lib.native_env(), timeout=60)
    governed = lib.run([SENDCHECK, "gather"], env=lib.preload_env(LIMITS), timeout=60)
    want = "writev=3145728 sendmsg=3145728 same=1"
    assert native.returncode == 0 and native.stdout.strip() == want, native
    assert governed.returncode == 0 and governed.stdout.strip() == want, governed
    assert governed.stderr == "", governed


def test_gathered_send_to_a_stalled_reader_is_cut():
    """The rest of a writev that the try could not move waits under the write timeout:
    a reader that never reads gets it cut, never before the limit."""
    r = lib.run([SENDCHECK, "stall"], env=lib.preload_env({"TIMEBOX_WRITE_TIMEOUT": "500ms"}))
    rec = lib.parse_logfmt(r.stdout.strip())
    assert r.returncode == 0 and "ms" in rec, r
    assert_fired(float(rec["ms"]), 500, "the stalled writev")
    assert rec["rc"] != "3145728", r  # cut: the bytes that moved, or -1 ETIMEDOUT
    assert int(rec["rc"]) > 0 or rec["errno"] == "Connection timed out", r
    one_event(r.stderr, event="timeout", phase="write")

# ---- 13. configuration errors --------------------------------------------------------------

def config_error(stderr, name, value):
    line = one_event(stderr, event="config_error", name=name, value=value)
    assert line.get("error"), line
    return line


def test_config_errors_are_reported_and_ignored():
    with FaultServer() as srv:
        # A valid setting keeps the library active, so the bad one could be applied.
        base = {"TIMEBOX_CONNECT_TIMEOUT": "1s"}
        rec, res = call(srv, "/ok", dict(base, TIMEBOX_READ_TIMEOUT="250"))
        assert rec["result"] == "ok", res
        line = config_error(res.run.stderr, "TIMEBOX_READ_TIMEOUT", "250")
        assert line.get("effect") == "setting ignored", line
        assert 'value="250"' in res.run.stderr, res

        rec, res = call(srv, "/delay?ms=400", dict(base, TIMEBOX_READ_TIMEOUT="250"))
        assert rec["result"] == "ok" and rec["ms"] >= 400, ("the bad setting was applied", res)
        config_error(res.run.stderr, "TIMEBOX_READ_TIMEOUT", "250")

        for value in ("abc", "250msx", "-5ms", "99999999999999999999s", ""):
            rec, res = call(srv, "/ok", dict(base, TIMEBOX_READ_TIMEOUT=value))
            assert rec["result"] == "ok", (value, res)
            config_error(res.run.stderr, "TIMEBOX_READ_TIMEOUT", value)

        rec, res = call(srv, "/ok", dict(base, TIMEBOX_READ_TIMOUT="1s"))
        assert rec["result"] == "ok", res
        line = config_error(res.run.stderr, "TIMEBOX_READ_TIMOUT", "1s")
        assert "TIMEBOX_READ_TIMEOUT" in line["error"], line


def test_strict_refuses_to_run():
    with FaultServer() as srv:
        srv.reset_stats()
        res = lib.blockcli(["--port", srv.port, "--path", "/ok?key=strict"],
                           env_extra={"TIMEBOX_READ_TIMEOUT": "250", "TIMEBOX_STRICT": "1"})
        assert res.run.returncode == 2, res
        assert res.records == [], res
        config_error(res.run.stderr, "TIMEBOX_READ_TIMEOUT", "250")
        assert srv.count("strict") == 0
        assert srv.stats()["connections"] == 0


# ---- 14. logging ---------------------------------------------------------------------------

def test_log_targets():
    with FaultServer() as srv:
        stall = {"TIMEBOX_READ_TIMEOUT": "250ms"}
        rec, res = call(srv, "/stall", dict(stall, TIMEBOX_LOG="off"))
        assert rec["errno"] == "ETIMEDOUT", res
        assert res.run.stderr == "", res

        with tempfile.TemporaryDirectory(prefix="tb-core-") as d:
            path = os.path.join(d, "timebox.log")
            rec, res = call(srv, "/stall", dict(stall, TIMEBOX_LOG=path))
            assert rec["errno"] == "ETIMEDOUT", res
            assert res.run.stderr == "", res
            with open(path) as f:
                one_event(f.read(), event="timeout", phase="first_byte", limit_ms=250)

        rec, res = call(srv, "/ok", stall, args=["--calls", 3])
        assert res.ok, res
        assert res.run.stderr == "", res


# ---- 15. nothing configured ----------------------------------------------------------------

def test_nothing_configured_changes_nothing():
    with FaultServer() as srv:
        res = lib.blockcli(["--port", srv.port, "--path", "/stall"], env_extra={},
                           wrapper=["timeout", "1"])
        assert res.run.returncode == 124, res
        assert res.run.elapsed_ms >= 1000, res
        assert res.records == [], res
        assert res.run.stderr == "", res


# ---- 16. fork ------------------------------------------------------------------------------

def test_forked_child_is_governed():
    with FaultServer() as srv:
        steps, r = errnocheck("fork", srv.port, {"TIMEBOX_READ_TIMEOUT": "300ms"})
        child = steps["child_read"]
        assert (child["rc"], child["errno"]) == ("-1", "ETIMEDOUT"), r
        assert_fired(child["ms"], 300, "the child's read timeout")
        assert "step=parent_fresh_call status=200" in r.stdout, r
        one_event(r.stderr, event="timeout", phase="first_byte", limit_ms=300)


# ---- 17. dup, close, dup2 ------------------------------------------------------------------

def test_dup_stays_governed_and_dup2_releases():
    with FaultServer() as srv:
        steps, r = errnocheck("dup", srv.port, {"TIMEBOX_READ_TIMEOUT": "200ms"},
                              "--wait-ms", 600)
        assert (steps["read_dup"]["rc"], steps["read_dup"]["errno"]) == ("-1", "ETIMEDOUT"), r
        assert_fired(steps["read_dup"]["ms"], 200, "the read timeout on the dup")
        assert steps["pipe_idle_poll"]["rc"] == "0", r
        assert steps["pipe_idle_poll"]["ms"] >= 600, r
        assert steps["pipe_write"]["rc"] == "5" and steps["pipe_read"]["rc"] == "5", r
        one_event(r.stderr, event="timeout", phase="first_byte", limit_ms=200)
