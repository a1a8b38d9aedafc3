"""The launcher's warnings: a program that links a library whose I/O no preload sees
(liburing) runs, governed as far as its plain calls go, after one line on stderr."""

import os
import re
import shutil
import subprocess
import tempfile

import lib

WARNING = re.compile(r"^timebox: (\S+) links liburing: I/O submitted through io_uring is "
                     r"not governed \(docs/limitations\.md\)$")

STUB = "int io_uring_queue_init(void) { return 0; }\n"
# Calls the stub, so the link keeps the DT_NEEDED entry whatever the linker's defaults.
PROG = r"""#include <stdio.h>
#include <stdlib.h>
int io_uring_queue_init(void);
int main(int argc, char **argv)
{
    printf("ran %d\n", io_uring_queue_init());
    return argc > 1 ? atoi(argv[1]) : 0;
}
"""
PLAIN = r"""#include <stdio.h>
int main(void) { puts("ran 0"); return 0; }
"""


def launcher(args):
    """`timebox ARGS` without TIMEBOX_* variables or LD_PRELOAD (a sanitized build's runtime
    first, as its user would set it)."""
    env = lib.native_env(clean=True)
    san = lib.sanitizer_preload()
    if san:
        lib.sanitizer_options(env)
        env["LD_PRELOAD"] = " ".join(san)
    return lib.run([lib.LAUNCHER] + list(args), env=env, timeout=15)


def compile_c(d, name, source, *link):
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        lib.skip("no C compiler (%s) to build the test program" % cc)
    src = os.path.join(d, name + ".c")
    with open(src, "w") as f:
        f.write(source)
    out = os.path.join(d, name)
    subprocess.run([cc, "-o", out, src] + list(link), check=True, capture_output=True)
    return out


def stub_uring_program(d):
    """A program whose DT_NEEDED names liburing.so.2: a stub of that name built in d."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        lib.skip("no C compiler (%s) to build the test program" % cc)
    with open(os.path.join(d, "stub.c"), "w") as f:
        f.write(STUB)
    so = os.path.join(d, "liburing.so.2")
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,liburing.so.2", "-o", so,
                    os.path.join(d, "stub.c")], check=True, capture_output=True)
    return compile_c(d, "uses_uring", PROG, so, "-Wl,-rpath," + d)


def warnings_in(stderr):
    return [l for l in stderr.splitlines() if "liburing" in l]


def test_program_linking_liburing_is_warned_once_and_runs():
    with tempfile.TemporaryDirectory(prefix="tb-e2e-uring-") as d:
        prog = stub_uring_program(d)
        res = launcher(["run", "--", prog, "3"])
        assert res.returncode == 3, res          # the program ran, its status passed through
        assert res.stdout == "ran 0\n", res
        lines = warnings_in(res.stderr)
        assert len(lines) == 1, res
        m = WARNING.match(lines[0])
        assert m is not None, res
        assert os.path.samefile(m.group(1), prog), res


def test_program_found_on_path_is_warned_by_its_path():
    with tempfile.TemporaryDirectory(prefix="tb-e2e-uring-") as d:
        stub_uring_program(d)
        env_path = d + ":" + os.environ.get("PATH", "/usr/bin:/bin")
        env = lib.native_env({"PATH": env_path}, clean=True)
        san = lib.sanitizer_preload()
        if san:
            lib.sanitizer_options(env)
            env["LD_PRELOAD"] = " ".join(san)
        res = lib.run([os.path.abspath(lib.LAUNCHER), "run", "--", "uses_uring"], env=env,
                      timeout=15)
        assert res.returncode == 0, res
        lines = warnings_in(res.stderr)
        assert len(lines) == 1 and WARNING.match(lines[0]), res
        assert WARNING.match(lines[0]).group(1) == os.path.join(d, "uses_uring"), res


def test_real_liburing_is_warned():
    """The distribution's liburing (liburing2), linked by its file name: no -dev package."""
    found = [p for p in ("/usr/lib/x86_64-linux-gnu/liburing.so.2", "/usr/lib64/liburing.so.2",
                         "/usr/lib/liburing.so.2") if os.path.exists(p)]
    if not found:
        lib.skip("liburing.so.2 is not installed (Debian: liburing2)")
    with tempfile.TemporaryDirectory(prefix="tb-e2e-uring-") as d:
        prog = compile_c(d, "real_uring", PLAIN, "-Wl,--no-as-needed", found[0])
        needed = subprocess.run(["readelf", "-d", prog], capture_output=True, text=True).stdout
        assert "liburing.so.2" in needed, needed
        res = launcher(["run", "--", prog])
        assert res.returncode == 0 and res.stdout == "ran 0\n", res
        lines = warnings_in(res.stderr)
        assert len(lines) == 1 and WARNING.match(lines[0]), res


def test_program_without_liburing_is_not_warned():
    with tempfile.TemporaryDirectory(prefix="tb-e2e-uring-") as d:
        prog = compile_c(d, "plain", PLAIN)
        res = launcher(["run", "--", prog])
        assert res.returncode == 0 and res.stdout == "ran 0\n", res
        assert warnings_in(res.stderr) == [], res
        assert lib.tb_lines(res.stderr) == [], res


def test_script_whose_interpreter_links_liburing_is_warned():
    """A #! script is judged by its interpreter, for the warning as for the refusals."""
    with tempfile.TemporaryDirectory(prefix="tb-e2e-uring-") as d:
        interp = stub_uring_program(d)
        script = os.path.join(d, "script")
        with open(script, "w") as f:
            f.write("#!%s\n" % interp)
        os.chmod(script, 0o755)
        res = launcher(["run", "--", script])
        assert res.returncode == 0, res          # not refused: run, status passed through
        lines = warnings_in(res.stderr)
        assert len(lines) == 1 and WARNING.match(lines[0]), res
        assert os.path.samefile(WARNING.match(lines[0]).group(1), interp), res
