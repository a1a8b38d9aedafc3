"""A TCP proxy on 127.0.0.1 that makes every round trip slow: the server's bytes reach the
client `delay` seconds after they left the server (a one-way latency), the client's bytes
go through at once. Each flight of a multi-turn protocol is therefore late by `delay`.

Threads, python3 stdlib only; used in-process by the end-to-end tests:
    with DelayProxy(("127.0.0.1", server_port), delay=0.3) as proxy:
        run the client against proxy.port
proxy.flights() counts the server->client flights seen so far (a burst that follows a
client->server turn, or the server's greeting), to say how many round trips a client made.
"""

import collections
import socket
import threading
import time


class DelayProxy:
    """Listens on a free 127.0.0.1 port and forwards each accepted connection to target
    (host, port). Bytes from the server are held until `delay` seconds after they were read,
    keeping their order and their spacing; EOF follows the last held byte. Closing the proxy
    closes every connection."""

    def __init__(self, target, delay):
        self.target = target
        self.delay = float(delay)
        self._lsock = socket.socket()
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(64)
        self.port = self._lsock.getsockname()[1]
        self._lock = threading.Lock()
        self._socks = []
        self._flights = 0
        self.trace = []             # (monotonic time, "up" or "down", byte count), as read
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)

    def __enter__(self):
        self._acceptor.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def flights(self):
        """Server->client flights forwarded (or still held) so far, over all connections."""
        with self._lock:
            return self._flights

    def close(self):
        with self._lock:
            self._closed = True
            socks, self._socks = self._socks, []
        for s in [self._lsock] + socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _track(self, s):
        with self._lock:
            if self._closed:
                s.close()
                return False
            self._socks.append(s)
            return True

    def _accept_loop(self):
        while True:
            try:
                csock, _ = self._lsock.accept()
            except OSError:
                return                      # closed
            try:
                ssock = socket.create_connection(self.target, timeout=5)
                ssock.settimeout(None)
            except OSError:
                csock.close()
                continue
            for s in (csock, ssock):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not (self._track(csock) and self._track(ssock)):
                continue
            # The turn marker: set when the client sent, cleared by the server's next burst.
            turn = {"client_spoke": True}
            threading.Thread(target=self._up, args=(csock, ssock, turn), daemon=True).start()
            _Down(self, ssock, csock, turn).start()

    def _up(self, csock, ssock, turn):
        """client -> server, at once."""
        try:
            while True:
                data = csock.recv(65536)
                if not data:
                    break
                turn["client_spoke"] = True
                self._note("up", len(data))
                ssock.sendall(data)
        except OSError:
            pass
        try:
            ssock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _note(self, direction, nbytes):
        with self._lock:
            self.trace.append((time.monotonic(), direction, nbytes))

    def _count_flight(self):
        with self._lock:
            self._flights += 1


class _Down:
    """server -> client, each chunk held until `delay` after it was read. A reader thread
    queues (due time, bytes); a writer thread sends each chunk at its due time."""

    def __init__(self, proxy, ssock, csock, turn):
        self.proxy = proxy
        self.ssock = ssock
        self.csock = csock
        self.turn = turn
        self.queue = collections.deque()
        self.cond = threading.Condition()

    def start(self):
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    def _read(self):
        try:
            while True:
                data = self.ssock.recv(65536)
                if not data:
                    break
                if self.turn["client_spoke"]:
                    self.turn["client_spoke"] = False
                    self.proxy._count_flight()
                self.proxy._note("down", len(data))
                with self.cond:
                    self.queue.append((time.monotonic() + self.proxy.delay, data))
                    self.cond.notify()
        except OSError:
            pass
        with self.cond:
            self.queue.append((time.monotonic() + self.proxy.delay, b""))   # EOF
            self.cond.notify()

    def _write(self):
        while True:
            with self.cond:
                while not self.queue:
                    self.cond.wait()
                due, data = self.queue.popleft()
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            try:
                if not data:
                    self.csock.shutdown(socket.SHUT_WR)
                    return
                self.csock.sendall(data)
            except OSError:
                return
