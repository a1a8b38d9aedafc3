#!/usr/bin/env python3
"""End-to-end test runner: every test_* function of tests/e2e/test_*.py runs in its own
process with a time limit, so a hang or a crash fails that test and not the suite.

usage: run.py [-j N] [FILTER...]     run the tests whose name contains any FILTER
       run.py --list [FILTER...]     print the selected test names
       run.py --one MODULE:FUNC      run one test in this process (what the runner spawns)

A test's time limit is 60 s unless its module's TIMEOUT dict ({"test_x": 120}) or the
lib.timeout(seconds) decorator says otherwise. With -j N, the tests a module names in its
ALONE set ({"test_x"}: they compare throughputs or latencies, and another test's CPU would
decide them) run after the others, one at a time. A name in TIMEOUT or ALONE that names no
test fails its module (a renamed test must not lose its limit or its solitude). A test skips only by calling
lib.skip(reason); it is then reported as SKIP with that reason, never as PASS.
"""

import argparse
import concurrent.futures
import faulthandler
import importlib
import os
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lib  # noqa: E402

DEFAULT_TIMEOUT = 60
SKIP_STATUS = 77            # the automake convention for "skipped"
SKIP_MARK = "TB-SKIP-REASON: "


class Test:
    def __init__(self, name, limit, alone=False):
        self.name = name      # "module:function"
        self.limit = limit
        self.alone = alone    # never beside another test (the module's ALONE)


def wanted(modname, filters):
    """Whether a broken module is reported: no filter, or one naming this module (the part of
    a "module:function" filter before the colon)."""
    return not filters or any(f.partition(":")[0] in modname for f in filters)


def discover(filters):
    """Returns (tests, broken): the selected tests in file order, and the modules that
    failed to import as (name, traceback) pairs."""
    tests, broken = [], []
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        modname = fname[:-3]
        try:
            module = importlib.import_module(modname)
        except Exception:
            if wanted(modname, filters):
                broken.append((modname + ":<import>", traceback.format_exc()))
            continue
        limits = getattr(module, "TIMEOUT", {})
        alone = getattr(module, "ALONE", set())
        # A name in TIMEOUT or ALONE that names no test (a test renamed, a typo) would
        # silently lose its limit or its solitude: the module is broken until it is fixed.
        unknown = sorted(n for n in set(limits) | set(alone)
                         if not callable(getattr(module, n, None)) or not n.startswith("test_"))
        if unknown:
            if wanted(modname, filters):
                broken.append((modname + ":<names>", "TIMEOUT or ALONE names no test: %s\n"
                               % ", ".join(unknown)))
            continue
        for attr, func in vars(module).items():
            if not (attr.startswith("test_") and callable(func)):
                continue
            if getattr(func, "__module__", None) != modname:
                continue
            name = "%s:%s" % (modname, attr)
            if filters and not any(f in name for f in filters):
                continue
            limit = limits.get(attr, getattr(func, "tb_timeout", DEFAULT_TIMEOUT))
            tests.append((func.__code__.co_firstlineno, modname,
                          Test(name, limit, attr in alone)))
    tests.sort(key=lambda t: (t[1], t[0]))
    return [t[2] for t in tests], broken


def run_one(name):
    """Runs one test in this process. Exit status: 0 pass, 1 fail, SKIP_STATUS skip."""
    modname, _, funcname = name.partition(":")
    limit = float(os.environ.get("TB_TEST_LIMIT", "0"))
    if limit > 1:
        # Show where a hanging test hangs, just before the runner kills it.
        faulthandler.dump_traceback_later(limit - 0.5, exit=False)
    try:
        func = getattr(importlib.import_module(modname), funcname)
        func()
    except lib.Skip as e:
        sys.stdout.flush()
        sys.stderr.write("\n%s%s\n" % (SKIP_MARK, e))
        return SKIP_STATUS
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def spawn(test):
    """Runs test in a child process (its own process group, killed whole at the time limit).
    Returns (verdict, seconds, output, reason)."""
    env = dict(os.environ, TB_TEST_LIMIT=str(test.limit), PYTHONUNBUFFERED="1")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--one", test.name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=env)
    try:
        out, _ = proc.communicate(timeout=test.limit)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # The whole group: a test's servers and clients must not outlive it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if timed_out:
        out, _ = proc.communicate()
    secs = time.monotonic() - start
    if timed_out:
        return "FAIL", secs, out, "time limit of %s s" % test.limit
    if proc.returncode == SKIP_STATUS:
        reasons = [l[len(SKIP_MARK):] for l in out.splitlines() if l.startswith(SKIP_MARK)]
        if reasons and reasons[-1].strip():
            return "SKIP", secs, out, reasons[-1].strip()
        return "FAIL", secs, out, "exit status %d without a skip reason" % SKIP_STATUS
    if proc.returncode == 0:
        return "PASS", secs, out, ""
    return "FAIL", secs, out, "exit status %d" % proc.returncode


def indent(text):
    return "".join("    " + line + "\n" for line in text.rstrip("\n").splitlines())


def main():
    ap = argparse.ArgumentParser(description="timebox end-to-end tests")
    ap.add_argument("filters", nargs="*", help="substrings of module:function names")
    ap.add_argument("-j", type=int, default=1, metavar="N",
                    help="tests run at once (default 1: timing tests run alone)")
    ap.add_argument("--one", metavar="MODULE:FUNC", help="run one test in this process")
    ap.add_argument("--list", action="store_true", help="list the selected tests")
    args = ap.parse_args()

    if args.one:
        return run_one(args.one)

    tests, broken = discover(args.filters)
    if args.list:
        for t in tests:
            print(t.name)
        return 0
    if not tests and not broken:
        print("no test matches %s" % " ".join(args.filters))
        return 1

    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for name, tb in broken:
        counts["FAIL"] += 1
        print("FAIL %s\n%s" % (name, indent(tb)), flush=True)

    def show(test, verdict, secs, out, reason):
        counts[verdict] += 1
        if verdict == "PASS":
            print("PASS %s (%.2f s)" % (test.name, secs), flush=True)
        elif verdict == "SKIP":
            print("SKIP %s (%s)" % (test.name, reason), flush=True)
        else:
            print("FAIL %s (%.2f s, %s)\n%s" % (test.name, secs, reason, indent(out)),
                  flush=True)

    start = time.monotonic()
    if args.j <= 1:
        for test in tests:
            show(test, *spawn(test))
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
            futures = {pool.submit(spawn, t): t for t in tests if not t.alone}
            for fut in concurrent.futures.as_completed(futures):
                show(futures[fut], *fut.result())
        for test in tests:
            if test.alone:
                show(test, *spawn(test))
    print("\n%d passed, %d failed, %d skipped (%.1f s)"
          % (counts["PASS"], counts["FAIL"], counts["SKIP"], time.monotonic() - start))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
