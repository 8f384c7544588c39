"""A loopback TCP proxy that records the Kafka requests and responses crossing it.

    broker = BrokerProcess()
    proxy = RecordingProxy(broker.port)           # listens on 127.0.0.1:proxy.port
    broker.properties["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    broker.start()
    ... a stock client bootstraps from 127.0.0.1:{proxy.port} ...
    fetches = proxy.fetches()                     # FetchExchange per Fetch seen

Clients learn broker addresses from Metadata, so the broker must advertise the proxy or the
client leaves it after bootstrap.  Bytes are forwarded unchanged; frames are parsed on the
side.  Fetch requests are decoded with kafka-python's generated classes (session id, epoch,
partitions sent, partitions forgotten); Fetch responses only up to their session id (the
records are not decoded).  Threads: one accepting, two per connection.
"""
from __future__ import annotations

import dataclasses
import socket
import struct
import threading

from kafka.protocol.consumer import FetchRequest

from kwire.codecs import messages

__all__ = ["RecordingProxy", "FetchExchange"]

_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")


@dataclasses.dataclass
class FetchExchange:
    version: int
    session_id: int
    epoch: int
    partitions: int                       # partitions listed in the request
    forgotten: int
    by_id: bool                           # topics named by id (v13+)
    response_error: int | None = None
    response_session_id: int | None = None


def _frames(buffer: bytearray):
    while len(buffer) >= 4:
        size = _I32.unpack_from(buffer)[0]
        if len(buffer) < 4 + size:
            return
        frame = bytes(buffer[4:4 + size])
        del buffer[:4 + size]
        yield frame


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


class RecordingProxy:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.api_calls: list[tuple[int, int]] = []             # (api_key, version) in arrival order
        self._fetches: list[FetchExchange] = []
        self._pending: dict[tuple[int, int], tuple[int, int, FetchExchange | None]] = {}
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def fetches(self) -> list[FetchExchange]:
        with self.lock:
            return list(self._fetches)

    def versions(self, api_key: int) -> set[int]:
        with self.lock:
            return {v for k, v in self.api_calls if k == api_key}

    def close(self) -> None:
        self._closed = True
        for s in [self.listener, *self._sockets]:
            try:
                s.close()
            except OSError:
                pass

    # -- plumbing ------------------------------------------------------------------------
    def _accept(self) -> None:
        conn_id = 0
        while not self._closed:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:
                return
            conn_id += 1
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, conn_id, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, conn_id, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, conn_id: int, requests: bool) -> None:
        buffer = bytearray()
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                buffer += data
                for frame in _frames(buffer):
                    try:
                        (self._request if requests else self._response)(conn_id, frame)
                    except Exception:       # a frame we can't parse must not stop the traffic
                        pass
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _request(self, conn_id: int, frame: bytes) -> None:
        api_key, version, correlation_id = _HEADER.unpack_from(frame)
        exchange = None
        if api_key == 1:
            pos = 8
            (client_id_len,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(client_id_len, 0)
            if messages.request_is_flexible(1, version):
                count, pos = _uvarint(frame, pos)
                for _ in range(count):
                    _tag, pos = _uvarint(frame, pos)
                    size, pos = _uvarint(frame, pos)
                    pos += size
            req = FetchRequest.decode(memoryview(frame)[pos:], version=version)
            exchange = FetchExchange(
                version, getattr(req, "session_id", 0), getattr(req, "session_epoch", -1),
                sum(len(t.partitions) for t in req.topics),
                sum(len(t.partitions) for t in getattr(req, "forgotten_topics_data", None) or ()), version >= 13)
        with self.lock:
            self.api_calls.append((api_key, version))
            self._pending[(conn_id, correlation_id)] = (api_key, version, exchange)
            if exchange is not None:
                self._fetches.append(exchange)

    def _response(self, conn_id: int, frame: bytes) -> None:
        (correlation_id,) = _I32.unpack_from(frame)
        with self.lock:
            api_key, version, exchange = self._pending.pop((conn_id, correlation_id), (None, 0, None))
        if exchange is None or version < 7:
            return
        pos = 4
        if messages.response_header_v1(api_key, version):
            count, pos = _uvarint(frame, pos)
            for _ in range(count):
                _tag, pos = _uvarint(frame, pos)
                size, pos = _uvarint(frame, pos)
                pos += size
        _throttle, error, session_id = struct.unpack_from(">ihi", frame, pos)
        exchange.response_error, exchange.response_session_id = error, session_id
