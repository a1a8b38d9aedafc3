"""Real servers for the end-to-end tests, each on 127.0.0.1 with a free port, in a temp dir,
as an unprivileged user where the server refuses root: PostgreSQL, MariaDB and OpenSSH's
sshd (redis-server is test_programs.RedisServer). Each is a context manager that starts the
server, waits until it answers, and stops it cleanly; it skips (lib.skip) only when the
server's package is not installed.

Start-up is what makes these tests slow, so what can be made once is made once: initdb's
cluster is built into build/e2e-cache the first time and copied for each run; MariaDB starts
from an empty data directory (with --skip-grant-tables it needs no system tables)."""

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import lib

CACHE = os.path.join(lib.BUILD, "e2e-cache")


def _unprivileged(preferred):
    """(uid, gid) of the first existing user of preferred, else nobody's."""
    for name in list(preferred) + ["nobody"]:
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        return pw.pw_uid, pw.pw_gid
    lib.skip("no unprivileged user (%s, nobody) to run the server as" % ", ".join(preferred))


def _chown_tree(path, uid, gid):
    for top, dirs, files in os.walk(path):
        os.chown(top, uid, gid)
        for name in files:
            os.chown(os.path.join(top, name), uid, gid)


def _accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class _Server:
    """Common part: a Popen'd server in self.dir, stopped by stop_signal then SIGKILL."""

    stop_signal = signal.SIGTERM
    name = "server"

    def __init__(self):
        self.dir = None
        self.proc = None
        self.port = None
        self.started_ms = None      # how long start-up took, for the report
        self._logf = None

    def __enter__(self):
        begin = time.monotonic()
        self.dir = tempfile.mkdtemp(prefix="tb-%s-" % self.name)
        os.chmod(self.dir, 0o755)
        try:
            self._start()
            lib.wait_for(lambda: self.proc.poll() is not None or self._ready(), timeout=30,
                         interval=0.05, what="%s to accept" % self.name)
            if self.proc.poll() is not None:
                raise AssertionError("%s exited with %s:\n%s" % (
                    self.name, self.proc.returncode, self.log()))
        except BaseException:
            self._stop()
            raise
        self.started_ms = (time.monotonic() - begin) * 1000.0
        return self

    def __exit__(self, *exc):
        self._stop()
        return False

    def _stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._logf is not None:
            self._logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _popen(self, argv, **kw):
        self._logf = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._logf,
                                     stderr=subprocess.STDOUT, env=lib.native_env(clean=True),
                                     **kw)

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""


# ---- PostgreSQL ----------------------------------------------------------------------------

def _pg_bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    if not found or shutil.which("psql") is None:
        lib.skip("PostgreSQL is not installed (tests/deps.sh installs postgresql)")
    return os.path.dirname(found[-1])


class PgServer(_Server):
    """postgres on a free port, trust authentication, user postgres, database postgres, run
    as the postgres user (postgres refuses root). Its Unix socket lives in the temp dir."""

    name = "pg"
    stop_signal = signal.SIGINT          # fast shutdown

    def _template(self, bindir, uid, gid):
        """A fresh initdb cluster, made once per build and version, copied for each run."""
        version = bindir.split("/")[-2]
        path = os.path.join(CACHE, "pg%s-%d" % (version, uid))
        if os.path.isdir(path):
            return path
        os.makedirs(CACHE, exist_ok=True)
        work = tempfile.mkdtemp(prefix="pg-init-", dir=CACHE)
        os.chmod(work, 0o755)
        os.chown(work, uid, gid)
        data = os.path.join(work, "data")
        res = subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-A", "trust",
                              "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"],
                             user=uid, group=gid, extra_groups=[], capture_output=True,
                             text=True, env=lib.native_env(clean=True), cwd=work)
        assert res.returncode == 0, "initdb failed: %s%s" % (res.stdout, res.stderr)
        try:
            os.rename(data, path)        # atomic: another run may have made it meanwhile
        except OSError:
            pass
        shutil.rmtree(work, ignore_errors=True)
        return path

    def _start(self):
        bindir = _pg_bindir()
        uid, gid = _unprivileged(["postgres"])
        template = self._template(bindir, uid, gid)
        self.data = os.path.join(self.dir, "data")
        subprocess.run(["cp", "-a", template, self.data], check=True)
        os.chown(self.dir, uid, gid)
        self.port = lib.free_port()
        self._popen([os.path.join(bindir, "postgres"), "-D", self.data, "-k", self.dir,
                     "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
                     "-c", "fsync=off", "-c", "logging_collector=off"],
                    user=uid, group=gid, extra_groups=[], cwd=self.dir)

    def _ready(self):
        if not _accepts(self.port):
            return False
        return self.psql("select 1", port=self.port).returncode == 0

    def psql_argv(self, sql, port=None):
        return ["psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p",
                str(port or self.port), "-U", "postgres", "-d", "postgres", "-c", sql]

    def psql(self, sql, port=None, env=None, timeout=10):
        return lib.run(self.psql_argv(sql, port), env=env or lib.native_env(clean=True),
                       timeout=timeout)


