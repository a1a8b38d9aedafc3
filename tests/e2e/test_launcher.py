"""The launcher end to end: `timebox run [OPTIONS] -- COMMAND` checks its settings, preloads
the library and becomes COMMAND (same process, COMMAND's exit status)."""

import os
import re
import shutil
import subprocess
import tempfile

import lib
from lib import SLACK_MS, FaultServer

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"

OPTIONS = {   # option -> (its variable, a valid value)
    "--connect-timeout": ("TIMEBOX_CONNECT_TIMEOUT", "1s"),
    "--write-timeout": ("TIMEBOX_WRITE_TIMEOUT", "2s"),
    "--first-byte-timeout": ("TIMEBOX_FIRST_BYTE_TIMEOUT", "3s"),
    "--read-timeout": ("TIMEBOX_READ_TIMEOUT", "4s"),
    "--deadline": ("TIMEBOX_DEADLINE", "5s"),
    "--retry-window": ("TIMEBOX_RETRY_WINDOW", "6s"),
    "--scope": ("TIMEBOX_SCOPE", "process"),
    "--on-timeout": ("TIMEBOX_ON_TIMEOUT", "eagain"),
    "--log": ("TIMEBOX_LOG", "off"),
}


# Under a sanitized build the launched command loads the sanitized library, so the
# sanitizer's runtime must come first in LD_PRELOAD, as a user of that build would set it.
SAN = lib.sanitizer_preload()


def launcher(args, extra=None, timeout=15, input=None):
    """Runs `timebox ARGS` in an environment without TIMEBOX_* variables, and without
    LD_PRELOAD but for a sanitized build's runtime (first, before extra's LD_PRELOAD)."""
    env = lib.native_env(extra, clean=True)
    if SAN:
        lib.sanitizer_options(env)
        env["LD_PRELOAD"] = " ".join(SAN + preload_list(env.get("LD_PRELOAD", "")))
    return lib.run([lib.LAUNCHER] + list(args), env=env, timeout=timeout, input=input)


def needs(*argv):
    """The launched program must run with a sanitized build's runtime (see lib)."""
    lib.require_runs_with_sanitizer(list(argv))


def preload_list(value):
    return [p for p in re.split(r"[: ]+", value.strip()) if p]


def same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def assert_curl_cut(res, limit_ms):
    assert not res.timed_out, res
    assert res.returncode == 56, res
    assert "Recv failure: Connection timed out" in res.stderr, res
    assert limit_ms <= res.elapsed_ms < limit_ms + SLACK_MS, res
    events = lib.tb_records(res.stderr, event="timeout")
    assert len(events) == 1, res
    ev = events[0]
    assert ev["phase"] == "first_byte" and int(ev["limit_ms"]) == limit_ms, res
    assert int(ev["elapsed_ms"]) >= limit_ms, res


@lib.timeout(30)
def test_read_timeout_option_reaches_the_library():
    needs("curl", "--version")
    with FaultServer() as srv:
        res = launcher(["run", "--read-timeout", "250ms", "--", "curl", "-sS",
                        srv.url("/stall")], timeout=10)
        assert_curl_cut(res, 250)
        # An option beats the environment: with 20 s in TIMEBOX_READ_TIMEOUT the cut still
        # comes at 250 ms (the "--opt=value" spelling, and no "--" before the command).
        res = launcher(["run", "--read-timeout=250ms", "curl", "-sS", srv.url("/stall")],
                       extra={"TIMEBOX_READ_TIMEOUT": "20s"}, timeout=10)
        assert_curl_cut(res, 250)


@lib.timeout(30)
def test_settings_from_the_environment_reach_the_library():
    needs("curl", "--version")
    with FaultServer() as srv:
        res = launcher(["run", "--", "curl", "-sS", srv.url("/stall")],
                       extra={"TIMEBOX_READ_TIMEOUT": "250ms"}, timeout=10)
        assert_curl_cut(res, 250)


@lib.timeout(30)
def test_launched_program_unchanged():
    needs("curl", "--version")
    with FaultServer() as srv:
        cmd = ["curl", "-sS", srv.url("/ok?order=2")]
        native = lib.run(cmd, env=lib.native_env(), timeout=10)
        res = launcher(["run", "--read-timeout", "1s", "--deadline", "3s", "--"] + cmd)
        assert (res.returncode, res.stdout, res.stderr) == (0, "ok order=2\n", ""), res
        assert (native.returncode, native.stdout) == (res.returncode, res.stdout), native


