"""The configuration file end to end: per-destination rules in one program, hostname rules
learned from the program's own lookups, enabled = false, deadline = "off", unix: rules, and
how a broken file is reported by the launcher, the bare library and strict mode."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import lib
from lib import FaultServer

lib.scrub_timebox_env()

# The real interpreter: a pyenv shim would run the library in every wrapper process too.
PYTHON = os.path.realpath(sys.executable)

# A client with no timeouts of its own: one GET per argument ("host:port/path" or
# "unix:/path"), one line per call: "<target> ok <ms>" or "<target> error <errno> <ms>".
CLIENT = r'''
import errno, socket, sys, time
for target in sys.argv[1:]:
    start = time.monotonic()
    try:
        if target.startswith("unix:"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(target[5:])
            s.sendall(b"ping\n")
            data = s.recv(100)
            if not data:
                raise OSError(0, "EOF")
        else:
            hostport, _, path = target.partition("/")
            host, _, port = hostport.rpartition(":")
            s = socket.create_connection((host, int(port)))
            s.sendall(("GET /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path)
                      .encode())
            while s.recv(65536):
                pass
        s.close()
        print("%s ok %.1f" % (target, (time.monotonic() - start) * 1000), flush=True)
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        print("%s error %s %.1f" % (target, name, (time.monotonic() - start) * 1000),
              flush=True)
'''


def client(targets, conf=None, env=None, wrapper=None, timeout=30):
    """Runs CLIENT under the library; returns ({target: (result, errno, ms)}, Result)."""
    extra = dict(env or {})
    if conf is not None:
        extra["TIMEBOX_CONFIG"] = conf
    cmd = list(wrapper or []) + [PYTHON, "-c", CLIENT] + list(targets)
    r = lib.run(cmd, env=lib.preload_env(extra), timeout=timeout)
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[1] == "ok":
            out[parts[0]] = ("ok", None, float(parts[2]))
        else:
            out[parts[0]] = ("error", parts[2], float(parts[3]))
    return out, r


def write_conf(text):
    fd, path = tempfile.mkstemp(prefix="tb-conf-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def assert_cut(res, target, errname, at_least, below):
    result, err, ms = res[target]
    assert (result, err) == ("error", errname), (target, res[target])
    assert at_least <= ms < below, (target, ms)


def test_two_destinations_two_limits():
    with FaultServer() as a, FaultServer() as b:
        conf = write_conf('''
            defaults = { read_timeout = "5s"; };
            destinations = (
              { match = "127.0.0.1:%d"; read_timeout = "200ms"; },
              { match = "*:%d"; read_timeout = "600ms"; }
            );''' % (a.port, b.port))
        try:
            ta, tb = "127.0.0.1:%d/delay?ms=3000" % a.port, "127.0.0.1:%d/delay?ms=3000" % b.port
            res, r = client([ta, tb], conf)
            assert_cut(res, ta, "ETIMEDOUT", 200, 700)
            assert_cut(res, tb, "ETIMEDOUT", 600, 1100)
            assert len(lib.tb_lines(r.stderr)) == 2, r
            assert "limit_ms=200" in r.stderr and "limit_ms=600" in r.stderr, r
        finally:
            os.unlink(conf)


def test_enabled_false_passes_a_stalled_call_through():
    with FaultServer() as srv:
        conf = write_conf('''
            defaults = { read_timeout = "200ms"; deadline = "300ms"; };
            destinations = ( { match = "*:%d"; enabled = false; } );''' % srv.port)
        try:
            t = "127.0.0.1:%d/delay?ms=1000" % srv.port
            res, r = client([t], conf)
            assert res[t][0] == "ok" and res[t][2] >= 1000, (res, r)
            assert r.stderr == "", r
        finally:
            os.unlink(conf)


def test_deadline_off_keeps_idle_limits():
    with FaultServer() as srv:
        conf = write_conf('''
            defaults = { read_timeout = "500ms"; deadline = "300ms"; };
            destinations = ( { match = "127.0.0.1:%d"; deadline = "off"; } );''' % srv.port)
        try:
            drip = "127.0.0.1:%d/drip?ms=100&n=10" % srv.port
            stall = "127.0.0.1:%d/delay?ms=3000" % srv.port
            res, r = client([drip, stall], conf)
            assert res[drip][0] == "ok" and res[drip][2] >= 1000, (res, r)
            assert_cut(res, stall, "ETIMEDOUT", 500, 1100)
            assert "phase=first_byte" in r.stderr, r
        finally:
            os.unlink(conf)


def _private_hosts(name):
    """A command prefix that runs its command with `name` -> 127.0.0.1 in /etc/hosts, in a
    private mount namespace, so the machine's own file is never touched; None when this
    machine cannot do that (not root, no unshare)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None, None
    d = tempfile.mkdtemp(prefix="tb-hosts-")
    hosts = os.path.join(d, "hosts")
    with open("/etc/hosts") as f:
        original = f.read()
    with open(hosts, "w") as f:
        f.write(original.rstrip("\n") + "\n127.0.0.1 %s\n" % name)
    wrapper = ["unshare", "-m", "sh", "-c",
               'mount --bind "$0" /etc/hosts && exec "$@"', hosts]
    probe = subprocess.run(wrapper + ["getent", "hosts", name], capture_output=True, text=True)
    if probe.returncode != 0 or "127.0.0.1" not in probe.stdout:
        shutil.rmtree(d, ignore_errors=True)
        return None, None
    return wrapper, d


