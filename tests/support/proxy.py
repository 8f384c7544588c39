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

``partition(from_pids={pid})`` cuts only the connections a given process
opened (found through /proc: the client end's socket inode among the
process's descriptors).  All brokers share one loopback address, so this is
how a test isolates one broker from the others: every broker advertises a
proxy, and a partition of broker X cuts X's own proxy for everyone and the
other brokers' proxies for X alone.

``reset_connections()`` is the other failure, a peer or firewall resetting:
every current connection is closed with RST on both sides.  ``refuse()`` keeps
doing so for the length of a partition: current connections (all, or those of
``from_pids``) are reset and new ones are reset as soon as they are accepted,
until ``heal()``; the far end learns at once, where ``partition()`` leaves it to
its timeouts.  (A refused SYN would be answered with RST before ``accept()``;
here the handshake completes first, and the first read or write then fails.)

Bytes already read when ``partition()`` is called may still be delivered, like
packets already on the wire; nothing is read after it returns.  One thread
accepts, two threads per connection copy bytes; tests open tens of
connections, not thousands.
"""
from __future__ import annotations

import os
import select
import socket
import struct
import threading
from typing import Iterable

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
        self.up = threading.Event()             # cleared while this connection is cut
        self.up.set()

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
        self._lock = threading.Lock()           # guards _connections, the cut and every read
        self._cut_all = False
        self._cut_pids: frozenset[int] = frozenset()
        self._refuse_all = False
        self._refuse_pids: frozenset[int] = frozenset()
        self._closing = False
        self._connections: list[_Connection] = []
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept_loop)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def partitioned(self) -> bool:
        return self._cut_all or bool(self._cut_pids)

    @property
    def refusing(self) -> bool:
        return self._refuse_all or bool(self._refuse_pids)

    def connection_count(self) -> int:
        """Client connections the proxy holds open now (forwarding or frozen)."""
        with self._lock:
            return sum(not c.closed for c in self._connections)

    # -- control -----------------------------------------------------------------
    def partition(self, from_pids: Iterable[int] | None = None) -> None:
        """Black-hole every current and future connection until ``heal()``, or only those
        opened by the processes ``from_pids``; see the module docstring."""
        with self._lock:            # a copier reads only under the lock, after checking its flag
            if from_pids is None:
                self._cut_all = True
            else:
                self._cut_pids |= frozenset(from_pids)
            for conn in self._connections:
                if self._is_cut(conn):
                    conn.up.clear()

    def refuse(self, from_pids: Iterable[int] | None = None) -> None:
        """Reset (RST) every current connection and every new one until ``heal()``, or only
        those opened by the processes ``from_pids``; see the module docstring."""
        with self._lock:
            if from_pids is None:
                self._refuse_all = True
            else:
                self._refuse_pids |= frozenset(from_pids)
            victims = [conn for conn in self._connections if self._is_refused(conn)]
        for conn in victims:
            self._close(conn, reset=True)
            conn.up.set()                   # a copier frozen by a partition wakes up and exits

    def heal(self) -> None:
        """Forward again: frozen connections resume, held ones connect upstream, new ones are
        no longer refused."""
        with self._lock:
            self._cut_all, self._cut_pids = False, frozenset()
            self._refuse_all, self._refuse_pids = False, frozenset()
            for conn in self._connections:
                conn.up.set()

    def _is_cut(self, conn: _Connection) -> bool:
        """Under the lock: whether the current cut applies to ``conn``."""
        if self._cut_all:
            return True
        return bool(self._cut_pids) and _client_inode(conn.client) in _socket_inodes(self._cut_pids)

    def _is_refused(self, conn: _Connection) -> bool:
        """Under the lock: whether ``refuse()`` applies to ``conn``."""
        if self._refuse_all:
            return True
        return bool(self._refuse_pids) and _client_inode(conn.client) in _socket_inodes(self._refuse_pids)

    def reset_connections(self) -> None:
        """Close every current connection with RST on both sides (new ones are not affected)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            self._close(conn, reset=True)

    def close(self) -> None:
        """Stop listening, close every connection and end the threads.  Idempotent."""
        self._closing = True
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.up.set()                   # wake copiers frozen by a partition so they exit
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
                refused = self._is_refused(conn)
                if self._is_cut(conn):
                    conn.up.clear()
                if not refused:
                    self._connections.append(conn)
            if refused:
                self._close(conn, reset=True)
                continue
            if self._closing:               # close() may have taken the list before the append
                self._close(conn)
                return
            self._spawn(self._connect_upstream, conn)

    def _connect_upstream(self, conn: _Connection) -> None:
        conn.up.wait()                      # a connection made during a partition is held here
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
                conn.up.wait()
                if not select.select([src], [], [], _POLL_S)[0]:
                    continue
                with self._lock:
                    if not conn.up.is_set():
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


def _client_inode(client: socket.socket) -> int | None:
    """The socket inode of the far (client) end of an accepted loopback connection, from
    /proc/net/tcp: the row whose local address is the client's and remote address ours."""
    try:
        peer, local = client.getpeername()[:2], client.getsockname()[:2]
    except OSError:
        return None
    want = (_hex_address(peer), _hex_address(local))
    try:
        with open("/proc/net/tcp", encoding="ascii") as f:
            next(f)
            for line in f:
                fields = line.split()
                if (fields[1], fields[2]) == want:
                    return int(fields[9])
    except OSError:
        pass
    return None


def _hex_address(address: tuple[str, int]) -> str:
    """``("127.0.0.1", 9092)`` as /proc/net/tcp writes it: ``0100007F:2384``."""
    packed = socket.inet_aton(address[0])
    return f"{struct.unpack('<I', packed)[0]:08X}:{address[1]:04X}"


def _socket_inodes(pids: Iterable[int]) -> set[int]:
    """Inodes of the sockets the processes ``pids`` hold open."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes
