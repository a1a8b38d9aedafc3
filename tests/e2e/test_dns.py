"""Name resolution as phase dns: real programs (curl, wget, python3, perl) resolve a name
against a resolver that never answers, and fail at dns_timeout (or at the deadline, when
that comes first) with their own "could not resolve" error, where natively they wait for
glibc's timeout x attempts; against a resolver that answers, and for /etc/hosts names, the
results are those of the program without timebox.

Each run happens in private network and mount namespaces (`unshare -n -m`, root only): `lo`
is brought up, a resolv.conf saying `nameserver 127.0.0.1` is bind-mounted over
/etc/resolv.conf, and a UDP server on 127.0.0.1:53 either never answers or answers A
queries for *.tbtest with 127.0.0.7 (NXDOMAIN for other names, no AAAA records). The time
is measured inside the namespace, around the program's whole run: never early (at least the
limit), generous above. Reverse lookups (getnameinfo, gethostbyaddr*) ask the same server
for PTR records: it names 127.0.0.7 svc.tbtest and knows no other address."""

import json
import os
import shutil
import socket
import sys

import lib
from lib import SLACK_MS

lib.scrub_timebox_env()

STARTUP_MS = {"": 0, "address": 500, "undefined": 200, "thread": 3000}[lib.SANITIZE]

# Runs inside the namespaces: sets up lo, the resolv.conf and the DNS server, then runs the
# command once and prints {"rc", "elapsed_ms", "stdout", "stderr"} as JSON.
NS_HELPER = r'''
import json, os, socket, struct, subprocess, sys, tempfile, threading, time
mode, options, env_json = sys.argv[1], sys.argv[2], sys.argv[3]
cmd = sys.argv[4:]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
conf = tempfile.NamedTemporaryFile("w", suffix=".resolv.conf", delete=False)
conf.write("nameserver 127.0.0.1\n" + (options + "\n" if options else ""))
conf.close()
subprocess.run(["mount", "--bind", conf.name, "/etc/resolv.conf"], check=True)
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
srv.bind(("127.0.0.1", 53))

def answer(q):
    qid, flags = struct.unpack("!HH", q[:4])
    i, labels = 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode())
        i += 1 + q[i]
    qtype, = struct.unpack("!H", q[i + 1:i + 3])
    question = q[12:i + 5]
    name = ".".join(labels).lower()
    if qtype == 12 and name == "7.0.0.127.in-addr.arpa":
        ptr = b"\x03svc\x06tbtest\x00"
        rr = struct.pack("!HHHIH", 0xC00C, 12, 1, 60, len(ptr)) + ptr
        return struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + rr
    if not name.endswith(".tbtest"):
        return struct.pack("!HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question
    if qtype != 1:
        return struct.pack("!HHHHHH", qid, 0x8180, 1, 0, 0, 0) + question
    rr = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + bytes([127, 0, 0, 7])
    return struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + rr

def serve():
    while True:
        q, peer = srv.recvfrom(4096)
        if mode == "answer":
            try:
                srv.sendto(answer(q), peer)
            except Exception:
                pass

threading.Thread(target=serve, daemon=True).start()
env = json.loads(env_json)
start = time.monotonic()
p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
elapsed = (time.monotonic() - start) * 1000.0
print(json.dumps({"rc": p.returncode, "elapsed_ms": elapsed, "stdout": p.stdout,
                  "stderr": p.stderr}))
'''

# getaddrinfo, as python3 calls it; prints the addresses or the error.
PY_GAI = ("import socket, sys\n"
          "try:\n"
          "    print(sorted({a[4][0] for a in socket.getaddrinfo(sys.argv[1], 80)}))\n"
          "except socket.gaierror as e:\n"
          "    print('gaierror', e.errno, e.strerror)\n"
          "    sys.exit(3)\n")

# gethostbyname_r (socket.gethostbyname_ex), and gethostbyname2 / gethostbyname2_r /
# gethostbyname called through ctypes: result, or the return value and h_errno.
PY_HOSTENT = r'''
import ctypes, socket, sys
name = sys.argv[1].encode()
libc = ctypes.CDLL(None, use_errno=True)
class HostEnt(ctypes.Structure):
    _fields_ = [("h_name", ctypes.c_char_p), ("h_aliases", ctypes.POINTER(ctypes.c_char_p)),
                ("h_addrtype", ctypes.c_int), ("h_length", ctypes.c_int),
                ("h_addr_list", ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte)))]
libc.gethostbyname.restype = ctypes.POINTER(HostEnt)
libc.gethostbyname2.restype = ctypes.POINTER(HostEnt)
libc.__h_errno_location.restype = ctypes.POINTER(ctypes.c_int)
def show(h):
    if not h:
        return "NULL h_errno=%d" % libc.__h_errno_location()[0]
    a = h.contents.h_addr_list[0]
    return "%s %s" % (h.contents.h_name.decode(), ".".join(str(a[i]) for i in range(4)))
print("gethostbyname", show(libc.gethostbyname(name)))
print("gethostbyname2", show(libc.gethostbyname2(name, socket.AF_INET)))
he, res, err = HostEnt(), ctypes.POINTER(HostEnt)(), ctypes.c_int(0)
buf = ctypes.create_string_buffer(1024)
libc.__h_errno_location()[0] = 12345
ctypes.set_errno(99)
rc = libc.gethostbyname2_r(name, socket.AF_INET, ctypes.byref(he), buf, 1024,
                           ctypes.byref(res), ctypes.byref(err))
print("gethostbyname2_r rc=%d h_errno=%d %s" % (rc, err.value, show(res) if res else "NULL"),
      "thread's h_errno=%d errno=%d" % (libc.__h_errno_location()[0], ctypes.get_errno()))
try:
    print("gethostbyname_ex", socket.gethostbyname_ex(sys.argv[1]))
except OSError as e:
    print("gethostbyname_ex", type(e).__name__, e.args)
'''

# getnameinfo called through ctypes, once per argument ADDR,PORT,FLAGS[,HOSTLEN,SERVLEN]
# (ADDR "unix:PATH" for AF_UNIX), into buffers that hold "untouched" beforehand: the return
# value, what each buffer holds, h_errno; and last the process's thread count (1: no
# resolver thread was ever started).
PY_GNI = r'''
import ctypes, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.__h_errno_location.restype = ctypes.POINTER(ctypes.c_int)
def sockaddr(addr, port):
    if addr.startswith("unix:"):
        return struct.pack("=H108s", socket.AF_UNIX, addr[5:].encode())
    if ":" in addr:
        return struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", port, 0) + \
            socket.inet_pton(socket.AF_INET6, addr) + struct.pack("=I", 0)
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + \
        socket.inet_aton(addr) + bytes(8)
for arg in sys.argv[1:]:
    addr, port, flags, *lens = arg.split(",")
    hostlen, servlen = (int(lens[0]), int(lens[1])) if lens else (1025, 32)
    sa = sockaddr(addr, int(port))
    host = ctypes.create_string_buffer(b"untouched", 1025)
    serv = ctypes.create_string_buffer(b"untouched", 32)
    libc.__h_errno_location()[0] = 12345
    rc = libc.getnameinfo(sa, len(sa), host, hostlen, serv, servlen, int(flags))
    print(arg, "rc=%d" % rc, host.raw[:32].rstrip(b"\0"), serv.raw[:16].rstrip(b"\0"),
          "h_errno=%d" % libc.__h_errno_location()[0])
print("threads", len(os.listdir("/proc/self/task")))
'''

NI_NUMERICHOST, NI_NUMERICSERV, NI_NAMEREQD = 1, 2, 8

