"""Hostile paths end to end, from the launcher's side: a FIFO, a directory, a file past the
1 MiB cap or with an @include is refused at once with one line naming the file and the
reason; a symbolic link to a regular file is followed (a ConfigMap mount is one)."""

import os
import tempfile

import lib

for _name in [n for n in os.environ if n.startswith("TIMEBOX_")]:
    del os.environ[_name]

GOOD = 'defaults = { read_timeout = "2s"; deadline = "4s"; };\n'


def hostile_files(d):
    """{name: (path, expected reason)} under directory d."""
    fifo = os.path.join(d, "fifo.conf")
    os.mkfifo(fifo)
    big = os.path.join(d, "big.conf")
    with open(big, "w") as f:
        f.write(GOOD + 'note = "' + "x" * (2 << 20) + '";\n')
    inc = os.path.join(d, "include.conf")
    with open(inc, "w") as f:
        f.write(GOOD + '@include "%s"\n' % fifo)
    return {"fifo": (fifo, "not a regular file: a FIFO"),
            "directory": (d, "not a regular file: a directory"),
            "big": (big, "larger than 1 MiB"),
            "include": (inc, "@include is not supported")}


@lib.timeout(60)
def test_launcher_refuses_hostile_config_at_once():
    with tempfile.TemporaryDirectory(prefix="tb-hostile-") as d:
        for name, (path, why) in hostile_files(d).items():
            for cmd in ([lib.LAUNCHER, "check", path],
                        [lib.LAUNCHER, "run", "--config", path, "--", "true"]):
                r = lib.run(cmd, env=lib.native_env(), timeout=10)
                assert r.returncode == 2, (name, r)
                assert r.elapsed_ms < 2000, (name, r)
                assert path in r.stderr and why in r.stderr, (name, r)


def test_library_reads_config_through_a_symlink():
    with tempfile.TemporaryDirectory(prefix="tb-hostile-") as d:
        real = os.path.join(d, "real.conf")
        with open(real, "w") as f:
            f.write(GOOD)
        link = os.path.join(d, "timebox.conf")
        os.symlink(real, link)
        r = lib.run(["true"], env=lib.preload_env({"TIMEBOX_CONFIG": link}), timeout=10)
        assert r.returncode == 0 and r.stderr == "", r
        r = lib.run([lib.LAUNCHER, "check", link], env=lib.native_env(), timeout=10)
        assert r.returncode == 0 and "ok (0 rules)" in r.stdout, r