def test_hostname_rule_learned_from_the_program_lookup():
    name = "tb-inventory-%d" % os.getpid()
    wrapper, tmpdir = _private_hosts(name)
    if wrapper is None:
        lib.skip("needs root and unshare -m to give the test its own /etc/hosts entry")
    try:
        with FaultServer() as srv:
            conf = write_conf('''
                defaults = { read_timeout = "1500ms"; };
                destinations = ( { match = "%s:%d"; read_timeout = "200ms"; } );
                ''' % (name, srv.port))
            try:
                by_name = "%s:%d/delay?ms=3000" % (name, srv.port)
                by_addr = "127.0.0.1:%d/delay?ms=3000" % srv.port
                res, r = client([by_name], conf, wrapper=wrapper)
                assert_cut(res, by_name, "ETIMEDOUT", 200, 700)
                # The same address without the name: the defaults.
                res, r = client([by_addr], conf, wrapper=wrapper)
                assert_cut(res, by_addr, "ETIMEDOUT", 1500, 2200)
            finally:
                os.unlink(conf)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


class _UnixServer:
    """Accepts on a unix socket; answers each connection after `delay` seconds."""

    def __init__(self, path, delay):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.delay = delay
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._answer, args=(c,), daemon=True).start()

    def _answer(self, c):
        time.sleep(self.delay)
        try:
            c.sendall(b"pong\n")
        except OSError:
            pass


def test_unix_rule_governs_only_the_named_socket():
    d = tempfile.mkdtemp(prefix="tb-unix-")
    try:
        named, other = os.path.join(d, "app.sock"), os.path.join(d, "other.sock")
        _UnixServer(named, 1.0)
        _UnixServer(other, 0.6)
        conf = write_conf('''
            defaults = { read_timeout = "300ms"; };
            destinations = ( { match = "unix:%s"; read_timeout = "200ms"; } );''' % named)
        try:
            res, r = client(["unix:" + named, "unix:" + other], conf)
            assert_cut(res, "unix:" + named, "ETIMEDOUT", 200, 700)
            # Not named by a rule: a unix socket is never governed, whatever the defaults say.
            assert res["unix:" + other][0] == "ok" and res["unix:" + other][2] >= 600, res
            assert "dest=unix" in r.stderr, r
        finally:
            os.unlink(conf)
    finally:
        shutil.rmtree(d, ignore_errors=True)


BROKEN = '''defaults = {
  read_timeout = "200ms";
};
destinations = (
  { match = "10.0.0.0/33"; read_timeout = "1s"; }
);
'''


def test_broken_config_launcher_refuses():
    conf = write_conf(BROKEN)
    try:
        r = lib.run([lib.LAUNCHER, "run", "--config", conf, "--", "true"],
                    env=lib.native_env({"TIMEBOX_LIBRARY": lib.LIB}))
        assert r.returncode == 2, r
        assert "%s:5: match = 10.0.0.0/33: an IPv4 prefix length is 0 to 32" % conf in r.stderr, r
        r = lib.run([lib.LAUNCHER, "run", "--config", "/nonexistent.conf", "--", "true"],
                    env=lib.native_env({"TIMEBOX_LIBRARY": lib.LIB}))
        assert r.returncode == 2 and "No such file or directory" in r.stderr, r
    finally:
        os.unlink(conf)