# gethostbyaddr ("h"), gethostbyaddr_r ("r", into a buffer of BUFLEN bytes, 1024 unless
# told) or python's socket.gethostbyaddr ("py") called once per argument
# FUNC,ADDR[,FAMILY,LEN[,BUFLEN]] (FAMILY and LEN: the family passed and how many of the
# address's bytes, zero-padded), with h_errno 12345 and errno 99 beforehand: the hostent or
# NULL, the return value and *h_errnop of the _r call, h_errno and errno after. "keep" names
# 127.0.0.7 with gethostbyaddr on a thread that then exits, calls gethostbyname,
# gethostbyname2 and gethostbyaddr_r, and only then reads the first hostent (glibc's is
# static storage, valid until the next gethostbyaddr). Last, the process's thread count.
PY_GHBA = r'''
import ctypes, os, socket, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
class HostEnt(ctypes.Structure):
    _fields_ = [("h_name", ctypes.c_char_p), ("h_aliases", ctypes.POINTER(ctypes.c_char_p)),
                ("h_addrtype", ctypes.c_int), ("h_length", ctypes.c_int),
                ("h_addr_list", ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte)))]
for f in ("gethostbyaddr", "gethostbyname", "gethostbyname2"):
    getattr(libc, f).restype = ctypes.POINTER(HostEnt)
libc.__h_errno_location.restype = ctypes.POINTER(ctypes.c_int)
def show(h):
    if not h:
        return "NULL"
    h, aliases, addrs, i = h.contents, [], [], 0
    while h.h_aliases[i]:
        aliases.append(h.h_aliases[i].decode())
        i += 1
    i = 0
    while h.h_addr_list[i]:
        addrs.append(bytes(h.h_addr_list[i][:h.h_length]).hex())
        i += 1
    return "%s %s %d/%d %s" % (h.h_name.decode(), aliases, h.h_addrtype, h.h_length, addrs)
def address(addr, rest):
    af = socket.AF_INET6 if ":" in addr else socket.AF_INET
    b = socket.inet_pton(af, addr)
    if rest:
        af, b = int(rest[0]), (b + bytes(16))[:int(rest[1])]
    return b, af
def prime():
    libc.__h_errno_location()[0] = 12345
    ctypes.set_errno(99)
def after():
    return "h_errno=%d errno=%d" % (libc.__h_errno_location()[0], ctypes.get_errno())
for arg in sys.argv[1:]:
    func, addr, *rest = arg.split(",")
    if func == "keep":
        kept = []
        t = threading.Thread(target=lambda: kept.append(libc.gethostbyaddr(
            socket.inet_aton(addr), 4, socket.AF_INET)))
        t.start()
        t.join()
        libc.gethostbyname(b"svc.tbtest")
        libc.gethostbyname2(b"svc.tbtest", socket.AF_INET)
        he, res, err = HostEnt(), ctypes.POINTER(HostEnt)(), ctypes.c_int(0)
        buf = ctypes.create_string_buffer(1024)
        libc.gethostbyaddr_r(socket.inet_aton("10.1.2.3"), 4, socket.AF_INET,
                             ctypes.byref(he), buf, 1024, ctypes.byref(res), ctypes.byref(err))
        print(arg, show(kept[0]))
        continue
    if func == "py":
        try:
            print(arg, socket.gethostbyaddr(addr))
        except OSError as e:
            print(arg, type(e).__name__, e.args)
        continue
    b, af = address(addr, rest[:2])
    prime()
    if func == "h":
        print(arg, show(libc.gethostbyaddr(b, len(b), af)), after())
        continue
    buflen = int(rest[2]) if len(rest) > 2 else 1024
    he, res, err = HostEnt(), ctypes.POINTER(HostEnt)(), ctypes.c_int(12345)
    buf = ctypes.create_string_buffer(buflen)
    prime()
    rc = libc.gethostbyaddr_r(b, len(b), af, ctypes.byref(he), buf, buflen,
                              ctypes.byref(res), ctypes.byref(err))
    print(arg, "rc=%d herr=%d" % (rc, err.value), show(res) if res else "NULL", after())
print("threads", len(os.listdir("/proc/self/task")))
'''


