"""The Debian package end to end: `make deb` builds it from debian/, `apt install ./…deb`
installs it on this machine, the installed launcher finds the installed library with no
variable set and cuts curl at its read timeout, lintian finds no error, and a purge leaves
nothing behind (docs/operations.md, "Installing the Debian package")."""

import glob
import os
import shutil
import tempfile

import lib
from lib import FaultServer

TIMEOUT = {"test_deb_installs_governs_and_purges": 400}

PKG = "timebox"
INSTALLED = ["/usr/bin/timebox", "/usr/lib/%s/timebox/libtimebox.so", "/usr/include/timebox.h",
             "/usr/lib/%s/pkgconfig/timebox.pc", "/usr/share/man/man1/timebox.1.gz",
             "/usr/share/man/man5/timebox.conf.5.gz",
             "/usr/share/doc/timebox/examples/service.conf"]


def installed():
    r = lib.run(["dpkg-query", "-W", "-f=${Status}", PKG], env=lib.native_env())
    return r.returncode == 0 and "installed" in r.stdout and "not-installed" not in r.stdout


def test_deb_installs_governs_and_purges():
    if lib.SANITIZE:
        lib.skip("the package is built and tested from the plain build, not under a sanitizer")
    if os.geteuid() != 0:
        lib.skip("installing a package needs root")
    for tool in ("dpkg-buildpackage", "dh", "apt-get", "curl"):
        if shutil.which(tool) is None:
            lib.skip("%s is not installed (tests/deps.sh check installs it)" % tool)
    if installed() or os.path.exists("/usr/bin/timebox"):
        lib.skip("a timebox is already installed on this machine: not replacing it")
    triplet = lib.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
    assert triplet, "dpkg-architecture gave no triplet"
    paths = [p % triplet if "%s" in p else p for p in INSTALLED]

    # Built in a build folder of the test's own (make deb's output goes to $(BUILD)/deb/);
    # the unit tests ran already in make test.
    out = tempfile.mkdtemp(prefix="tb-deb-")
    env = lib.native_env(dict(DEB_BUILD_OPTIONS="nocheck parallel=2"), clean=True)
    try:
        r = lib.run(["make", "-s", "-C", lib.ROOT, "BUILD=" + out, "deb"], env=env,
                    timeout=300)
        assert r.returncode == 0, r
        debs = glob.glob(os.path.join(out, "deb", "timebox_*_*.deb"))
        assert len(debs) == 1, debs
        deb = debs[0]

        if shutil.which("lintian"):
            r = lib.run(["lintian", deb], env=env, timeout=120)
            errors = [l for l in r.stdout.splitlines() if l.startswith("E:")]
            assert not errors, r

        r = lib.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", deb],
                    env=dict(env, DEBIAN_FRONTEND="noninteractive"), timeout=120)
        assert r.returncode == 0, r
        try:
            for p in paths:
                assert os.path.isfile(p), p
            # No variable set: the launcher finds /usr/lib/<triplet>/timebox/ by itself.
            r = lib.run(["/usr/bin/timebox", "run", "--print-env"], env=env)
            assert r.returncode == 0, r
            assert "LD_PRELOAD=/usr/lib/%s/timebox/libtimebox.so" % triplet in r.stdout, r
            with FaultServer() as srv:
                r = lib.run(["/usr/bin/timebox", "run", "--read-timeout", "200ms", "--",
                             "curl", "-sS", "-o", "/dev/null", srv.url("/stall")],
                            env=env, timeout=30)
            print("installed timebox run --read-timeout 200ms -- curl /stall: exit %s after "
                  "%.0f ms" % (r.returncode, r.elapsed_ms))
            assert r.returncode not in (0, None), r
            assert r.elapsed_ms >= 200, r                    # never early
            assert r.elapsed_ms < 5000, r                    # cut, not left to hang
            assert lib.tb_records(r.stderr, event="timeout", phase="first_byte") or \
                lib.tb_records(r.stderr, event="timeout", phase="read"), r
            r = lib.run(["/usr/bin/timebox", "check",
                         "/usr/share/doc/timebox/examples/service.conf"], env=env)
            assert r.returncode == 0, r
        finally:
            r = lib.run(["apt-get", "purge", "-y", "-q", PKG],
                        env=dict(env, DEBIAN_FRONTEND="noninteractive"), timeout=120)
        assert r.returncode == 0, r
        assert not installed()
        left = [p for p in paths + ["/usr/lib/%s/timebox" % triplet, "/usr/share/doc/timebox"]
                if os.path.exists(p)]
        assert not left, "left after purge: %s" % left
        r = lib.run(["dpkg-query", "-W", "-f=${Status}", PKG], env=env)
        assert "config-files" not in r.stdout, r
    finally:
        shutil.rmtree(out, ignore_errors=True)