def test_broken_config_bare_library_runs_the_program():
    with FaultServer() as srv:
        conf = write_conf(BROKEN)
        try:
            t = "127.0.0.1:%d/delay?ms=3000" % srv.port
            res, r = client([t], conf)
            lines = lib.tb_lines(r.stderr)
            assert len(lines) == 2, r  # the error, then the timeout under the defaults
            assert 'line=5 name=match value="10.0.0.0/33"' in lines[0], r
            assert 'effect="rule ignored"' in lines[0], r
            assert_cut(res, t, "ETIMEDOUT", 200, 700)

            r = lib.run([PYTHON, "-c", "print('ran')"],
                        env=lib.preload_env({"TIMEBOX_CONFIG": conf, "TIMEBOX_STRICT": "1"}))
            assert r.returncode == 2 and r.stdout == "", r
            assert 'effect="refusing to run (TIMEBOX_STRICT)"' in r.stderr, r
        finally:
            os.unlink(conf)


def test_libconfig_that_cannot_load_is_the_files_error():
    # The library loads libconfig.so.9 only to read a file (shim/libconfig_dl.c). One it
    # cannot load (here an empty file found first on LD_LIBRARY_PATH) is reported as the
    # file's error: the rules are not applied, the program runs, strict mode refuses.
    with FaultServer() as srv, tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "libconfig.so.9"), "w").close()
        conf = write_conf('destinations = ( { match = "*:%d"; read_timeout = "200ms"; } );'
                          % srv.port)
        try:
            t = "127.0.0.1:%d/delay?ms=600" % srv.port
            res, r = client([t], conf, env={"LD_LIBRARY_PATH": d})
            lines = lib.tb_lines(r.stderr)
            assert len(lines) == 1, r
            assert "cannot load libconfig.so.9 to read the file" in lines[0], r
            assert "file too short" in lines[0], r
            assert res[t][0] == "ok" and res[t][2] >= 600, res  # the file's 200 ms not applied
            res, r = client([t], conf)  # the same file, libconfig found: the rule applies
            assert_cut(res, t, "ETIMEDOUT", 200, 550)
            r = lib.run([PYTHON, "-c", "print('ran')"],
                        env=lib.preload_env({"TIMEBOX_CONFIG": conf, "TIMEBOX_STRICT": "1",
                                             "LD_LIBRARY_PATH": d}))
            assert r.returncode == 2 and r.stdout == "", r
            assert "cannot load libconfig.so.9" in r.stderr, r
        finally:
            os.unlink(conf)


def test_environment_beats_the_file():
    with FaultServer() as srv:
        conf = write_conf('''
            destinations = ( { match = "*:%d"; read_timeout = "1500ms"; } );''' % srv.port)
        try:
            t = "127.0.0.1:%d/delay?ms=3000" % srv.port
            res, r = client([t], conf, env={"TIMEBOX_READ_TIMEOUT": "200ms"})
            assert_cut(res, t, "ETIMEDOUT", 200, 700)
        finally:
            os.unlink(conf)


# ---- timebox check --------------------------------------------------------------------------

CONF_DIR = os.path.join(lib.ROOT, "conf")

# Every example, and what `timebox check` says of it: the seed's inventory client warns on
# purpose (its comment says why); the others are clean.
EXAMPLES = {"inventory.conf": (1, ["phases-exceed-deadline"]), "service.conf": (0, []),
            "streaming.conf": (0, []), "redis.conf": (0, []), "order.conf": (0, []),
            "breaker.conf": (0, [])}


def check(*args, env=None):
    return lib.run([lib.LAUNCHER, "check"] + list(args), env=lib.native_env(env))