def require_namespaces():
    if os.geteuid() != 0:
        lib.skip("needs root for private network and mount namespaces (unshare -n -m)")
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        lib.skip("needs unshare(1) and ip(8)")
    r = lib.run(["unshare", "-n", "-m", "true"], timeout=10)
    if r.returncode != 0:
        lib.skip("unshare -n -m refused here: %s" % r.stderr.strip())


def in_ns(cmd, mode="silent", options="", env_extra=None, preload=True, timeout=60):
    """Runs cmd in fresh namespaces with the given resolver; returns the helper's record
    (rc, elapsed_ms, stdout, stderr)."""
    require_namespaces()
    env = lib.preload_env(env_extra) if preload else lib.native_env(env_extra, clean=True)
    r = lib.run(["unshare", "-n", "-m", sys.executable, "-c", NS_HELPER, mode, options,
                 json.dumps(env)] + list(cmd), env=lib.native_env(), timeout=timeout)
    assert r.returncode == 0 and not r.timed_out, r
    return json.loads(r.stdout.strip().splitlines()[-1])


def dns_lines(out, **fields):
    """timebox's dns lines, also those that begin in the middle of the program's own line
    (wget prints "Resolving NAME... " and its result after the lookup)."""
    stderr = out["stderr"].replace(lib.TB_PREFIX, "\n" + lib.TB_PREFIX)
    return lib.tb_records(stderr, event="timeout", phase="dns", **fields)


def assert_cut(out, limit_ms, name):
    assert out["elapsed_ms"] >= limit_ms, out
    assert out["elapsed_ms"] <= lib.slack(limit_ms) + SLACK_MS + STARTUP_MS, out
    lines = dns_lines(out, name=name)
    assert lines, out
    assert int(lines[0]["elapsed_ms"]) >= limit_ms, out
    assert int(lines[0]["limit_ms"]) == limit_ms, out


def py(script, *args):
    return [sys.executable, "-c", script] + list(args)


def test_native_baseline_waits_for_glibc():
    """Without timebox the silent resolver costs glibc's timeout x attempts (1 s x 1 here,
    5 s x 2 by default)."""
    out = in_ns(py(PY_GAI, "svc.example.com"), options="options timeout:1 attempts:1",
                preload=False)
    assert out["rc"] == 3 and "gaierror -3" in out["stdout"], out
    assert out["elapsed_ms"] >= 1000, out


def test_python_getaddrinfo_cut_at_dns_timeout():
    out = in_ns(py(PY_GAI, "svc.example.com"), options="options timeout:1 attempts:1",
                env_extra={"TIMEBOX_DNS_TIMEOUT": "300ms"})
    assert out["rc"] == 3 and "gaierror -3 Temporary failure in name resolution" in \
        out["stdout"], out
    assert_cut(out, 300, "svc.example.com")


def test_dns_follows_connect_timeout():
    out = in_ns(py(PY_GAI, "svc.example.com"), env_extra={"TIMEBOX_CONNECT_TIMEOUT": "400ms"})
    assert out["rc"] == 3 and "gaierror -3" in out["stdout"], out
    assert_cut(out, 400, "svc.example.com")


def test_curl_cut_at_dns_timeout():
    if shutil.which("curl") is None:
        lib.skip("curl is not installed")
    lib.require_runs_with_sanitizer(["curl", "--version"])
    out = in_ns(["curl", "-sS", "http://svc.example.com/"],
                env_extra={"TIMEBOX_DNS_TIMEOUT": "300ms"})
    assert out["rc"] == 6 and "Could not resolve host: svc.example.com" in out["stderr"], out
    assert_cut(out, 300, "svc.example.com")


def test_wget_cut_at_dns_timeout():
    if shutil.which("wget") is None:
        lib.skip("wget is not installed")
    lib.require_runs_with_sanitizer(["wget", "--version"])
    out = in_ns(["wget", "-O-", "http://svc.example.com/"],
                env_extra={"TIMEBOX_DNS_TIMEOUT": "300ms"})
    assert out["rc"] == 4 and "unable to resolve host address" in out["stderr"], out
    assert_cut(out, 300, "svc.example.com")


