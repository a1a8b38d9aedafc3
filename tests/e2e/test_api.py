"""The deadline API (include/timebox.h, timebox_deadline_begin(3)): one C program built
against the header, run without the library (unchanged: no-op fallbacks) and with it
(begin(300) bounds a read from a stalled server at 300 ms, never earlier; a nested
begin(1000) keeps the 300; end() restores; remaining_ms() decreases)."""

import lib
from lib import FaultServer

lib.scrub_timebox_env()

APICLI = lib.client("apicli")
STALL_MS = 1500
# Any limit makes the library govern the program's sockets; this one never fires here.
GOVERN = {"TIMEBOX_READ_TIMEOUT": "10s"}


def steps(stdout):
    out = {}
    for line in stdout.splitlines():
        rec = lib.parse_logfmt(line)
        if "step" in rec:
            out[rec["step"]] = rec
    return out


def num(rec, key):
    return float(rec[key])


def test_api_without_the_library_changes_nothing():
    with FaultServer() as fs:
        r = lib.run([APICLI, "--port", str(fs.port), "--stall-ms", str(STALL_MS)],
                    env=lib.native_env(), timeout=20)
        assert r.returncode == 0, r
        s = steps(r.stdout)
        for name in ("none", "begin300", "begin1000", "read", "end1000", "spent", "end300",
                     "after"):
            assert s[name]["remaining"] == "-1", (name, s[name])
        assert s["begin300"]["rc"] == "0" and s["begin1000"]["rc"] == "0", s
        # The stalled answer arrives: nothing was cut.
        assert int(s["read"]["rc"]) > 0 and num(s["read"], "ms") >= STALL_MS, s["read"]
        assert int(s["spent"]["rc"]) > 0, s["spent"]
        assert int(s["after"]["rc"]) > 0, s["after"]
        assert "timebox:" not in r.stderr, r.stderr


def test_api_bounds_a_stalled_read_and_nests():
    with FaultServer() as fs:
        r = lib.run([APICLI, "--port", str(fs.port), "--stall-ms", str(STALL_MS)],
                    env=lib.preload_env(GOVERN), timeout=20)
        assert r.returncode == 0, r
        s = steps(r.stdout)
        assert s["none"]["remaining"] == "-1", s["none"]
        outer = int(s["begin300"]["remaining"])
        assert 0 < outer <= 300, s["begin300"]
        # Nested begin(1000) inside begin(300): the smaller deadline stays.
        inner = int(s["begin1000"]["remaining"])
        assert 0 < inner <= outer, s["begin1000"]
        # The read is cut at the 300 ms, never earlier.
        assert s["read"]["rc"] == "-1" and s["read"]["errno"] == "ETIMEDOUT", s["read"]
        ms = num(s["read"], "ms")
        assert ms >= 300, "the API's deadline fired early: %.1f ms" % ms
        assert ms < lib.slack(300), "the API's deadline fired late: %.1f ms" % ms
        assert s["read"]["remaining"] == "0", s["read"]
        # end() restores the outer level: spent, so the next request is not even sent.
        assert s["end1000"]["remaining"] == "0", s["end1000"]
        assert s["spent"]["rc"] == "-1" and s["spent"]["errno"] == "ETIMEDOUT", s["spent"]
        assert num(s["spent"], "ms") - ms < 100, (s["read"], s["spent"])
        # The outer end: no deadline, and calls go through again.
        assert s["end300"]["remaining"] == "-1", s["end300"]
        assert int(s["after"]["rc"]) > 0, s["after"]
        cuts = lib.tb_records(r.stderr, event="timeout", phase="deadline")
        assert cuts and all(c.get("budget") == "api" for c in cuts), r.stderr
        # Two requests reached the server (the stalled one and the last), not the spent one.
        assert fs.stats()["requests"] == 2, fs.stats()
