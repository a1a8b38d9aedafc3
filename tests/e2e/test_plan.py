"""`timebox plan` end to end: the seed's bench answers as the command prints them, and the
plan against reality - the same limits given to blockcli under the library, against the
fault server, must end when the plan said (never earlier) and execute the request as many
times."""

import json
import os
import tempfile

import lib
from lib import FaultServer

lib.scrub_timebox_env()


def plan(*args, fmt="json"):
    """Runs `timebox plan ARGS`; returns the parsed JSON (fmt json) or the Result (text)."""
    r = lib.run([lib.LAUNCHER, "plan"] + [str(a) for a in args]
                + (["--format", "json"] if fmt == "json" else []),
                env=lib.native_env(clean=True), timeout=15)
    if fmt != "json":
        return r
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def env_of(options):
    """The TIMEBOX_* variables that `timebox run` would set for these options."""
    return {"TIMEBOX_" + opt[2:].upper().replace("-", "_"): value
            for opt, value in options.items()}


def flags(options):
    return [x for opt, value in options.items() for x in (opt, value)]


# ---- the seed's answers --------------------------------------------------------------------

def test_plan_seed_teaser():
    # First byte after 20 ms, then 1 byte every 150 ms x 20; read 250 ms, no deadline.
    p = plan("--read-timeout", "250ms", "--downstream", "first=20ms,drip=150ms/20")
    assert p["outcome"] == "ok" and p["errno"] is None, p
    assert p["ended_by"] == "none" and p["executed"] == 1, p
    assert 3000 <= p["end_ms"] <= 3030, p
    assert not [e for e in p["timeline"] if e["event"] == "expired"], p
    r = plan("--read-timeout", "250ms", "--downstream", "first=20ms,drip=150ms/20", fmt="text")
    assert r.returncode == 0, r
    assert "outcome: ok at t=3021ms" in r.stdout, r
    assert "16 more bytes, one every 150ms" in r.stdout, r


def test_plan_seed_question_4():
    base = ["--read-timeout", "250ms", "--retries", "2", "--reuse",
            "--downstream", "stall=1200ms"]
    p = plan(*base)
    assert (p["outcome"], p["errno"], p["ended_by"]) == ("failed", "ETIMEDOUT", "first_byte"), p
    assert p["end_ms"] == 752 and p["executed"] == 3 and p["attempts"] == 3, p

    p = plan("--deadline", "300ms", *base)
    assert (p["outcome"], p["ended_by"]) == ("failed", "deadline"), p
    assert p["end_ms"] == 300 and p["executed"] == 2, p
    assert p["timeline"][-1]["event"] == "refused", p
    r = plan("--deadline", "300ms", *base, fmt="text")
    assert "downstream executed the request: 2 times" in r.stdout, r


def test_plan_seed_question_5():
    p = plan("--reuse", "--downstream", "down")
    assert p["end_ms"] == 924600 and p["ended_by"] == "kernel:tcp_retries2", p
    assert p["executed"] == 0 and p["errno"] == "ETIMEDOUT" and not p["governed"], p
    assert "924.6 s" in p["kernel_note"], p
    p = plan("--downstream", "down")
    assert p["end_ms"] == 127000 and p["ended_by"] == "kernel:tcp_syn_retries", p
    r = plan("--downstream", "down", fmt="text")
    assert "no timebox limit: the kernel's default ends it after ~127 s" in r.stdout, r


def test_plan_usage_errors():
    for args in (["--downstream", "bogus"], ["--read-timeout", "250", "--downstream", "ok=1ms"],
                 [], ["--downstream", "ok=1ms", "--dest", "127.0.0.1:80"],
                 ["--downstream", "ok=1ms", "--retries", "-1"],
                 ["--downstream", "ok=1ms", "--frobnicate", "1"]):
        r = plan(*args, fmt="text")
        assert r.returncode == 2 and r.stdout == "" and "timebox" in r.stderr, (args, r)
    r = plan("--help", fmt="text")
    assert r.returncode == 0 and "--downstream" in r.stdout, r


