"""tests/support/proxy.py: an echo server behind the proxy, cut and healed (about 1 s in all)."""
from __future__ import annotations

import os
import select
import socket
import socketserver
import threading
import time

import pytest

from tests.support.proxy import TcpProxy

QUIET_S = 0.3       # long enough to see that nothing crosses a partition


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo):
    p = TcpProxy("127.0.0.1", echo)
    yield p
    p.close()


def connect(proxy: TcpProxy) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    return s


def recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def wait_until(predicate, timeout: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def assert_silent(s: socket.socket) -> None:
    s.settimeout(QUIET_S)
    with pytest.raises(TimeoutError):
        s.recv(1)
    s.settimeout(2)


def test_forwards_both_ways(proxy):
    with connect(proxy) as s:
        payload = bytes(range(256)) * 1000          # more than one read
        s.sendall(payload)
        assert recv_exactly(s, len(payload)) == payload
    assert proxy.address == f"127.0.0.1:{proxy.port}"


def test_partition_freezes_a_connection_and_heal_delivers_everything(proxy):
    with connect(proxy) as s:
        s.sendall(b"before")
        assert recv_exactly(s, 6) == b"before"
        proxy.partition()
        assert proxy.partitioned
        s.sendall(b"during")
        assert_silent(s)                        # no answer, and no FIN or RST either
        assert proxy.connection_count() == 1
        proxy.heal()
        assert recv_exactly(s, 6) == b"during"  # queued, not lost
        s.sendall(b"after")
        assert recv_exactly(s, 5) == b"after"


def test_a_connection_made_during_a_partition_is_held_until_heal(proxy):
    proxy.partition()
    with connect(proxy) as s:                   # accepted: the client cannot tell yet
        s.sendall(b"hello")
        assert_silent(s)
        proxy.heal()
        assert recv_exactly(s, 5) == b"hello"


def test_reset_connections_resets_current_ones_only(proxy):
    with connect(proxy) as s:
        s.sendall(b"x")
        assert recv_exactly(s, 1) == b"x"
        proxy.reset_connections()
        with pytest.raises(ConnectionResetError):
            s.recv(1)
    with connect(proxy) as s:
        s.sendall(b"y")
        assert recv_exactly(s, 1) == b"y"


def test_a_half_close_is_passed_on(proxy):
    with connect(proxy) as s:
        s.sendall(b"last words")
        s.shutdown(socket.SHUT_WR)
        assert recv_exactly(s, 10) == b"last words"
        assert s.recv(1) == b""                 # the echo server saw EOF and closed
    wait_until(lambda: proxy.connection_count() == 0)


def test_an_unreachable_target_resets_the_client():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead_port = unused.getsockname()[1]     # bound, never listening: connections are refused
        with TcpProxy("127.0.0.1", dead_port) as p:
            # the reset can beat the end of a timed connect() (a busy machine resumes the
            # connecting thread late): then connect() itself raises it
            with pytest.raises(ConnectionResetError), connect(p) as s:
                s.recv(1)


def test_close_stops_listening_and_ends_connections(echo):
    p = TcpProxy("127.0.0.1", echo)
    s = connect(p)
    wait_until(lambda: p.connection_count() == 1)   # accepted (a backlog connection would get RST)
    p.partition()                               # close() must also end frozen copiers
    p.close()
    assert s.recv(1) == b""
    s.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", p.port), timeout=1)
    p.close()                                   # idempotent


def test_a_partition_from_one_process_cuts_only_that_processs_connections(proxy):
    import subprocess
    import sys
    child = subprocess.Popen(
        [sys.executable, "-c", "import socket, sys\n"
         f"s = socket.create_connection(('127.0.0.1', {proxy.port}), timeout=5)\n"
         "for line in sys.stdin:\n"
         "    s.sendall(line.encode()); print(s.recv(100).decode(), end='', flush=True)\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child.stdin.write("one\n")
        child.stdin.flush()
        assert child.stdout.readline() == "one\n"
        with connect(proxy) as mine:
            proxy.partition(from_pids={child.pid})
            mine.sendall(b"mine")
            assert recv_exactly(mine, 4) == b"mine"       # this process is not cut
            child.stdin.write("two\n")
            child.stdin.flush()
            with connect(proxy) as later:                 # nor are its new connections
                later.sendall(b"later")
                assert recv_exactly(later, 5) == b"later"
            assert not select.select([child.stdout], [], [], QUIET_S)[0]   # no echo while cut
            proxy.heal()
            assert child.stdout.readline() == "two\n"     # the child's bytes waited for the heal
            proxy.partition(from_pids={os.getpid()})
            mine.sendall(b"cut")
            assert_silent(mine)
            proxy.heal()
            assert recv_exactly(mine, 3) == b"cut"
    finally:
        child.kill()
        child.wait()
