"""A client connection speaking requests built with kafka-python's protocol classes, for checks
no stock client lets a test make (what the broker answers a SASL exchange, when it closes)."""
from __future__ import annotations

import socket
import struct
import time

from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                 SaslHandshakeResponse)


class RawClient:
    """One connection to ``127.0.0.1:port``; one request at a time."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation_id = 0

    def call(self, request, response_class):
        """The decoded response, or None when the broker closed the connection instead."""
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="raw")
        try:
            self.sock.sendall(request.encode(header=True, framed=True))
            head = self.sock.recv(4, socket.MSG_WAITALL)
        except (ConnectionResetError, BrokenPipeError):
            return None
        if len(head) < 4:
            return None
        body = self.sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
        return response_class.decode(memoryview(body), version=request.API_VERSION, header=True)

    def handshake(self, mechanism: str):
        return self.call(SaslHandshakeRequest[1](mechanism=mechanism), SaslHandshakeResponse)

    def authenticate(self, auth_bytes: bytes, version: int = 1):
        return self.call(SaslAuthenticateRequest[version](auth_bytes=auth_bytes), SaslAuthenticateResponse)

    def login(self, user: str, version: int = 1):
        """SaslHandshake v1 + SaslAuthenticate ``version`` with PLAIN (password ``<user>-secret``)."""
        assert self.handshake("PLAIN").error_code == 0
        token = SaslMechanismPlain(sasl_plain_username=user, sasl_plain_password=f"{user}-secret").auth_bytes()
        return self.authenticate(token, version)

    def oauth_login(self, bearer: str):
        """SaslHandshake v1 + SaslAuthenticate v1 with kafka-python's OAUTHBEARER client."""
        class Provider(AbstractTokenProvider):
            def token(self):
                return bearer
        assert self.handshake("OAUTHBEARER").error_code == 0
        return self.authenticate(SaslMechanismOAuth(sasl_oauth_token_provider=Provider()).auth_bytes())

    def metadata(self):
        return self.call(MetadataRequest[1](topics=None), MetadataResponse)

    def closed(self) -> bool:
        """Whether the broker has closed the connection (waits up to the socket timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def sleep_until(start: float, seconds: float) -> None:
    """Sleep until ``seconds`` after ``start`` (a time.monotonic() value)."""
    time.sleep(max(0.0, start + seconds - time.monotonic()))
