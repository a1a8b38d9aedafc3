"""The benchmark harness cannot rot: its quick mode runs every workload and each one must
produce numbers. The targets are the full bench's business (`make bench`), not this test's."""

import json
import math
import os
import shutil
import sys
import tempfile

import lib

TIMEOUT = {"test_bench_quick_mode_produces_every_workload": 250}

RUN_PY = os.path.join(lib.ROOT, "tests", "bench", "run.py")
WORKLOADS = ["exchange", "syscalls", "fastpath", "precision", "scale", "gate", "epoll",
             "framing", "storm", "adaptive"]


def numbers(tree):
    """Every number in a nested dict/list."""
    if isinstance(tree, dict):
        for v in tree.values():
            yield from numbers(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from numbers(v)
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield tree


def test_bench_quick_mode_produces_every_workload():
    if lib.SANITIZE:
        lib.skip("the benchmarks measure the optimised build, not a sanitized one")
    missing = [t for t in ("haproxy", "valgrind", "perf", "strace") if not shutil.which(t)]
    if "haproxy" in missing or "valgrind" in missing or ("perf" in missing and
                                                         "strace" in missing):
        lib.skip("bench tools missing (tests/deps.sh bench installs them): %s"
                 % " ".join(missing))
    out = tempfile.mkdtemp(prefix="tb-bench-quick-")
    try:
        res = lib.run([sys.executable, RUN_PY, "--quick", "--out", out],
                      env=dict(os.environ, TB_BUILD=lib.BUILD), timeout=240)
        assert res.returncode == 0, res
        with open(os.path.join(out, "results.json")) as f:
            data = json.load(f)
        assert data["failed"] == [], data["failed"]
        for name in WORKLOADS:
            values = list(numbers(data["results"].get(name)))
            assert values, "workload %s produced no numbers:\n%r" % (name, res)
            assert all(math.isfinite(v) for v in values), (name, values)
        assert data["targets"], "no target was evaluated"
        md = open(os.path.join(out, "benchmarks.md")).read()
        assert "## Targets" in md and data["machine"]["kernel"] in md
        assert open(os.path.join(out, "bench-latency.svg")).read().startswith("<svg")
    finally:
        shutil.rmtree(out, ignore_errors=True)