# ---- MariaDB -------------------------------------------------------------------------------

class MariaServer(_Server):
    """mariadbd on a free port from an empty data directory, --skip-grant-tables (any user,
    no password), run as the mysql user."""

    name = "mariadb"

    def _start(self):
        if shutil.which("mariadbd", path="/usr/sbin:/usr/bin") is None or \
                shutil.which("mariadb") is None:
            lib.skip("MariaDB is not installed (tests/deps.sh installs mariadb-server)")
        uid, gid = _unprivileged(["mysql"])
        data = os.path.join(self.dir, "data")
        os.mkdir(data)
        _chown_tree(self.dir, uid, gid)
        self.port = lib.free_port()
        self._popen([shutil.which("mariadbd", path="/usr/sbin:/usr/bin"), "--no-defaults",
                     "--datadir=" + data, "--socket=" + os.path.join(self.dir, "sock"),
                     "--port=%d" % self.port, "--bind-address=127.0.0.1",
                     "--pid-file=" + os.path.join(self.dir, "pid"), "--skip-grant-tables",
                     "--skip-name-resolve", "--skip-log-bin", "--innodb-log-file-size=4M",
                     "--innodb-buffer-pool-size=16M",
                     "--innodb-data-file-path=ibdata1:4M:autoextend"],
                    user=uid, group=gid, extra_groups=[], cwd=self.dir)

    def _ready(self):
        return _accepts(self.port) and self.mariadb("select 1", timeout=5).returncode == 0

    def mariadb_argv(self, sql, port=None):
        return ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(port or self.port),
                "-u", "root", "-N", "-B", "-e", sql]

    def mariadb(self, sql, port=None, env=None, timeout=10):
        return lib.run(self.mariadb_argv(sql, port), env=env or lib.native_env(clean=True),
                       timeout=timeout)


# ---- OpenSSH -------------------------------------------------------------------------------

class SshServer(_Server):
    """sshd -D on a free port with a fresh host key, accepting a fresh client key for the
    current user (key authentication only, UsePAM no, StrictModes no). sshd runs as root (its
    privilege separation needs it); the client is `ssh_argv(...)`."""

    name = "sshd"

    def _start(self):
        sshd = shutil.which("sshd", path="/usr/sbin:/usr/bin")
        if sshd is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
            lib.skip("OpenSSH is not installed (tests/deps.sh installs openssh-server)")
        if os.geteuid() != 0:
            lib.skip("sshd with privilege separation needs root to start")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # its privilege-separation dir
        self.hostkey = os.path.join(self.dir, "host_ed25519")
        self.key = os.path.join(self.dir, "client_ed25519")
        for path in (self.hostkey, self.key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path],
                           check=True, stdin=subprocess.DEVNULL)
        shutil.copy(self.key + ".pub", os.path.join(self.dir, "authorized_keys"))
        self.port = lib.free_port()
        config = os.path.join(self.dir, "sshd_config")
        with open(config, "w") as f:
            f.write("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\n"
                    "PidFile %s\nUsePAM no\nStrictModes no\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                    "PrintMotd no\nPrintLastLog no\nUseDNS no\nSubsystem sftp internal-sftp\n"
                    % (self.port, self.hostkey, os.path.join(self.dir, "authorized_keys"),
                       os.path.join(self.dir, "sshd.pid")))
        self._popen([sshd, "-D", "-e", "-f", config])

    def _ready(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                return s.recv(4).startswith(b"SSH-")
        except OSError:
            return False

    def ssh_argv(self, command=None, port=None, tty=False):
        argv = ["ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                "-o", "LogLevel=ERROR", "-i", self.key, "-p", str(port or self.port)]
        if tty:
            argv.append("-tt")
        argv.append("%s@127.0.0.1" % pwd.getpwuid(os.geteuid()).pw_name)
        if command is not None:
            argv.append(command)
        return argv