def test_check_examples():
    assert sorted(EXAMPLES) == sorted(f for f in os.listdir(CONF_DIR) if f.endswith(".conf"))
    for name, (status, rules) in EXAMPLES.items():
        r = check("--format", "json", os.path.join(CONF_DIR, name))
        assert r.returncode == status, (name, r)
        report = json.loads(r.stdout)
        assert report["status"] == status and report["errors"] == [], (name, report)
        assert [w["rule"] for w in report["warnings"]] == rules, (name, report)


BAD_BUDGETS = '''defaults = {
  read_timeout = "1s";
};
destinations = (
  { match = "inventory:8080";
    read_timeout = "250ms"; deadline = "300ms"; attempts = 3;
    max_conns = 5; expected_rps = 100; expected_p99 = "200ms"; },
  { match = "*:6379";
    read_timeout = "2s"; deadline = "1s"; max_conns = 500; acquire_timeout = "10ms";
    expected_rps = 100; expected_p99 = "100ms"; },
  { match = "10.0.0.0/8"; max_conns = 10; read_timeout = "200ms"; deadline = "off"; }
);
'''


def test_check_warnings_text_and_json():
    conf = write_conf(BAD_BUDGETS)
    try:
        r = check("--inbound", "800ms", conf)
        assert r.returncode == 1, r
        assert "%s:2: warning: [no-deadline] defaults: read_timeout is 1s" % conf in r.stdout, r
        assert r.stdout.count("    fix: ") == 8, r
        r = check("--inbound", "800ms", "--format=json", conf)
        report = json.loads(r.stdout)
        assert r.returncode == 1 and report["status"] == 1, r
        assert sorted(w["rule"] for w in report["warnings"]) == sorted([
            "no-deadline", "retries-exceed-deadline", "cap-vs-littles-law",
            "phase-never-fires", "deadline-exceeds-inbound", "cap-vs-littles-law",
            "unbounded-gate-wait", "retries-exceed-request-budget"]), report
        assert {w["line"] for w in report["warnings"]} == {2, 5, 8, 11}, report
    finally:
        os.unlink(conf)


def test_check_errors():
    conf = write_conf(BROKEN)
    try:
        r = check(conf)
        assert r.returncode == 2, r
        assert "%s:5: match = 10.0.0.0/33: an IPv4 prefix length is 0 to 32" % conf in r.stderr
        r = check("--format", "json", conf)
        report = json.loads(r.stdout)
        assert r.returncode == 2 and report["status"] == 2, r
        assert report["errors"][0]["line"] == 5 and report["errors"][0]["key"] == "match", r
        r = check("/nonexistent.conf")
        assert r.returncode == 2 and "No such file or directory" in r.stderr, r
        r = check()
        assert r.returncode == 2 and "TIMEBOX_CONFIG is not set" in r.stderr, r
        r = check(env={"TIMEBOX_CONFIG": os.path.join(CONF_DIR, "service.conf")})
        assert r.returncode == 0 and "ok (4 rules)" in r.stdout, r
    finally:
        os.unlink(conf)


def test_check_explain():
    conf = os.path.join(CONF_DIR, "service.conf")
    r = check("--explain", "10.97.0.1:80", conf, env={"TIMEBOX_DEADLINE": "1s"})
    assert r.returncode == 0, r
    rows = {l.split()[0]: l.split(None, 2)[1:] for l in r.stdout.splitlines()
            if l.startswith("  ")}
    assert 'match = "10.96.0.0/12, [fd00::/8]:80"' in r.stdout, r
    assert rows["read_timeout"] == ["1s", "rule (%s:24)" % conf], r
    assert rows["connect_timeout"] == ["500ms", "defaults (%s:5)" % conf], r
    assert rows["deadline"] == ["1s", "environment (TIMEBOX_DEADLINE)"], r
    assert rows["max_conns"] == ["off", "built-in"], r
    r = check("--explain", "127.0.0.1:8125", conf)
    assert r.returncode == 0 and "enabled = false" in r.stdout, r
    r = check("--explain", "192.0.2.1:80", conf)
    assert "rule: none; the defaults apply" in r.stdout, r
    r = check("--explain", "unix:/run/x.sock", conf)
    assert "not governed" in r.stdout, r
    r = check("--explain", "10.0.0.0/8", conf)
    assert r.returncode == 2, r


# ---- make install --------------------------------------------------------------------------

