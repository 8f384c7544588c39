"""TLS for kwire's connections: the stdlib's ``ssl.SSLObject`` on memory BIOs, driven directly.

It replaces trio.SSLStream (plus a wrapper that reached into its private TLS object
to decrypt more than one record per read): one large ``recv_into`` into a buffer
shared by all connections (filled and copied into the BIO with no await between),
then every record already received is decrypted straight into the caller's buffer,
with no lock and no pass through the scheduler unless the socket must be waited
for.  Broker CPU per 400 MB of TLS produce: 0.68 s against 0.72 s with
trio.SSLStream (0.27 s over PLAINTEXT); most of what TLS adds is OpenSSL's own
cost per record: librdkafka's records average under 2 KiB here, and decrypting a
1 KiB record takes 1.3 us, a 16 KiB one 4.9 us (bench/README.md).

Why memory BIOs and not OpenSSL on the descriptor (``SSLContext.wrap_socket`` on the
non-blocking socket), which was tried first: without read-ahead, which the ``ssl``
module does not expose, OpenSSL reads each record's 5-byte header and its body
with two ``read(2)`` calls.  librdkafka writes records of 1-2 KiB, so a 200 MB produce
took 226,678 reads (458 ``recvfrom`` calls here) and ran slower (bench/README.md).

Rules this follows:

- Bytes the TLS object produces go out in the order produced: a read may produce
  some (a TLS 1.3 key update answer), so every send to the socket happens under
  one lock and takes all the pending output.  A read sends such output before it
  waits for the peer, never after decrypting (a cancelled send would lose what it
  decrypted).
- A read asks the TLS object first and the socket only when it has nothing
  decrypted left (``SSLWantReadError``).
- close_notify from the peer reads as EOF, and so does a ragged EOF (a client
  closing its socket without close_notify, as librdkafka does).
- TLS 1.2 renegotiation is refused by kwire's contexts (kwire.security.tls); a write that
  asks for a read breaks the stream.
"""
from __future__ import annotations

import socket
import ssl

import trio

DEFAULT_RECEIVE_BYTES = 65536
SOCKET_READ_BYTES = 1 << 20             # ciphertext taken from the socket per read, at most
_socket_buffer = bytearray(SOCKET_READ_BYTES)     # shared: filled and copied with no await between
_socket_view = memoryview(_socket_buffer)


