"""make demo: a legacy client with no timeouts against a misbehaving downstream, without and
with timebox. Starts the project's fault server on 127.0.0.1 and prints a table."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import lib  # noqa: E402

CAP_S = 5  # a "without" run still waiting after this long is stopped and reported as capped
OPTIONS = ["--connect-timeout", "100ms", "--read-timeout", "250ms", "--deadline", "300ms"]

# The seed's three InventoryClient calls, plus a downstream that never answers.
CALLS = [
    ("normal: answers in 5 ms", "/delay?ms=5&order=9527"),
    ("stalls 1 s, then answers", "/delay?ms=1000&order=9528"),
    ("headers, then 1 byte/100 ms x 10", "/drip?ms=100&n=10"),
    ("never answers", "/stall"),
]

PY_CLIENT = os.path.join(lib.ROOT, "tests", "demo", "inventory_client.py")


def clients(url):
    return [
        ("python3 urllib", [sys.executable, PY_CLIENT, url]),
        ("C, blocking", [lib.BLOCKCLI, "--port", url.split(":")[2].split("/")[0],
                         "--path", url.split(":", 2)[2][url.split(":", 2)[2].index("/"):]]),
    ]


def outcome(res, timebox):
    """(time, outcome) for one run, from what the program printed and timebox logged."""
    if res.timed_out:
        return "%d ms" % (CAP_S * 1000), "still waiting: capped at %d s" % CAP_S
    out = res.stdout
    ms = re.search(r"ms=([0-9.]+)", out)
    ms = "%d ms" % round(float(ms.group(1))) if ms else "%d ms" % res.elapsed_ms
    if "result=ok" in out:
        return ms, "ok"
    line = next((l for l in res.stderr.splitlines() if l.startswith("timebox: event=")), "")
    ev = lib.parse_logfmt(line) if line else {}
    err = re.search(r"errno=(\w+)", out) or re.search(r'detail="([^":]*)', out)
    what = err.group(1) if err else "error"
    if timebox and ev:
        return ms, "%s: %s timeout (%s ms)" % (what, ev.get("phase"), ev.get("limit_ms"))
    return ms, what


def main():
    rows = []
    with lib.FaultServer() as srv:
        for label, path in CALLS:
            url = srv.url(path)
            for cname, cmd in clients(url):
                base = lib.run(cmd, env=lib.native_env(), timeout=CAP_S)
                tb = lib.run([lib.LAUNCHER, "run"] + OPTIONS + ["--"] + cmd,
                             env=lib.native_env(), timeout=CAP_S * 2)
                rows.append((label, cname) + outcome(base, False) + outcome(tb, True))
    print()
    print("timebox demo: a client that sets no timeouts, against the fault server")
    print("  without: the program as it is")
    print("  with:    timebox run %s -- PROGRAM" % " ".join(OPTIONS))
    print()
    head = ("downstream", "client", "without", "outcome", "with", "outcome")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(6)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    print((fmt % head).rstrip())
    print((fmt % tuple("-" * w for w in widths)).rstrip())
    for r in rows:
        print((fmt % r).rstrip())
    print()
    print("Runs still waiting after %d s were stopped by the demo (capped); without a limit"
          " they wait forever." % CAP_S)
    print("first_byte is the read timeout's wait for the first response byte (it defaults to"
          " --read-timeout);")
    print("the drip keeps every read under 250 ms, so only the 300 ms deadline bounds it.")


if __name__ == "__main__":
    main()