def test_plan_reads_the_config_rule():
    with tempfile.TemporaryDirectory() as d:
        conf = os.path.join(d, "t.conf")
        with open(conf, "w") as f:
            f.write('defaults = { read_timeout = "5s"; };\n'
                    'destinations = ( { match = "127.0.0.1:8080"; read_timeout = "250ms";'
                    ' deadline = "300ms"; } );\n')
        common = ["--config", conf, "--retries", "2", "--downstream", "stall=1200ms"]
        p = plan("--dest", "127.0.0.1:8080", *common)
        assert p["end_ms"] == 300 and p["executed"] == 2, p
        p = plan("--dest", "127.0.0.1:9090", *common)
        # Another destination: the defaults' 5 s read timeout outlasts the stall.
        assert (p["outcome"], p["end_ms"], p["executed"]) == ("ok", 1201, 1), p
        # An option beats the file, as with `timebox run`.
        p = plan("--dest", "127.0.0.1:8080", "--deadline", "off", *common)
        assert p["end_ms"] == 753 and p["executed"] == 3, p


# ---- the plan against reality ----------------------------------------------------------------

def check_against_reality(srv, options, downstream, path, attempts, key):
    """Plans then runs blockcli with the same limits; the real end is never before the
    plan's, within the usual slack after it, and the executions match."""
    p = plan(*flags(options), "--retries", attempts - 1, "--rtt", "0ms",
             "--downstream", downstream)
    sep = "&" if "?" in path else "?"
    res = lib.blockcli(["--port", srv.port, "--path", path + sep + "key=" + key,
                        "--attempts", attempts], env_extra=env_of(options))
    assert res.total_ms is not None, res
    predicted = p["end_ms"]
    assert res.total_ms >= predicted, ("earlier than planned", predicted, res)
    assert res.total_ms < lib.slack(predicted), ("later than planned", predicted, res)
    assert len(res.records) == p["attempts"], (p, res)
    last = res.calls()[-1]
    if p["outcome"] == "ok":
        assert last["result"] == "ok", (p, res)
    else:
        assert (last["result"], last["errno"]) == ("error", p["errno"]), (p, res)
    srv.wait_idle(timeout=10)
    assert srv.count(key) == p["executed"], (p, res, srv.count(key))
    return p, res


def test_plan_matches_reality_question_4():
    with FaultServer() as srv:
        p, _ = check_against_reality(srv, {"--read-timeout": "250ms", "--deadline": "300ms"},
                                     "stall=1200ms", "/delay?ms=1200", 3, "plan-dl")
        assert (p["end_ms"], p["executed"]) == (300, 2), p
        p, _ = check_against_reality(srv, {"--read-timeout": "250ms"},
                                     "stall=1200ms", "/delay?ms=1200", 3, "plan-nodl")
        assert (p["end_ms"], p["executed"]) == (750, 3), p


def test_plan_matches_reality_drip():
    # The fault server's /drip sends its headers at once, then one byte per interval.
    with FaultServer() as srv:
        p, _ = check_against_reality(srv, {"--read-timeout": "250ms"},
                                     "first=0ms,drip=150ms/6", "/drip?ms=150&n=6", 1,
                                     "plan-drip")
        assert (p["outcome"], p["end_ms"]) == ("ok", 900), p
        p, _ = check_against_reality(srv, {"--read-timeout": "1s", "--deadline": "500ms"},
                                     "first=0ms,drip=200ms/10", "/drip?ms=200&n=10", 1,
                                     "plan-dripdl")
        assert (p["ended_by"], p["end_ms"]) == ("deadline", 500), p


def test_plan_matches_reality_connect_timeout():
    with FaultServer() as srv:
        options = {"--connect-timeout": "100ms"}
        p = plan(*flags(options), "--retries", 1, "--rtt", "0ms", "--downstream", "down")
        assert (p["ended_by"], p["end_ms"], p["executed"]) == ("connect", 200, 0), p
        res = lib.blockcli(["--port", srv.blackhole_port, "--path", "/ok", "--attempts", 2],
                           env_extra=env_of(options))
        assert [r["errno"] for r in res.records] == ["ETIMEDOUT"] * 2, res
        assert p["end_ms"] <= res.total_ms < lib.slack(p["end_ms"]), (p, res)
