"""A recording TCP proxy in front of any Kafka-compatible broker: which API versions a client sends.

    proxy = RecordingProxy("broker.example:9092")       # listens on 127.0.0.1:<ephemeral>
    ... a client bootstraps from proxy.bootstrap ...
    proxy.take()          # [(api_key, api_version, client_id), ...] since the last take()
    proxy.close()

A client learns broker addresses from the broker (Metadata, FindCoordinator, DescribeCluster)
and reconnects to them, which would take it past a plain proxy.  So every address the broker
advertises gets a listener of its own on 127.0.0.1, and those three responses are rewritten
to point at the listeners: the client never leaves the proxy, against one broker or a cluster,
without configuring the broker.  Requests are forwarded byte for byte as they arrive; only
their headers are read (4-byte size, int16 api_key, int16 api_version, int32 correlation_id,
nullable string client_id).  Responses are forwarded frame by frame; only the three above are
decoded and re-encoded, with kafka-python's generated classes (a response that does not
re-encode is forwarded unchanged, and counted in ``rewrite_errors``).  Not rewritten: the
optional leader endpoints of Produce v10+/Fetch v16+ responses (KIP-951), sent on a leader
change, which a one-broker target never has.

Threads: one accepting per listener, two per connection; all daemons, all ended by ``close()``.
"""
from __future__ import annotations

import socket
import struct
import threading

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")   # api_key, api_version, correlation_id, client_id length
METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60
MAX_RESPONSE = 256 << 20           # a larger size prefix is not a Kafka response: stop parsing


def parse_request_header(frame: bytes) -> tuple[int, int, int, str | None] | None:
    """(api_key, api_version, correlation_id, client_id) of a request frame (size prefix removed),
    or None when it is too short to hold a header."""
    if len(frame) < _HEADER.size:
        return None
    api_key, version, correlation_id, n = _HEADER.unpack_from(frame)
    client_id = None
    if 0 <= n <= len(frame) - _HEADER.size:
        client_id = frame[_HEADER.size:_HEADER.size + n].decode("utf-8", "replace")
    return api_key, version, correlation_id, client_id


def _response_class(api_key: int):
    if api_key == METADATA:
        from kafka.protocol.metadata import MetadataResponse
        return MetadataResponse
    if api_key == FIND_COORDINATOR:
        from kafka.protocol.metadata import FindCoordinatorResponse
        return FindCoordinatorResponse
    from kafka.protocol.admin import DescribeClusterResponse
    return DescribeClusterResponse