def test_deadline_before_dns_timeout():
    """dns_timeout 2s, deadline 400ms: the lookup is the call's first step, so the deadline
    cuts it, and a second lookup in the retry window fails at once."""
    script = PY_GAI.replace("try:\n", "try:\n    socket.getaddrinfo(sys.argv[1], 80)\n" +
                            "except socket.gaierror as e:\n    print('first', e.errno)\n" +
                            "try:\n", 1)
    out = in_ns(py(script, "svc.example.com"),
                env_extra={"TIMEBOX_DNS_TIMEOUT": "2s", "TIMEBOX_DEADLINE": "400ms"})
    assert out["rc"] == 3 and "first -3" in out["stdout"], out
    assert "gaierror -3" in out["stdout"], out
    assert_cut(out, 400, "svc.example.com")
    assert out["elapsed_ms"] < 2000, out
    assert len(dns_lines(out)) == 2, out


def test_hosts_names_never_slowed():
    """localhost comes from /etc/hosts: no resolver is asked, however short dns_timeout."""
    out = in_ns(py(PY_GAI, "localhost"), env_extra={"TIMEBOX_DNS_TIMEOUT": "1ms"})
    assert out["rc"] == 0 and "127.0.0.1" in out["stdout"], out
    assert not lib.tb_lines(out["stderr"]), out


def test_working_resolver_unchanged():
    """A resolver that answers: every hooked lookup returns what it returns natively."""
    for script in (PY_GAI, PY_HOSTENT):
        for name in ("svc.tbtest", "missing.example.com"):
            native = in_ns(py(script, name), mode="answer", preload=False)
            tb = in_ns(py(script, name), mode="answer",
                       env_extra={"TIMEBOX_DNS_TIMEOUT": "2s"})
            assert tb["rc"] == native["rc"], (native, tb)
            assert tb["stdout"] == native["stdout"], (native, tb)
            assert not lib.tb_lines(tb["stderr"]), tb
    assert "127.0.0.7" in tb["stdout"] or "missing" in name


def test_hostent_calls_cut():
    """gethostbyname, gethostbyname2, gethostbyname2_r and gethostbyname_r (python's
    gethostbyname_ex) fail as glibc fails on a silent resolver: NULL / h_errno TRY_AGAIN (2);
    the _r calls set the thread's h_errno too, and errno EAGAIN."""
    native = in_ns(py(PY_HOSTENT, "svc.example.com"), options="options timeout:1 attempts:1",
                   preload=False)
    tb = in_ns(py(PY_HOSTENT, "svc.example.com"), options="options timeout:1 attempts:1",
               env_extra={"TIMEBOX_DNS_TIMEOUT": "200ms"})
    assert tb["stdout"] == native["stdout"], (native, tb)
    assert "h_errno=2" in tb["stdout"], tb
    assert "thread's h_errno=2 errno=11" in tb["stdout"], tb
    assert len(dns_lines(tb, name="svc.example.com")) == 4, tb
    assert tb["elapsed_ms"] >= 800, tb
    assert tb["elapsed_ms"] < native["elapsed_ms"], (native, tb)


def test_perl_gethostbyname_cut():
    if shutil.which("perl") is None:
        lib.skip("perl is not installed")
    script = ('my @h = gethostbyname($ARGV[0]); print @h ? "found\\n" : "failed $?\\n";'
              'exit(@h ? 0 : 3)')
    out = in_ns(["perl", "-e", script, "svc.example.com"],
                env_extra={"TIMEBOX_DNS_TIMEOUT": "300ms"})
    assert out["rc"] == 3, out
    assert_cut(out, 300, "svc.example.com")


