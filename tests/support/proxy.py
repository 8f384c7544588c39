"""A loopback TCP proxy a test can cut: network partitions without iptables or root.

    proxy = TcpProxy("127.0.0.1", zookeeper.port)   # listens on 127.0.0.1:proxy.port
    broker.properties["zookeeper.connect"] = f"127.0.0.1:{proxy.port}"
    ...
    proxy.partition()      # nothing crosses any more, in either direction
    proxy.heal()           # everything crosses again, nothing was lost
    proxy.close()

A partition black-holes rather than refuses or resets.  On a real network
partition no FIN or RST reaches either side: packets are retransmitted into
the void, the peers notice only through their own timeouts (a ZooKeeper
session expiring, a Kafka request.timeout.ms, a missed heartbeat), and a TCP
connection that both ends kept open carries on after the partition heals.
Closing the connections instead would tell both sides at once and test a
different, easier failure.  So:

- current connections are frozen, not closed: the proxy stops reading, so
  bytes wait in the kernel's buffers (as unacknowledged segments would) and
  flow again after ``heal()`` unless an end gave up and closed meanwhile;
- new connections are accepted and held, the upstream connection is made only
  after ``heal()``.  A real partition would leave the SYN unanswered; in user
  space the kernel completes the handshake before ``accept()``, so the client
  sees a connection on which nothing ever answers, and times out all the same.

``reset_connections()`` is the other failure, a peer or firewall resetting:
every current connection is closed with RST on both sides.

Bytes already read when ``partition()`` is called may still be delivered, like
packets already on the wire; nothing is read after it returns.  One thread
accepts, two threads per connection copy bytes; tests open tens of
connections, not thousands.
"""
from __future__ import annotations

import select
import socket
import struct
import threading

__all__ = ["TcpProxy"]

_BUFFER = 65536
_POLL_S = 0.05      # how often an idle copier rechecks for close()


class _Connection:
    """One client connection and its upstream connection (made once the network is up)."""

    def __init__(self, client: socket.socket):
        self.client = client
        self.upstream: socket.socket | None = None
        self.closed = False
        self.open_directions = 2

    def sockets(self) -> list[socket.socket]:
        return [s for s in (self.client, self.upstream) if s is not None]


class TcpProxy:
    """Forward 127.0.0.1:``port`` to ``target_host:target_port`` until ``partition()``.

    ``port`` is chosen by the OS unless given.  Raises ``OSError`` if it cannot listen.
    """

    def __init__(self, target_host: str, target_port: int, *, port: int = 0):
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()           # guards _connections and every read
        self._network_up = threading.Event()    # cleared while partitioned
        self._network_up.set()
        self._closing = False
        self._connections: list[_Connection] = []
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept_loop)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def partitioned(self) -> bool:
        return not self._network_up.is_set()

    def connection_count(self) -> int:
        """Client connections the proxy holds open now (forwarding or frozen)."""
        with self._lock:
            return sum(not c.closed for c in self._connections)

    # -- control -----------------------------------------------------------------
    def partition(self) -> None:
        """Black-hole every current and future connection until ``heal()``; see the module docstring."""
        with self._lock:            # a copier reads only under the lock, after checking the flag
            self._network_up.clear()

    def heal(self) -> None:
        """Forward again: frozen connections resume, held ones connect upstream."""
        self._network_up.set()

    def reset_connections(self) -> None:
        """Close every current connection with RST on both sides (new ones are not affected)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            self._close(conn, reset=True)

    def close(self) -> None:
        """Stop listening, close every connection and end the threads.  Idempotent."""
        self._closing = True
        self._network_up.set()              # wake copiers frozen by a partition so they exit
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            self._close(conn)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(2)

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- threads -----------------------------------------------------------------
    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name=f"tcp-proxy-{self.port}")
        self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()

    def _accept_loop(self) -> None:
        # select() with a timeout: close() of a listener does not wake a blocked accept() on Linux
        while not self._closing:
            try:
                if not select.select([self._listener], [], [], _POLL_S)[0]:
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):
                return                      # closed
            conn = _Connection(client)
            with self._lock:
                self._connections.append(conn)
            if self._closing:               # close() may have taken the list before the append
                self._close(conn)
                return
            self._spawn(self._connect_upstream, conn)

    def _connect_upstream(self, conn: _Connection) -> None:
        self._network_up.wait()             # a connection made during a partition is held here
        if self._closing or conn.closed:
            self._close(conn)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            self._close(conn, reset=True)   # the target is down: the client sees a reset
            return
        upstream.settimeout(None)
        conn.upstream = upstream
        if conn.closed:                     # reset or closed while we connected
            self._close(conn)
            return
        self._spawn(self._copy, conn, conn.client, upstream)
        self._copy(conn, upstream, conn.client)

    def _copy(self, conn: _Connection, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not (self._closing or conn.closed):
                self._network_up.wait()
                if not select.select([src], [], [], _POLL_S)[0]:
                    continue
                with self._lock:
                    if not self._network_up.is_set():
                        continue            # partitioned since select(): leave the bytes queued
                    data = src.recv(_BUFFER)
                if not data:
                    dst.shutdown(socket.SHUT_WR)    # pass the half-close on
                    break
                dst.sendall(data)
        except (OSError, ValueError):       # a reset, or a socket closed under us
            self._close(conn, reset=True)
            return
        with self._lock:
            conn.open_directions -= 1
            done = conn.open_directions == 0
        if done:
            self._close(conn)

    def _close(self, conn: _Connection, reset: bool = False) -> None:
        with self._lock:
            conn.closed = True
            if conn in self._connections:
                self._connections.remove(conn)
        for s in conn.sockets():
            try:
                if reset:           # SO_LINGER 0: close() sends RST instead of FIN
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass
