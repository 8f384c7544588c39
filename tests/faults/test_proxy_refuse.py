"""tests/support/proxy.py's ``refuse()``: a partition that answers RST (fast lane: in-process sockets)."""
from __future__ import annotations

import os
import socket
import socketserver
import threading

import pytest

from tests.support.proxy import TcpProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def proxy():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    p = TcpProxy("127.0.0.1", server.server_address[1])
    yield p
    p.close()
    server.shutdown()
    server.server_close()


def echo(p: TcpProxy, s: socket.socket | None = None) -> bytes:
    s = s or socket.create_connection(("127.0.0.1", p.port), timeout=2)
    s.sendall(b"ping")
    return s.recv(4)


def reset_seen(s: socket.socket) -> bool:
    """True when the connection was reset (or closed) rather than answered."""
    try:
        s.sendall(b"ping")
        return s.recv(4) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def new_connection_reset(p: TcpProxy) -> bool:
    """A new connection is reset, at connect() already or at its first exchange."""
    try:
        s = socket.create_connection(("127.0.0.1", p.port), timeout=2)
    except ConnectionResetError:
        return True
    return reset_seen(s)


def test_refuse_resets_current_and_new_connections_until_heal(proxy):
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    assert echo(proxy, s) == b"ping"
    proxy.refuse()
    assert proxy.refusing and reset_seen(s)
    assert new_connection_reset(proxy)
    proxy.heal()
    assert not proxy.refusing and echo(proxy) == b"ping"


def test_refuse_from_pids_spares_other_processes(proxy):
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    assert echo(proxy, s) == b"ping"
    proxy.refuse(from_pids=[os.getppid()])          # not us: our connection carries on
    assert echo(proxy, s) == b"ping"
    proxy.refuse(from_pids=[os.getpid()])
    assert reset_seen(s)
    proxy.heal()
    assert echo(proxy) == b"ping"