def test_getnameinfo_cut_at_dns_timeout():
    """A reverse lookup (a server naming its peer) on a silent resolver fails at dns_timeout
    as glibc fails after its own timeout x attempts (5 s x 2 here): EAI_AGAIN, h_errno
    TRY_AGAIN, neither buffer written; with NI_NAMEREQD too."""
    args = ["10.1.2.3,80,0", "2001:db8::1,443,%d" % NI_NAMEREQD]
    native = in_ns(py(PY_GNI, *args), options="options timeout:1 attempts:1", preload=False)
    assert native["stdout"].count("rc=-3 b'untouched") == 2, native
    assert native["stdout"].count("h_errno=2") == 2, native
    for arg, name in zip(args, ("10.1.2.3", "2001:db8::1")):
        out = in_ns(py(PY_GNI, arg), env_extra={"TIMEBOX_DNS_TIMEOUT": "300ms"})
        assert out["rc"] == 0, out
        assert out["stdout"].splitlines()[0] == native["stdout"].splitlines()[args.index(arg)], \
            (native, out)
        assert_cut(out, 300, name)


def test_getnameinfo_no_lookup_never_slowed():
    """No resolver to wait for: a numeric host (with or without the service's name, which
    /etc/services gives), an address /etc/hosts names, AF_UNIX. Each answer is libc's, no
    thread is started, nothing is said, however short dns_timeout and however dead the
    resolver."""
    args = ["10.1.2.3,80,%d" % (NI_NUMERICHOST | NI_NUMERICSERV),
            "10.1.2.3,80,%d" % NI_NUMERICHOST, "2001:db8::1,443,%d" % NI_NUMERICHOST,
            "127.0.0.1,22,0", "127.0.0.1,22,%d" % NI_NAMEREQD, "127.0.0.1,22,0,4,32",
            "unix:/run/tb.sock,0,0", "10.1.2.3,80,0,0,32"]
    native = in_ns(py(PY_GNI, *args), preload=False)
    out = in_ns(py(PY_GNI, *args), env_extra={"TIMEBOX_DNS_TIMEOUT": "1ms"})
    assert out["rc"] == native["rc"] == 0, (native, out)
    assert out["stdout"] == native["stdout"], (native, out)
    assert "127.0.0.1,22,0 rc=0 b'localhost" in out["stdout"], out
    assert out["stdout"].endswith("threads 1\n"), out
    assert not lib.tb_lines(out["stderr"]), out
    assert out["elapsed_ms"] < 5000, out


def test_getnameinfo_answered_unchanged():
    """A resolver that answers: the PTR name, the numeric fallback of an unknown address,
    NI_NAMEREQD's EAI_NONAME, a host buffer too short, a service buffer too short after the
    host was written (EAI_OVERFLOW with the host in place) - all as natively."""
    args = ["127.0.0.7,80,0", "127.0.0.7,80,%d" % NI_NAMEREQD, "10.1.2.3,80,0",
            "10.1.2.3,80,%d" % NI_NAMEREQD, "127.0.0.7,80,0,5,32", "127.0.0.7,80,0,1025,3"]
    native = in_ns(py(PY_GNI, *args), mode="answer", preload=False)
    out = in_ns(py(PY_GNI, *args), mode="answer", env_extra={"TIMEBOX_DNS_TIMEOUT": "2s"})
    # Every line but the thread count: these lookups went through a resolver thread.
    assert out["stdout"].splitlines()[:-1] == native["stdout"].splitlines()[:-1], (native, out)
    assert "127.0.0.7,80,0 rc=0 b'svc.tbtest" in out["stdout"], out
    assert "127.0.0.7,80,0,1025,3 rc=-12 b'svc.tbtest" in out["stdout"], out
    assert not lib.tb_lines(out["stderr"]), out