@lib.timeout(30)
def test_exec_without_an_extra_process():
    # The launcher becomes the command: the command's pid is the pid the test spawned, and
    # its parent is the test itself.
    needs("python3", "-c", "pass")
    env = lib.native_env(clean=True)
    if SAN:
        lib.sanitizer_options(env)
        env["LD_PRELOAD"] = " ".join(SAN)
    proc = subprocess.Popen([lib.LAUNCHER, "run", "--read-timeout", "1s", "--", "python3",
                             "-c", "import os; print(os.getpid(), os.getppid())"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, (out, err)
    pid, ppid = (int(x) for x in out.split())
    assert pid == proc.pid, (pid, proc.pid)
    assert ppid == os.getpid(), (ppid, os.getpid())


@lib.timeout(30)
def test_exit_status_passthrough():
    needs("sh", "-c", "true")
    assert launcher(["run", "--", "sh", "-c", "exit 7"]).returncode == 7
    assert launcher(["run", "--", "true"]).returncode == 0
    assert launcher(["run", "--", "sh", "-c", "exit 255"]).returncode == 255
    # Death by a signal is seen as such by the parent: nothing stood in between.
    res = launcher(["run", "--", "sh", "-c", "kill -TERM $$"])
    assert res.returncode == -15, res
    # Output and arguments pass through untouched, options after COMMAND included.
    res = launcher(["run", "--", "sh", "-c", 'printf "%s|" "$@"', "sh", "--read-timeout",
                    "x y", ""])
    assert (res.returncode, res.stdout) == (0, "--read-timeout|x y||"), res


@lib.timeout(30)
def test_bad_option_value_refused_before_running():
    with tempfile.TemporaryDirectory(prefix="tb-launcher-") as d:
        marker = os.path.join(d, "ran")
        res = launcher(["run", "--read-timeout", "250", "--", "touch", marker])
        assert res.returncode == 2, res
        assert "--read-timeout" in res.stderr and "250" in res.stderr, res
        assert not os.path.exists(marker), "the command ran: %r" % res
        for args in (["--deadline", "-1s"], ["--connect-timeout", "250msx"],
                     ["--scope", "forever"], ["--on-timeout", "never"], ["--frobnicate"],
                     ["--read-timeout"]):
            res = launcher(["run"] + args + ["--", "touch", marker])
            assert res.returncode == 2, (args, res)
            assert args[0] in res.stderr, (args, res)
            assert not os.path.exists(marker), (args, res)


@lib.timeout(30)
def test_bad_environment_refused_before_running():
    with tempfile.TemporaryDirectory(prefix="tb-launcher-") as d:
        marker = os.path.join(d, "ran")
        for var, value in (("TIMEBOX_DEADLINE", "5"), ("TIMEBOX_DEADLINE", "-300ms"),
                           ("TIMEBOX_READ_TIMEOUT", "2 s x"), ("TIMEBOX_SCOPE", "galaxy")):
            res = launcher(["run", "--", "touch", marker], extra={var: value})
            assert res.returncode == 2, (var, value, res)
            assert var in res.stderr, (var, value, res)
            assert not os.path.exists(marker), (var, value, res)


@lib.timeout(30)
def test_ld_preload_appended_once():
    needs("sh", "-c", "true")
    echo = ["run", "--", "sh", "-c", 'echo "$LD_PRELOAD"']
    # Appended after what the user preloads, which stays first.
    res = launcher(echo, extra={"LD_PRELOAD": LIBC})
    assert res.returncode == 0, res
    entries = preload_list(res.stdout)
    assert len(entries) == len(SAN) + 2 and entries[:-1] == SAN + [LIBC], res
    assert same_file(entries[-1], lib.LIB), (entries, lib.LIB)
    first = res.stdout
    # Not added twice: when it is already there (colon- or space-separated, as ld.so
    # accepts both), and when the launcher runs itself.
    for value in (LIBC + ":" + entries[-1], LIBC + " " + entries[-1]):
        res = launcher(echo, extra={"LD_PRELOAD": value})
        assert res.returncode == 0, res
        assert preload_list(res.stdout) == entries, (value, res)
    res = launcher(["run", "--", lib.LAUNCHER] + echo, extra={"LD_PRELOAD": LIBC})
    assert res.stdout == first, res
    # Alone when nothing was preloaded (but a sanitized build's runtime).
    res = launcher(echo)
    assert len(preload_list(res.stdout)) == len(SAN) + 1, res
    assert same_file(preload_list(res.stdout)[-1], lib.LIB), res


@lib.timeout(30)
def test_options_set_their_variables():
    needs("env")
    args = ["run"]
    for opt, (_, value) in OPTIONS.items():
        args += [opt, value]
    res = launcher(args + ["--strict", "--", "env"])
    assert res.returncode == 0, res
    got = dict(l.partition("=")[::2] for l in res.stdout.splitlines() if "=" in l)
    for opt, (var, value) in OPTIONS.items():
        assert got.get(var) == value, (opt, var, got.get(var))
    assert got.get("TIMEBOX_STRICT") == "1", got.get("TIMEBOX_STRICT")


@lib.timeout(30)
def test_version():
    res = launcher(["--version"])
    assert res.returncode == 0, res
    assert re.fullmatch(r"timebox \d+\.\d+\.\d+\n", res.stdout), res


@lib.timeout(30)
def test_help_mentions_every_option():
    res = launcher(["--help"])
    assert res.returncode == 0, res
    for opt, (var, _) in OPTIONS.items():
        assert opt in res.stdout, opt
        assert var in res.stdout, var
    for word in ("--strict", "TIMEBOX_STRICT", "--help", "--version", "timebox run",
                 "TIMEBOX_LIBRARY"):
        assert word in res.stdout, word
    assert launcher(["-h"]).stdout == res.stdout


@lib.timeout(30)
def test_command_cannot_run():
    res = launcher(["run", "--", "/nonexistent"])
    assert res.returncode == 127, res
    assert "/nonexistent" in res.stderr, res
    res = launcher(["run", "--", "no-such-command-for-timebox"])
    assert res.returncode == 127, res
    with tempfile.TemporaryDirectory(prefix="tb-launcher-") as d:
        script = os.path.join(d, "not-executable")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o644)
        res = launcher(["run", "--", script])
        assert res.returncode == 126, res
    # No command at all is a usage error.
    assert launcher(["run"]).returncode == 2
    assert launcher(["run", "--read-timeout", "1s", "--"]).returncode == 2


@lib.timeout(30)
def test_library_override():
    # TIMEBOX_LIBRARY names the library to preload.
    needs("sh", "-c", "true")
    with tempfile.TemporaryDirectory(prefix="tb-launcher-") as d:
        copy = os.path.join(d, "libtimebox.so")
        shutil.copyfile(lib.LIB, copy)
        res = launcher(["run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
                       extra={"TIMEBOX_LIBRARY": copy})
        assert res.returncode == 0, res
        assert preload_list(res.stdout) == SAN + [copy], res