class TlsStream(trio.abc.Stream):
    """A trio.abc.Stream of TLS over a socket it owns (non-blocking, waiting on Trio).

    Build it with ``wrap`` (which takes the descriptor from a trio.SocketStream), then
    ``do_handshake``.  Broken connections (a TLS alert, a reset) raise
    trio.BrokenResourceError with the ssl/OS error as ``__cause__``; use after ``aclose``
    raises trio.ClosedResourceError.  Cancel-safe: a cancelled ``receive_into`` decrypted
    nothing, and the bytes of a cancelled ``send_all`` (encrypted at once) go out before
    anything sent later, so the TLS stream stays whole.  One task may receive while
    another sends.
    """

    def __init__(self, sock: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO,
                 outgoing: ssl.MemoryBIO):
        self._sock = sock
        self._fd = sock.fileno()
        self._tls = tls
        self._incoming = incoming
        self._outgoing = outgoing
        self._send_lock = trio.Lock()
        self._unsent = memoryview(b"")      # ciphertext taken from ``outgoing``, not sent yet
        self._closed = False
        self._eof = False
        self._waited = False           # receive_into: whether it went through the scheduler
        self.handshaken = False

    @classmethod
    def wrap(cls, stream: trio.SocketStream, context: ssl.SSLContext, *, server_side: bool,
             server_hostname: str | None = None) -> "TlsStream":
        """Take over the descriptor of ``stream`` (left detached: closing it does nothing) for
        a TLS connection; no I/O yet.  Raises ssl.SSLError (a bad ``server_hostname``), with
        the descriptor closed."""
        trio_socket = stream.socket
        sock = socket.socket(trio_socket.family, trio_socket.type, trio_socket.proto,
                             fileno=trio_socket.detach())
        sock.setblocking(False)
        try:
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = context.wrap_bio(incoming, outgoing, server_side=server_side,
                                   server_hostname=server_hostname)
        except BaseException:
            sock.close()
            raise
        return cls(sock, tls, incoming, outgoing)

    async def do_handshake(self) -> None:
        """The TLS handshake; raises trio.BrokenResourceError (cause: the ssl.SSLError or
        OSError; none when the peer closed).  Not cancel-safe: a cancelled handshake
        leaves a stream only to close."""
        self._check_open()
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise trio.BrokenResourceError("the peer closed the connection during the handshake")
            except ssl.SSLError as exc:
                await self._flush_quietly()          # the alert, when there is one
                raise trio.BrokenResourceError(exc) from exc
        await self._flush()
        self.handshaken = True

    async def receive_some(self, max_bytes: int | None = None) -> bytearray:
        """Up to ``max_bytes`` (64 KiB by default) of plaintext: everything that can be decrypted
        without waiting once at least one byte is there; empty at EOF."""
        buffer = bytearray(max_bytes or DEFAULT_RECEIVE_BYTES)
        count = await self.receive_into(memoryview(buffer))
        del buffer[count:]
        return buffer

    async def receive_into(self, view: memoryview) -> int:
        """Decrypt straight into ``view`` (it must not be empty): all the records already
        received, reading the socket only while there is none; the byte count, 0 at EOF."""
        self._check_open()
        await trio.lowlevel.checkpoint_if_cancelled()
        self._waited = False
        while True:
            got = self._decrypt_into(view)
            if got is not None:
                break
            if self._unsent or self._outgoing.pending:
                await self._flush()             # a key update's answer: the peer may wait for it
            if not await self._fill():
                if self._incoming.eof:          # told already: there is no more
                    self._eof = True
                else:
                    self._incoming.write_eof()  # the next read says EOF, or ragged EOF
        if not self._waited:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return got

    def _decrypt_into(self, view: memoryview) -> int | None:
        """Plaintext already decryptable into ``view``: its size (0 at EOF), None when the TLS
        object needs more bytes first.  Raises trio.BrokenResourceError."""
        if self._eof:
            return 0
        read = self._tls.read
        wanted = len(view)
        got = 0
        try:
            while got < wanted:
                count = read(wanted - got, view[got:])
                if not count:
                    self._eof = True
                    break
                got += count
        except ssl.SSLWantReadError:
            if not got:
                return None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            self._eof = True
        except ssl.SSLError as exc:
            if not got:
                raise trio.BrokenResourceError(exc) from exc
        return got

    async def send_all(self, data) -> None:
        """Encrypt and send all of ``data``; raises trio.BrokenResourceError or
        trio.ClosedResourceError."""
        self._check_open()
        if not data:
            await trio.lowlevel.checkpoint()
            return
        try:
            self._tls.write(data)
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(exc) from exc
        await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        self._check_open()
        async with self._send_lock:
            await trio.lowlevel.wait_writable(self._fd)

    async def aclose(self) -> None:
        """Send close_notify when the socket takes it at once (never waits for it), then close
        the descriptor, once.  Wakes the tasks waiting on it with trio.ClosedResourceError."""
        if not self._closed:
            self._closed = True
            trio.lowlevel.notify_closing(self._fd)
            if self.handshaken and not self._send_lock.locked():
                try:
                    self._tls.unwrap()
                except ssl.SSLError:
                    pass                    # SSLWantReadError: close_notify is out, the peer's not awaited
                try:
                    self._sock.send(bytes(self._unsent) + self._outgoing.read())
                except OSError:
                    pass
            self._sock.close()
        await trio.lowlevel.checkpoint()

    def getpeercert(self, binary_form: bool = False):
        return self._tls.getpeercert(binary_form)

    def getpeername(self):
        """The peer's address; raises OSError once the socket is closed."""
        return self._sock.getpeername()

    async def wait_peer_closed(self) -> None:
        """Return once the peer has closed (FIN without close_notify, as librdkafka and
        kafka-python close) or reset the TCP connection; only peeks at the socket, so a
        pipelined request stays there for the next read.  Ciphertext waiting there (a
        request, or a close_notify: TLS cannot be peeked through) means the client may still
        be there: this then waits for ever.  Cancel-safe; for a task that does not receive
        at the same time (a long-poll fetch, which holds the connection's reader)."""
        if self._closed or self._eof:
            return
        while True:
            try:
                await self._wait(trio.lowlevel.wait_readable)
            except trio.ClosedResourceError:
                return                          # closed here meanwhile: nobody to wait for
            try:
                data = self._sock.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            if not data:
                return
            await trio.sleep_forever()

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream was closed")

    async def _fill(self) -> int:
        """Move ciphertext from the socket into the TLS object, waiting for it; 0 at EOF."""
        while True:
            try:
                count = self._sock.recv_into(_socket_view)
            except BlockingIOError:
                await self._wait(trio.lowlevel.wait_readable)
                continue
            except OSError as exc:
                self._check_open()
                raise trio.BrokenResourceError(exc) from exc
            if count:
                self._incoming.write(_socket_view[:count])
            return count

    async def _flush(self) -> None:
        """Send all the output of the TLS object, in order, whichever task produced it.
        Cancel-safe: what a cancelled flush did not send goes first with the next one."""
        async with self._send_lock:
            while True:
                if not self._unsent:
                    if not self._outgoing.pending:
                        return
                    self._unsent = memoryview(self._outgoing.read())
                try:
                    sent = self._sock.send(self._unsent)
                except BlockingIOError:
                    await self._wait(trio.lowlevel.wait_writable)
                    continue
                except OSError as exc:
                    self._check_open()
                    raise trio.BrokenResourceError(exc) from exc
                self._unsent = self._unsent[sent:]

    async def _flush_quietly(self) -> None:
        try:
            await self._flush()
        except trio.BrokenResourceError:
            pass

    async def _wait(self, wait) -> None:
        self._check_open()
        await wait(self._fd)
        self._waited = True
        self._check_open()