def rewrite_addresses(api_key: int, version: int, frame: bytes, address_for) -> bytes:
    """The response ``frame`` (header included, size prefix removed) with every broker
    address replaced by ``address_for((host, port)) -> (host, port)``."""
    cls = _response_class(api_key)
    pos = 4                                    # correlation_id, then tagged fields if flexible
    if cls.flexible_version_q(version):
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos += size
    response = cls.decode(frame[pos:], version=version)
    response._header = None    # re-encoded body only: kafka-python cannot re-encode a decoded response header
    endpoints = []
    if api_key == FIND_COORDINATOR:
        endpoints = list(getattr(response, "coordinators", None) or ())
        if version < 4:
            endpoints.append(response)
    else:
        endpoints = list(response.brokers or ())
    for e in endpoints:
        if e.host and e.port > 0:
            e.host, e.port = address_for((e.host, e.port))
    return frame[:pos] + bytes(response.encode(version=version))


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
    def __init__(self, bootstrap: str, listen_host: str = "127.0.0.1"):
        host, _, port = bootstrap.rpartition(":")
        self.listen_host = listen_host
        self.lock = threading.Lock()
        self.rewrite_errors = 0
        self._requests: list[tuple[int, int, str | None]] = []
        self._listeners: dict[tuple[str, int], socket.socket] = {}
        self._addresses: dict[tuple[str, int], tuple[str, int]] = {}
        self._sockets: list[socket.socket] = []
        self._closed = False
        self.bootstrap = "%s:%d" % self._listen((host, int(port)))

    # -- what was seen -------------------------------------------------------------------------
    def take(self) -> list[tuple[int, int, str | None]]:
        """The requests seen since the last call, in arrival order, and forget them."""
        with self.lock:
            out, self._requests = self._requests, []
        return out

    def close(self) -> None:
        self._closed = True
        with self.lock:
            sockets = [*self._listeners.values(), *self._sockets]
        for s in sockets:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- listeners -----------------------------------------------------------------------------
    def _listen(self, upstream: tuple[str, int]) -> tuple[str, int]:
        """The proxy address standing for ``upstream``, listening from now on."""
        with self.lock:
            if upstream in self._addresses:
                return self._addresses[upstream]
            listener = socket.create_server((self.listen_host, 0))
            self._listeners[upstream] = listener
            self._addresses[upstream] = (self.listen_host, listener.getsockname()[1])
        threading.Thread(target=self._accept, args=(listener, upstream), daemon=True,
                         name=f"compat-proxy-{upstream[0]}:{upstream[1]}").start()
        return self._addresses[upstream]

    def _accept(self, listener: socket.socket, upstream: tuple[str, int]) -> None:
        while not self._closed:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()    # the client sees the broker as unreachable, as it would
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pending: dict[int, tuple[int, int]] = {}   # correlation_id -> (api_key, version)
            with self.lock:
                self._sockets += [client, server]
            threading.Thread(target=self._requests_pump, args=(client, server, pending), daemon=True).start()
            threading.Thread(target=self._responses_pump, args=(server, client, pending), daemon=True).start()

    # -- pumps ---------------------------------------------------------------------------------
    def _requests_pump(self, src, dst, pending) -> None:
        buffer = bytearray()
        need = 0          # bytes of the current frame still to skip (its header is read)
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                buffer += data
                while True:
                    if need:
                        cut = min(need, len(buffer))
                        del buffer[:cut]
                        need -= cut
                        if need:
                            break
                    if len(buffer) < 4 + _HEADER.size:
                        break
                    size = _SIZE.unpack_from(buffer)[0]
                    n = _HEADER.unpack_from(buffer, 4)[3]
                    if len(buffer) < 4 + min(size, _HEADER.size + max(n, 0)):
                        break     # the client_id is still on its way
                    header = parse_request_header(bytes(buffer[4:4 + min(size, _HEADER.size + max(n, 0))]))
                    if size < _HEADER.size or header is None:
                        buffer.clear()        # not Kafka framing: forward, stop reading
                        need = 1 << 62
                        break
                    api_key, version, correlation_id, client_id = header
                    with self.lock:
                        self._requests.append((api_key, version, client_id))
                    if api_key in (METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER):
                        pending[correlation_id] = (api_key, version)
                    need = 4 + size
                dst.sendall(data)   # after reading the header, so ``pending`` is ready for the response
        except OSError:
            pass
        finally:
            _shut(src, dst)

    def _responses_pump(self, src, dst, pending) -> None:
        buffer = bytearray()
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                buffer += data
                out = bytearray()
                while len(buffer) >= 8:
                    size = _SIZE.unpack_from(buffer)[0]
                    if size < 4 or size > MAX_RESPONSE:
                        out += buffer          # not a Kafka response: pass everything through
                        buffer.clear()
                        break
                    if len(buffer) < 4 + size:
                        break
                    frame = bytes(buffer[4:4 + size])
                    del buffer[:4 + size]
                    asked = pending.pop(_SIZE.unpack_from(frame)[0], None)
                    if asked is not None:
                        try:
                            frame = rewrite_addresses(*asked, frame, self._listen)
                        except Exception:    # forwarded as it came: the client may leave the proxy
                            with self.lock:
                                self.rewrite_errors += 1
                    out += _SIZE.pack(len(frame)) + frame
                if out:
                    dst.sendall(out)
            if buffer:
                dst.sendall(buffer)
        except OSError:
            pass
        finally:
            _shut(src, dst)


def _shut(*sockets) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
