"""The chain of unmodified servers with no timeouts of their own: a client that allows 1 s
and says so (X-Deadline-Ms: 1000) calls `order` (a threaded python3 http.server), which
calls `inventory` (tests/e2e/chain_inventory.c: 3 s of its own work), which calls `db`.
Natively the two servers work on for seconds after the client left and db is asked anyway;
under timebox (scope=request, propagation on) order's call ends at its remaining budget,
inventory is told less, and inventory's call to db is never sent. Both timelines printed."""

import http.client
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import lib

lib.scrub_timebox_env()

INVENTORY = os.path.join(lib.BUILD, "tests", "e2e", "chain_inventory")
CLIENT_MS = 1000     # what the client allows, and the header it sends
WORK_MS = 3000       # inventory's own work (chain_inventory.c's WORK_MS)
# How late an expiry may be seen on the servers' own clocks (no process start-up in it):
# the machine is a shared 2-core box.
LATE_MS = 500

# order: per request, one call to inventory with http.client (no timeout), each step one
# line in the event file (monotonic ns, the clock the test and chain_inventory read too).
ORDER = r'''
import http.client, http.server, os, socketserver, sys, time
portfile, inv, events = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def event(what, detail="-"):
    fd = os.open(events, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, ("order %s %d %s\n" % (what, time.monotonic_ns(), detail)).encode())
    os.close(fd)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        event("start", self.headers.get("X-Deadline-Ms") or "-")
        c = http.client.HTTPConnection("127.0.0.1", inv)
        try:
            c.request("GET", "/inventory")
            c.getresponse().read()
            err = "ok"
        except OSError as e:
            err = "err=%s" % e.errno
        c.close()
        event("call_end", err)
        body = err.encode()
        try:
            self.send_response(200 if err == "ok" else 504)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass                       # the client left long ago
        event("end")
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
'''


class Db:
    """The third hop, in this process and native: records each request it receives (when,
    and the X-Deadline-Ms it saw) and answers at once."""

    def __init__(self):
        self.seen = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.seen.append((time.monotonic_ns(), self.headers.get("X-Deadline-Ms")))
                self.send_response(200)
                self.send_header("Content-Length", "3")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(b"db\n")

        class S(http.server.ThreadingHTTPServer):
            daemon_threads = True

        self.srv = S(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def read_port(path, proc, what):
    lib.wait_for(lambda: os.path.exists(path) or proc.poll() is not None, timeout=10,
                 what=what + " to listen")
    assert proc.poll() is None, (what, proc.returncode)
    with open(path) as f:
        return int(f.read())


def read_events(path):
    """{(tier, event): (ns, detail)} of the event file's lines."""
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                tier, what, ns, detail = line.split()
                out[(tier, what)] = (int(ns), detail)
    return out


def not_sent(stats, port):
    """NOT_SENT of 127.0.0.1:port's row in `timebox stats` (None: no row). A header word with
    a '/' names the parts of the value before it ("CUTS gate/conn/...")."""
    lines = stats.splitlines()
    head = [w for w in next(l for l in lines if l.startswith("DEST ")).split() if "/" not in w]
    for line in lines:
        if line.startswith("127.0.0.1:%d " % port):
            return line.split()[head.index("NOT_SENT")]
    return None


def run_chain(env, db, label, stats=False):
    """Starts inventory and order with env, sends the client's request, waits until both
    servers have finished with it; returns (events relative to the client's send in ms, with
    the client's outcome; inventory's stderr; with stats, inventory's `timebox stats`)."""
    d = tempfile.mkdtemp(prefix="tb-chain-")
    events = os.path.join(d, "events")
    procs = []
    try:
        inv = subprocess.Popen([INVENTORY, os.path.join(d, "inv.port"), str(db.port), events],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(d, "inv.err"), "w"))
        procs.append(inv)
        inv_port = read_port(os.path.join(d, "inv.port"), inv, "inventory")
        order = subprocess.Popen([sys.executable, "-c", ORDER, os.path.join(d, "order.port"),
                                  str(inv_port), events],
                                 env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(d, "order.err"), "w"))
        procs.append(order)
        order_port = read_port(os.path.join(d, "order.port"), order, "order")

        # The client: allows 1 s in all, and says so.
        conn = http.client.HTTPConnection("127.0.0.1", order_port, timeout=CLIENT_MS / 1000)
        conn.connect()
        t0 = time.monotonic_ns()
        conn.request("GET", "/order", headers={"X-Deadline-Ms": str(CLIENT_MS)})
        left = CLIENT_MS / 1000 - (time.monotonic_ns() - t0) / 1e9
        conn.sock.settimeout(max(left, 0.001))
        try:
            resp = conn.getresponse()
            outcome = "answered %d %s" % (resp.status, resp.read().decode())
        except (socket.timeout, TimeoutError):
            outcome = "gave up"
        t_client = time.monotonic_ns()
        conn.close()

        lib.wait_for(lambda: {("order", "end"), ("inventory", "end")} <= read_events(events).keys(),
                     timeout=WORK_MS / 1000 + 7, what="order and inventory to finish")
        ev = {k: ((ns - t0) / 1e6, det) for k, (ns, det) in read_events(events).items()}
        ev[("client", "send")] = (0.0, "X-Deadline-Ms:%d" % CLIENT_MS)
        ev[("client", "end")] = ((t_client - t0) / 1e6, outcome)
        for ns, told in db.seen:
            ev[("db", "request")] = ((ns - t0) / 1e6, "X-Deadline-Ms:%s" % told)
        with open(os.path.join(d, "inv.err")) as f:
            inv_err = f.read()
        with open(os.path.join(d, "order.err")) as f:
            order_err = f.read()
        print("timeline %s (ms after the client's send):" % label)
        for (tier, what), (ms, det) in sorted(ev.items(), key=lambda kv: kv[1][0]):
            print("  %8.1f  %-9s %-8s %s" % (ms, tier, what, det))
        for tier, err in (("order", order_err), ("inventory", inv_err)):
            for line in lib.tb_lines(err):
                print("  %s's log: %s" % (tier, line))
        st = None
        if stats:
            st = subprocess.run([lib.LAUNCHER, "stats", str(inv.pid)], capture_output=True,
                                text=True, timeout=30)
            print("  inventory's timebox stats:\n    " + "\n    ".join(st.stdout.splitlines()))
            assert st.returncode == 0, st
        return ev, inv_err, st and st.stdout
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)