def test_gethostbyaddr_cut_at_dns_timeout():
    """gethostbyaddr, gethostbyaddr_r and python's socket.gethostbyaddr on a silent resolver
    fail at dns_timeout as glibc fails after its own timeout x attempts: NULL with h_errno
    TRY_AGAIN, errno 0; the _r call returns 0 (glibc's "not found") with TRY_AGAIN in
    *h_errnop and in h_errno."""
    args = ["h,10.1.2.3", "r,2001:db8::1", "py,10.1.2.3"]
    native = in_ns(py(PY_GHBA, *args), options="options timeout:1 attempts:1", preload=False)
    lines = native["stdout"].splitlines()
    assert lines[0] == "h,10.1.2.3 NULL h_errno=2 errno=0", native
    assert lines[1] == "r,2001:db8::1 rc=0 herr=2 NULL h_errno=2 errno=0", native
    assert lines[2] == "py,10.1.2.3 herror (2, 'Host name lookup failure')", native
    for i, (arg, name) in enumerate(zip(args, ("10.1.2.3", "2001:db8::1", "10.1.2.3"))):
        out = in_ns(py(PY_GHBA, arg), env_extra={"TIMEBOX_DNS_TIMEOUT": "300ms"})
        assert out["rc"] == 0, out
        assert out["stdout"].splitlines()[0] == lines[i], (native, out)
        assert_cut(out, 300, name)


def test_gethostbyaddr_no_lookup_never_slowed():
    """No resolver to wait for: an address /etc/hosts names, :: (glibc says "not found"
    itself), a family other than IPv4 and IPv6, a length shorter than the family's address.
    Each answer is libc's, no thread is started, nothing is said, however short dns_timeout
    and however dead the resolver."""
    args = ["h,127.0.0.1", "r,127.0.0.1", "py,127.0.0.1", "h,::", "r,::",
            "h,10.1.2.3,%d,4" % socket.AF_UNIX, "r,10.1.2.3,%d,4" % socket.AF_UNIX,
            "h,10.1.2.3,%d,3" % socket.AF_INET, "r,2001:db8::1,%d,4" % socket.AF_INET6]
    native = in_ns(py(PY_GHBA, *args), preload=False)
    out = in_ns(py(PY_GHBA, *args), env_extra={"TIMEBOX_DNS_TIMEOUT": "1ms"})
    assert out["rc"] == native["rc"] == 0, (native, out)
    assert out["stdout"] == native["stdout"], (native, out)
    assert "h,127.0.0.1 localhost [] 2/4 ['7f000001'] h_errno=12345" in out["stdout"], out
    assert out["stdout"].endswith("threads 1\n"), out
    assert not lib.tb_lines(out["stderr"]), out
    assert out["elapsed_ms"] < 5000, out


def test_gethostbyaddr_answered_unchanged():
    """A resolver that answers: the PTR name (also of an IPv4-mapped address, which glibc
    answers as IPv4), NXDOMAIN's HOST_NOT_FOUND, a buffer too short for the _r call - all as
    natively. gethostbyaddr's result is static storage, as glibc's: it outlives the thread
    that asked, and calls of the other functions do not touch it (freed memory is marked,
    so a result freed early would read differently)."""
    args = ["h,127.0.0.7", "r,127.0.0.7", "py,127.0.0.7", "h,::ffff:127.0.0.7", "h,10.1.2.3",
            "r,10.1.2.3", "r,127.0.0.7,%d,4,16" % socket.AF_INET, "keep,127.0.0.7"]
    perturb = {"MALLOC_PERTURB_": "165", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    native = in_ns(py(PY_GHBA, *args), mode="answer", preload=False, env_extra=perturb)
    out = in_ns(py(PY_GHBA, *args), mode="answer",
                env_extra=dict(perturb, TIMEBOX_DNS_TIMEOUT="2s"))
    # Every line but the thread count: these lookups went through a resolver thread.
    assert out["stdout"].splitlines()[:-1] == native["stdout"].splitlines()[:-1], (native, out)
    assert "h,127.0.0.7 svc.tbtest [] 2/4 ['7f000007'] h_errno=12345" in out["stdout"], out
    assert "keep,127.0.0.7 svc.tbtest [] 2/4 ['7f000007']" in out["stdout"], out
    assert "h,10.1.2.3 NULL h_errno=1" in out["stdout"], out
    assert "rc=34 herr=-1 NULL" in out["stdout"], out
    assert not lib.tb_lines(out["stderr"]), out