@lib.timeout(180)
def test_install_tree_works():
    if lib.SANITIZE:
        lib.skip("installation is tested on the plain build, not under a sanitizer")
    dest = tempfile.mkdtemp(prefix="tb-install-")
    try:
        make = ["make", "-s", "-C", lib.ROOT, "DESTDIR=" + dest, "PREFIX=/usr/local"]
        r = lib.run(make + ["install"], env=lib.native_env(), timeout=170)
        assert r.returncode == 0, r
        root = os.path.join(dest, "usr/local")
        for rel in ("bin/timebox", "lib/timebox/libtimebox.so", "include/timebox.h",
                    "lib/pkgconfig/timebox.pc", "share/man/man1/timebox.1",
                    "share/man/man5/timebox.conf.5", "share/timebox/examples/redis.conf",
                    "share/man/man3/timebox_deadline_begin.3",
                    "share/man/man3/timebox_remaining_ms.3"):
            assert os.path.isfile(os.path.join(root, rel)), rel
        tb = os.path.join(root, "bin/timebox")

        # The launcher finds its library in the installed tree, and it governs.
        env = lib.native_env()
        env.pop("TIMEBOX_LIBRARY", None)
        r = lib.run([tb, "run", "--print-env"], env=env)
        assert r.returncode == 0, r
        assert "LD_PRELOAD=%s/lib/timebox/libtimebox.so" % os.path.realpath(root) in r.stdout, r
        with FaultServer() as srv:
            t = "127.0.0.1:%d/delay?ms=3000" % srv.port
            r = lib.run([tb, "run", "--read-timeout", "200ms", "--", PYTHON, "-c", CLIENT, t],
                        env=env)
            assert r.returncode == 0 and " error ETIMEDOUT " in r.stdout, r
        r = lib.run([tb, "check", os.path.join(root, "share/timebox/examples/service.conf")],
                    env=env)
        assert r.returncode == 0, r

        # pkg-config and the header agree with the launcher's version.
        version = lib.run([tb, "--version"], env=env).stdout.split()[1]
        r = lib.run(["pkg-config", "--modversion", "--variable=preload", "timebox"],
                    env=dict(env, PKG_CONFIG_PATH=os.path.join(root, "lib/pkgconfig")))
        assert r.returncode == 0 and version in r.stdout, r
        with open(os.path.join(root, "include/timebox.h")) as f:
            assert '#define TIMEBOX_VERSION "%s"' % version in f.read()

        # A program built against the installed header with pkg-config's flags alone (the
        # API needs no library to link) runs without the library: no deadline.
        r = lib.run(["pkg-config", "--define-variable=prefix=" + root, "--cflags", "--libs",
                     "timebox"],
                    env=dict(env, PKG_CONFIG_PATH=os.path.join(root, "lib/pkgconfig")))
        assert r.returncode == 0, r
        src, exe = os.path.join(dest, "api.c"), os.path.join(dest, "api")
        with open(src, "w") as f:
            f.write("#include <timebox.h>\n#include <stdio.h>\nint main(void) {\n"
                    " int rc = timebox_deadline_begin(100);\n"
                    " printf(\"%d %ld\\n\", rc, timebox_remaining_ms());\n"
                    " timebox_deadline_end();\n return 0;\n}\n")
        r = lib.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-o", exe, src]
                    + r.stdout.split(), env=env)
        assert r.returncode == 0, r
        r = lib.run([exe], env=env)
        assert r.returncode == 0 and r.stdout == "0 -1\n", r
        os.remove(src)
        os.remove(exe)

        # The pages render.
        for page in ("share/man/man1/timebox.1", "share/man/man5/timebox.conf.5",
                     "share/man/man3/timebox_deadline_begin.3"):
            r = lib.run(["man", "-l", "-P", "cat", os.path.join(root, page)],
                        env=dict(env, MANWIDTH="80"))
            assert r.returncode == 0 and "SEE ALSO" in r.stdout, (page, r)
            assert "warning" not in r.stderr, (page, r)

        r = lib.run(make + ["uninstall"], env=lib.native_env(), timeout=60)
        assert r.returncode == 0, r
        left = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs]
        assert left == [], left
    finally:
        shutil.rmtree(dest, ignore_errors=True)
