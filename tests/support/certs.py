"""A throwaway certificate authority for TLS tests, made with ``cryptography``.

    ca = CertificateAuthority()
    server = ca.server_files(tmp_path)                  # SAN localhost, 127.0.0.1
    alice = ca.client_files(tmp_path, "CN=alice,OU=eng,O=kwire,C=US")
    broker_props = server.kafka_properties("PKCS12")    # ssl.keystore.* / ssl.truststore.* keys
    producer = confluent_kafka.Producer({"bootstrap.servers": ..., **alice.librdkafka_config()})
    consumer = aiokafka.AIOKafkaConsumer(..., security_protocol="SSL", ssl_context=alice.ssl_context())

Each ``TlsFiles`` holds one identity written in every form the clients under
test read, so one fixture serves them all:

=====================  ==========================================================
field                  what it is, who reads it
=====================  ==========================================================
``truststore``         PEM, the CA certificate: ``ssl.truststore.location`` with
                       ``ssl.truststore.type=PEM`` (broker, Java client),
                       librdkafka/kcat ``ssl.ca.location``, kafka-python
                       ``ssl_cafile``, ``ssl.create_default_context(cafile=)``
``truststore_p12``     PKCS12 truststore (Java's trusted-certificate entries),
                       password ``password``
``keystore``           PEM, unencrypted PKCS#8 key then the chain (leaf, CA):
                       ``ssl.keystore.type=PEM`` + ``ssl.keystore.location``
``keystore_encrypted`` the same with the key encrypted by ``password``
                       (``ssl.key.password``), in a scheme Java 17 reads too
``keystore_p12``       PKCS12 keystore (key + chain), password ``password``
``key``                the unencrypted PKCS#8 key alone: librdkafka
                       ``ssl.key.location``, kafka-python ``ssl_keyfile``
``certificate``        the chain alone (leaf, CA): librdkafka
                       ``ssl.certificate.location``, kafka-python ``ssl_certfile``
=====================  ==========================================================

Keys are RSA 2048 by default (every client and the ``*_RSA_*`` cipher suites
accept them); ``key_type="ec"`` gives P-256, much faster to generate.  Every
leaf certificate is valid for both serverAuth and clientAuth, from an hour ago
for ``days`` days.  Nothing here touches the network.
"""
from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import ipaddress
import os
import ssl
from pathlib import Path
from typing import Sequence

from cryptography import x509
from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives import hashes, padding, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, modes
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

__all__ = ["PASSWORD", "CertificateAuthority", "Identity", "TlsFiles", "new_key"]

PASSWORD = "kwire-test-secret"

_PEM = serialization.Encoding.PEM


def new_key(key_type: str = "rsa"):
    """A fresh private key: ``"rsa"`` (2048 bits) or ``"ec"`` (P-256)."""
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"key_type must be 'rsa' or 'ec', not {key_type!r}")


