"""TLS on the socket itself: the stdlib's ``ssl.SSLSocket``, non-blocking, under Trio.

trio.SSLStream runs OpenSSL on memory BIOs: every read copies the socket's bytes
into a Python object, then into the BIO, then decrypts them, and its machinery
(a lock, the BIO shuffling, one pass per TLS record) costs as much interpreter
time as the cipher does.  Here OpenSSL reads and writes the file descriptor
itself: a call goes to the socket only when OpenSSL says it needs it
(``SSLWantReadError`` / ``SSLWantWriteError``), and then waits for Trio's I/O
readiness on the descriptor before trying the same call again.

Rules this follows (OpenSSL's and the ``ssl`` module's):

- A read first asks OpenSSL, never the descriptor: records it already received
  and decrypted (``SSLSocket.pending()``) are not visible to epoll, so waiting
  for readability first could wait for ever.
- ``SSL_write`` runs with SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER and without
  partial writes (the ``ssl`` module's setting): after ``SSLWantWriteError``
  the same bytes are passed again; the view only advances by what a call
  reports written.
- A read may need to write (a TLS 1.3 key update, a TLS 1.2 renegotiation) and
  a write may need to read; either waits for the direction OpenSSL names.  Two
  tasks of one connection (the server reads in one and writes in another) may
  need the same direction: the second waits for the first one's wake-up, since
  Trio lets one task at a time wait on a descriptor per direction.  OpenSSL's
  calls never overlap: Trio runs one task at a time and no call spans an await.
- close_notify from the peer reads as EOF, and so does a ragged EOF (a client
  closing its socket without close_notify, as librdkafka does).
"""
from __future__ import annotations

import socket
import ssl

import trio

DEFAULT_RECEIVE_BYTES = 65536


class TlsSocketStream(trio.abc.Stream):
    """A trio.abc.Stream over an ``ssl.SSLSocket`` in non-blocking mode.

    Build it with ``wrap`` (which takes the descriptor from a trio.SocketStream), then
    ``do_handshake``.  Broken connections (a TLS alert, a reset) raise
    trio.BrokenResourceError with the ssl/OS error as ``__cause__``; use after
    ``aclose`` raises trio.ClosedResourceError.  Receiving is cancel-safe; a cancelled
    ``send_all`` leaves the stream broken (part of a record may have gone out), as with
    trio.SSLStream.
    """

    def __init__(self, tls: ssl.SSLSocket):
        self._tls = tls
        self._fd = tls.fileno()
        self._closed = False
        self._eof = False
        self.handshaken = False
        self._read_waiter: trio.Event | None = None     # set when the task waiting to read wakes
        self._write_waiter: trio.Event | None = None

    @classmethod
    def wrap(cls, stream: trio.SocketStream, context: ssl.SSLContext, *, server_side: bool,
             server_hostname: str | None = None) -> "TlsSocketStream":
        """Take over the descriptor of ``stream`` (left detached: closing it does nothing) for
        a TLS connection; no I/O yet.  Raises OSError (the socket is already unusable; its
        descriptor is closed)."""
        trio_socket = stream.socket
        plain = socket.socket(trio_socket.family, trio_socket.type, trio_socket.proto,
                              fileno=trio_socket.detach())
        plain.setblocking(False)
        try:
            tls = context.wrap_socket(plain, server_side=server_side, server_hostname=server_hostname,
                                      do_handshake_on_connect=False, suppress_ragged_eofs=True)
        except BaseException:
            plain.close()
            raise
        return cls(tls)

    async def do_handshake(self) -> None:
        """The TLS handshake; raises trio.BrokenResourceError (cause: the ssl.SSLError or
        OSError).  Not cancel-safe: a cancelled handshake leaves a stream only to close."""
        await self._retry(self._tls.do_handshake)
        self.handshaken = True

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """Up to ``max_bytes`` (64 KiB by default) of plaintext: everything OpenSSL can decrypt
        without waiting once at least one byte is there; empty at EOF."""
        buffer = bytearray(max_bytes or DEFAULT_RECEIVE_BYTES)
        count = await self.receive_into(memoryview(buffer))
        del buffer[count:]
        return buffer

    async def receive_into(self, view: memoryview) -> int:
        """Decrypt straight into ``view`` (it must not be empty): all the records already
        received, waiting only while there is none; the byte count, 0 at EOF."""
        return await self._retry(self._read_into, view)

    def _read_into(self, view: memoryview) -> int:
        """Raises ssl.SSLWantReadError / SSLWantWriteError only when nothing was read."""
        if self._eof:
            return 0
        read = self._tls.recv_into
        got = read(view)
        wanted = len(view)
        while 0 < got < wanted:
            try:
                count = read(view[got:])
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            if not count:        # EOF after data: the next call says so
                self._eof = True
                break
            got += count
        if not got:
            self._eof = True
        return got

    async def send_all(self, data) -> None:
        """Encrypt and send all of ``data``; raises trio.BrokenResourceError or
        trio.ClosedResourceError.  Not cancel-safe (see the class)."""
        view = memoryview(data).cast("B")
        send = self._tls.send
        while view:
            sent = await self._retry(send, view)
            view = view[sent:]

    async def wait_send_all_might_not_block(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError
        await self._wait(readable=False)

    async def aclose(self) -> None:
        """Send close_notify when the socket takes it at once (never waits for it), then close
        the descriptor, once.  Wakes the tasks waiting on it with trio.ClosedResourceError."""
        if not self._closed:
            self._closed = True
            trio.lowlevel.notify_closing(self._fd)
            try:
                self._tls.unwrap()     # non-blocking: sends close_notify, does not wait for the peer's
            except (OSError, ValueError):
                pass
            self._tls.close()
        await trio.lowlevel.checkpoint()

    def getpeercert(self, binary_form: bool = False):
        return self._tls.getpeercert(binary_form)

    def getpeername(self):
        """The peer's address; raises OSError once the socket is closed."""
        return self._tls.getpeername()

    async def _retry(self, call, *args):
        """``call(*args)``, again each time OpenSSL wants the socket readable or writable.
        A checkpoint either way, as trio's socket methods do."""
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream was closed")
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            try:
                result = call(*args)
            except ssl.SSLWantReadError:
                await self._wait(readable=True)
            except ssl.SSLWantWriteError:
                await self._wait(readable=False)
            except (OSError, ValueError) as exc:     # ssl.SSLError is an OSError
                if self._closed:
                    raise trio.ClosedResourceError("the TLS stream was closed") from None
                raise trio.BrokenResourceError(exc) from exc
            else:
                if not waited:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                return result
            waited = True
            if self._closed:
                raise trio.ClosedResourceError("the TLS stream was closed")

    async def _wait(self, readable: bool) -> None:
        """Wait until the descriptor is readable (writable); when another task of this stream
        already waits for that, wait for its wake-up instead."""
        waiter = self._read_waiter if readable else self._write_waiter
        if waiter is not None:
            await waiter.wait()
            return
        waiter = trio.Event()
        if readable:
            self._read_waiter = waiter
        else:
            self._write_waiter = waiter
        try:
            if readable:
                await trio.lowlevel.wait_readable(self._fd)
            else:
                await trio.lowlevel.wait_writable(self._fd)
        finally:
            if readable:
                self._read_waiter = None
            else:
                self._write_waiter = None
            waiter.set()