@lib.timeout(40)
def test_chain_budget_shrinks_and_spent_call_not_sent():
    if not os.path.exists(INVENTORY):
        lib.skip("%s is not built (make e2e builds it)" % INVENTORY)
    lib.require_runs_with_sanitizer([sys.executable, "-c", "pass"])
    db = Db()
    try:
        # Without timebox: the servers work on for the whole 3 s; db is asked anyway.
        ev, _, _ = run_chain(lib.native_env(), db, "without timebox")
        client_end = ev[("client", "end")][0]
        assert client_end >= CLIENT_MS, ev                        # the client allowed 1 s
        assert ev[("inventory", "start")][1] == "-", ev
        assert ev[("inventory", "db")][1] == "ok", ev
        assert ev[("order", "call_end")][1] == "ok", ev
        for tier in ("order", "inventory"):
            assert ev[(tier, "end")][0] >= WORK_MS, (tier, ev)    # busy ~3 s ...
        assert ev[("order", "end")][0] - client_end >= WORK_MS - CLIENT_MS - LATE_MS, ev
        assert len(db.seen) == 1 and db.seen[0][1] is None, db.seen  # ... and db was asked
        db.seen.clear()

        # With timebox on order and inventory: one shrinking budget.
        env = lib.preload_env({"TIMEBOX_SCOPE": "request", "TIMEBOX_PROPAGATE": "1",
                               "TIMEBOX_DEADLINE": "5s"})
        ev, inv_err, stats = run_chain(env, db, "with timebox", stats=True)
        order_told = int(ev[("order", "start")][1])
        inv_told = int(ev[("inventory", "start")][1])
        assert order_told == CLIENT_MS, ev
        assert 0 < inv_told < order_told, ev                      # told less than order was
        call_end = ev[("order", "call_end")][0]
        assert ev[("order", "call_end")][1] == "err=110", ev      # ETIMEDOUT, from the budget
        # Order's budget opened when its head arrived, after the client's send: its call
        # can end no earlier than 1 s after the send, and not much later.
        assert call_end >= CLIENT_MS, ev
        assert call_end < lib.slack(CLIENT_MS), ev
        # Inventory's own work is not cut (timebox never cuts a program's sleep), but its
        # call to db, after the budget it was given, is not even sent.
        assert ev[("inventory", "db")][1] == "err=110", ev
        assert db.seen == [], db.seen
        refused = lib.tb_records(inv_err, event="timeout")
        assert refused and refused[0].get("budget") == "header", inv_err
        assert ev[("inventory", "db")][0] >= WORK_MS, ev
        assert not_sent(stats, db.port) == "1", stats
    finally:
        db.close()