@dataclasses.dataclass(frozen=True)
class Identity:
    """A private key and its certificate chain, leaf first (the CA last)."""
    key: object
    chain: tuple[x509.Certificate, ...]

    @property
    def certificate(self) -> x509.Certificate:
        return self.chain[0]

    def key_pem(self, password: str | None = None, *, pbes2: bool = False) -> bytes:
        """The key as PKCS#8 PEM (the form Kafka's PEM keystores need), encrypted when ``password``.

        Encryption is PBEWithSHA1AndDESede, the scheme Kafka's PEM reader on Java 17
        can decrypt (it has no PBES2); OpenSSL reads it too.  ``pbes2=True`` gives
        cryptography's modern default (PBKDF2 + AES-256) instead, which Java 17 cannot read.
        """
        if password and not pbes2:
            return _pem_block("ENCRYPTED PRIVATE KEY", _pbe_sha1_3des(self.key, password))
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        return self.key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, encryption)

    def chain_pem(self) -> bytes:
        return b"".join(cert.public_bytes(_PEM) for cert in self.chain)

    def write_keystore(self, path: Path, password: str | None = None) -> Path:
        """Write a PEM keystore (key, then the chain) to ``path``; returns it."""
        path.write_bytes(self.key_pem(password) + self.chain_pem())
        return path

    def write_pkcs12(self, path: Path, password: str = PASSWORD, alias: str = "kwire") -> Path:
        """Write a password-protected PKCS12 keystore (key + chain) to ``path``; returns it."""
        data = pkcs12.serialize_key_and_certificates(
            alias.encode(), self.key, self.chain[0], list(self.chain[1:]),
            serialization.BestAvailableEncryption(password.encode()))
        path.write_bytes(data)
        return path


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """One identity written to disk in every form; see the module docstring for each field."""
    identity: Identity
    password: str
    truststore: Path
    truststore_p12: Path
    keystore: Path
    keystore_encrypted: Path
    keystore_p12: Path
    key: Path
    certificate: Path

    def kafka_properties(self, form: str = "PEM") -> dict[str, str]:
        """Kafka ``ssl.*`` properties (broker or Java client) for this identity and the CA.

        ``form``: ``"PEM"`` (key file), ``"PEM_ENCRYPTED"``, ``"PKCS12"`` or
        ``"INLINE"`` (``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``).
        The truststore is the PEM CA file, except for ``"PKCS12"`` where it is
        the PKCS12 truststore.
        """
        trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.truststore)}
        if form == "PEM":
            keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore)}
        elif form == "PEM_ENCRYPTED":
            keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore_encrypted),
                    "ssl.key.password": self.password}
        elif form == "PKCS12":
            keys = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.keystore_p12),
                    "ssl.keystore.password": self.password}
            trust = {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(self.truststore_p12),
                     "ssl.truststore.password": self.password}
        elif form == "INLINE":
            keys = {"ssl.keystore.type": "PEM", "ssl.keystore.key": self.identity.key_pem().decode(),
                    "ssl.keystore.certificate.chain": self.identity.chain_pem().decode()}
        else:
            raise ValueError(f"form must be PEM, PEM_ENCRYPTED, PKCS12 or INLINE, not {form!r}")
        return {**keys, **trust}

    def librdkafka_config(self, *, client_certificate: bool = True) -> dict[str, str]:
        """confluent-kafka / kcat (``-X key=value``) settings: trust the CA, present this identity."""
        config = {"security.protocol": "SSL", "ssl.ca.location": str(self.truststore)}
        if client_certificate:
            config.update({"ssl.certificate.location": str(self.certificate), "ssl.key.location": str(self.key)})
        return config

    def ssl_context(self, *, client_certificate: bool = True) -> ssl.SSLContext:
        """A stdlib client context (aiokafka's and kafka-python's ``ssl_context``) that trusts the CA,
        checks the host name and presents this identity."""
        context = ssl.create_default_context(cafile=str(self.truststore))
        if client_certificate:
            context.load_cert_chain(str(self.certificate), str(self.key))
        return context


