"""Real programs against the fault server, for the hooks' own contracts: what a cut socket
says with on_timeout = eagain (a program's loop must end, not spin)."""

import os
import shutil

import lib
from lib import FaultServer

for _name in [n for n in os.environ if n.startswith("TIMEBOX_")]:
    del os.environ[_name]

EAGAIN = {"TIMEBOX_READ_TIMEOUT": "500ms", "TIMEBOX_ON_TIMEOUT": "eagain"}


def ends_like_a_timeout(cmd, what):
    """cmd against a stalled server: exits with an error no earlier than the 500 ms read
    timeout and well before the run's time limit (a spinning loop never exits)."""
    lib.require_runs_with_sanitizer([cmd[0], "--version"])
    r = lib.run(cmd, env=lib.preload_env(EAGAIN), timeout=15)
    assert not r.timed_out, "%s still running after 15 s (spinning?): %r" % (what, r)
    assert r.returncode != 0, r
    assert r.elapsed_ms >= 500, "%s ended early: %r" % (what, r)
    assert r.elapsed_ms < 500 + 2500, "%s ended late: %r" % (what, r)
    assert "phase=first_byte" in r.stderr, r
    return r


def test_curl_eagain_ends():
    with FaultServer() as srv:
        r = ends_like_a_timeout(["curl", "-sS", "-o", "/dev/null", srv.url("/stall")], "curl")
        # curl's own words for a failed receive, not a success with a truncated body
        assert "timed out" in r.stderr.lower() or "recv failure" in r.stderr.lower(), r


def test_wget_eagain_ends():
    if shutil.which("wget") is None:
        lib.skip("wget is not installed")
    with FaultServer() as srv:
        ends_like_a_timeout(["wget", "-q", "--tries=1", "-O", "/dev/null", srv.url("/stall")],
                            "wget")