class CertificateAuthority:
    """A self-signed CA that issues leaf certificates; everything stays in memory until written."""

    def __init__(self, subject: str = "CN=kwire test CA,O=kwire", *, key_type: str = "rsa",
                 days: int = 2) -> None:
        self.key_type = key_type
        self.days = days
        self.key = new_key(key_type)
        name = x509.Name.from_rfc4514_string(subject)
        now = _now()
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    def ca_pem(self) -> bytes:
        return self.certificate.public_bytes(_PEM)

    def issue(self, subject: str, *, hosts: Sequence[str] = (), key_type: str | None = None,
              key=None) -> Identity:
        """A leaf certificate for ``subject`` (an RFC 4514 string such as ``"CN=alice,O=kwire"``,
        written most specific first, the way Java prints it).

        ``hosts`` become subjectAltName entries (IP addresses as iPAddress, the
        rest as dNSName).  ``key`` reuses an existing private key.
        """
        key = key if key is not None else new_key(key_type or self.key_type)
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name.from_rfc4514_string(subject))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=self.days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                           critical=False)
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
        return Identity(key, (builder.sign(self.key, hashes.SHA256()), self.certificate))

    def write_files(self, directory: Path, identity: Identity, name: str,
                    password: str = PASSWORD) -> TlsFiles:
        """Write ``identity`` and this CA in every form to ``directory/<name>.*``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        truststore = directory / f"{name}.truststore.pem"
        truststore.write_bytes(self.ca_pem())
        truststore_p12 = directory / f"{name}.truststore.p12"
        truststore_p12.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.certificate, b"kwire-ca")],
            serialization.BestAvailableEncryption(password.encode())))
        key = directory / f"{name}.key.pem"
        key.write_bytes(identity.key_pem())
        certificate = directory / f"{name}.certificate.pem"
        certificate.write_bytes(identity.chain_pem())
        return TlsFiles(
            identity=identity, password=password,
            truststore=truststore, truststore_p12=truststore_p12,
            keystore=identity.write_keystore(directory / f"{name}.keystore.pem"),
            keystore_encrypted=identity.write_keystore(directory / f"{name}.keystore-encrypted.pem", password),
            keystore_p12=identity.write_pkcs12(directory / f"{name}.keystore.p12", password),
            key=key, certificate=certificate,
        )

    def server_files(self, directory: Path, *, subject: str = "CN=localhost,O=kwire",
                     hosts: Sequence[str] = ("localhost", "127.0.0.1"), name: str = "server",
                     password: str = PASSWORD) -> TlsFiles:
        """A broker identity valid for ``hosts`` (by default localhost and 127.0.0.1), written out."""
        return self.write_files(directory, self.issue(subject, hosts=hosts), name, password)

    def client_files(self, directory: Path, subject: str = "CN=alice,OU=eng,O=kwire,C=US", *,
                     name: str = "client", password: str = PASSWORD) -> TlsFiles:
        """A client identity whose subject DN is ``subject`` (no SAN), written out."""
        return self.write_files(directory, self.issue(subject), name, password)


# -- PKCS#8 encrypted with pbeWithSHAAnd3-KeyTripleDES-CBC (RFC 7292 appendix B and C) ------------

_PBE_SHA1_3DES_OID = bytes.fromhex("2a864886f70d010c0103")       # 1.2.840.113549.1.12.1.3
_PBE_ITERATIONS = 2048


def _pbe_sha1_3des(key, password: str) -> bytes:
    """EncryptedPrivateKeyInfo DER of ``key`` under ``password``."""
    salt = os.urandom(8)
    secret = _pkcs12_kdf(password, salt, 1, 24)
    iv = _pkcs12_kdf(password, salt, 2, 8)
    padder = padding.PKCS7(64).padder()
    plain = padder.update(key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption())) + padder.finalize()
    encryptor = Cipher(TripleDES(secret), modes.CBC(iv)).encryptor()
    encrypted = encryptor.update(plain) + encryptor.finalize()
    params = _der(0x30, _der(0x04, salt) + _der(0x02, _PBE_ITERATIONS.to_bytes(2, "big")))
    return _der(0x30, _der(0x30, _der(0x06, _PBE_SHA1_3DES_OID) + params) + _der(0x04, encrypted))


def _pkcs12_kdf(password: str, salt: bytes, purpose: int, size: int) -> bytes:
    """RFC 7292 B.2 with SHA-1: purpose 1 derives the key, 2 the IV."""
    v = 64                  # SHA-1's block size
    block = _fill(salt, v) + _fill(password.encode("utf-16-be") + b"\0\0", v)      # BMPString + NUL
    out = b""
    while len(out) < size:
        a = hashlib.sha1(bytes([purpose]) * v + block).digest()
        for _ in range(_PBE_ITERATIONS - 1):
            a = hashlib.sha1(a).digest()
        out += a
        b = int.from_bytes((a * 4)[:v], "big") + 1
        block = b"".join(((int.from_bytes(block[i:i + v], "big") + b) % (1 << 8 * v)).to_bytes(v, "big")
                         for i in range(0, len(block), v))
    return out[:size]


def _fill(data: bytes, v: int) -> bytes:
    """``data`` repeated over a whole number of ``v``-byte blocks."""
    size = v * -(-len(data) // v)
    return (data * (size // len(data) + 1))[:size]


def _der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = (n.bit_length() + 7) // 8
    return bytes([tag, 0x80 | size]) + n.to_bytes(size, "big") + content


def _pem_block(label: str, der: bytes) -> bytes:
    body = base64.encodebytes(der).replace(b"\n", b"")
    lines = b"\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return b"-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label.encode(), lines, label.encode())


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)
