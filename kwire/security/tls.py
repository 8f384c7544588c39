"""TLS for Kafka listeners: Kafka's ``ssl.*`` broker properties in, an ``ssl.SSLContext`` out.

    context = server_context(props, listener="SSL")          # once, at startup
    mapper = principal_mapper(props, listener="SSL")
    ... after the handshake of a connection:
    principal = principal_of(ssl_stream, mapper)              # "User:alice" / "User:ANONYMOUS"

``props`` are the raw strings of ``server.properties`` (plus overrides).  With
``listener`` given, each key is read as ``listener.name.<listener
lower-cased>.<key>`` when that is present and as ``<key>`` otherwise (Kafka's
per-listener override, key by key), and errors name the key actually read.
A caller that resolved the overrides itself passes ``listener=None``.

Keystore (``ssl.keystore.*``): ``PEM`` (a file holding the private key and the
certificate chain, leaf first; or the inline ``ssl.keystore.key`` +
``ssl.keystore.certificate.chain``; an encrypted key needs
``ssl.key.password``, ``ssl.keystore.password`` must be unset) or ``PKCS12``
(``ssl.keystore.password`` required; the key must share it, as with keytool).
JKS, Kafka's default type, is refused with the command that converts it, unless
the file is really PKCS12 (Java 9+ reads those as JKS, and so do we).
Truststore (``ssl.truststore.*``): ``PEM`` (file or inline
``ssl.truststore.certificates``) or ``PKCS12``; without one the system CAs are
trusted, as Java trusts its cacerts.

Differences from Java that a config can see:

* ``ssl.cipher.suites`` takes the Java/IANA names (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``)
  and restricts TLS 1.2 only: Python cannot choose TLS 1.3 suites, so naming
  any TLS 1.3 suite enables all of OpenSSL's, and naming none disables TLS 1.3.
* ``ssl.enabled.protocols`` becomes a min/max version; TLSv1, TLSv1.1, SSLv3
  and SSLv2Hello are ignored (Java disables them by default too).  When it is
  empty, ``ssl.protocol`` TLSv1.2 (or older) means TLS 1.2 only.
* An unencrypted PEM key is accepted even when ``ssl.key.password`` is set.

Every misconfiguration raises ``ConfigError`` naming the key (and the file,
for file keys); secrets are never printed.  Building a context reads files
(blocking): do it at startup or in a thread.
"""
from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import ssl
import tempfile
from typing import Mapping

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kwire.admin.config_def import ConfigError
from kwire.security.tls_principal import ANONYMOUS, NoMatchingRule, PrincipalMapper, principal_of, subject_dn

__all__ = ["KAFKA_DEFAULTS", "ANONYMOUS", "ConfigError", "NoMatchingRule", "PrincipalMapper",
           "client_context", "principal_mapper", "principal_of", "server_context", "subject_dn"]

# Kafka's defaults for the keys read here (None: no default)
KAFKA_DEFAULTS: dict[str, str | None] = {
    "ssl.keystore.type": "JKS", "ssl.keystore.location": None, "ssl.keystore.password": None,
    "ssl.key.password": None, "ssl.keystore.key": None, "ssl.keystore.certificate.chain": None,
    "ssl.truststore.type": "JKS", "ssl.truststore.location": None, "ssl.truststore.password": None,
    "ssl.truststore.certificates": None, "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3", "ssl.protocol": "TLSv1.3", "ssl.cipher.suites": "",
    "ssl.endpoint.identification.algorithm": "https", "ssl.principal.mapping.rules": "DEFAULT",
}
_SECRETS = {"ssl.keystore.password", "ssl.key.password", "ssl.keystore.key", "ssl.truststore.password"}
_EMPTY_MEANS_EMPTY = {"ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules"}

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_IGNORED_VERSIONS = {"TLSv1", "TLSv1.1", "SSLv3", "SSLv2Hello"}
_SSL_PROTOCOLS = {"TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv3"}

# The TLS 1.2 suites Java offers: IANA (Java) name -> OpenSSL name
TLS12_SUITES = dict(line.split() for line in """
    TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384       ECDHE-ECDSA-AES256-GCM-SHA384
    TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256       ECDHE-ECDSA-AES128-GCM-SHA256
    TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 ECDHE-ECDSA-CHACHA20-POLY1305
    TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384       ECDHE-ECDSA-AES256-SHA384
    TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256       ECDHE-ECDSA-AES128-SHA256
    TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA          ECDHE-ECDSA-AES256-SHA
    TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA          ECDHE-ECDSA-AES128-SHA
    TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384         ECDHE-RSA-AES256-GCM-SHA384
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256         ECDHE-RSA-AES128-GCM-SHA256
    TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256   ECDHE-RSA-CHACHA20-POLY1305
    TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384         ECDHE-RSA-AES256-SHA384
    TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256         ECDHE-RSA-AES128-SHA256
    TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA            ECDHE-RSA-AES256-SHA
    TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA            ECDHE-RSA-AES128-SHA
    TLS_DHE_RSA_WITH_AES_256_GCM_SHA384           DHE-RSA-AES256-GCM-SHA384
    TLS_DHE_RSA_WITH_AES_128_GCM_SHA256           DHE-RSA-AES128-GCM-SHA256
    TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256     DHE-RSA-CHACHA20-POLY1305
    TLS_DHE_RSA_WITH_AES_256_CBC_SHA256           DHE-RSA-AES256-SHA256
    TLS_DHE_RSA_WITH_AES_128_CBC_SHA256           DHE-RSA-AES128-SHA256
    TLS_DHE_RSA_WITH_AES_256_CBC_SHA              DHE-RSA-AES256-SHA
    TLS_DHE_RSA_WITH_AES_128_CBC_SHA              DHE-RSA-AES128-SHA
    TLS_DHE_DSS_WITH_AES_256_GCM_SHA384           DHE-DSS-AES256-GCM-SHA384
    TLS_DHE_DSS_WITH_AES_128_GCM_SHA256           DHE-DSS-AES128-GCM-SHA256
    TLS_DHE_DSS_WITH_AES_256_CBC_SHA256           DHE-DSS-AES256-SHA256
    TLS_DHE_DSS_WITH_AES_128_CBC_SHA256           DHE-DSS-AES128-SHA256
    TLS_DHE_DSS_WITH_AES_256_CBC_SHA              DHE-DSS-AES256-SHA
    TLS_DHE_DSS_WITH_AES_128_CBC_SHA              DHE-DSS-AES128-SHA
    TLS_RSA_WITH_AES_256_GCM_SHA384               AES256-GCM-SHA384
    TLS_RSA_WITH_AES_128_GCM_SHA256               AES128-GCM-SHA256
    TLS_RSA_WITH_AES_256_CBC_SHA256               AES256-SHA256
    TLS_RSA_WITH_AES_128_CBC_SHA256               AES128-SHA256
    TLS_RSA_WITH_AES_256_CBC_SHA                  AES256-SHA
    TLS_RSA_WITH_AES_128_CBC_SHA                  AES128-SHA
""".strip().splitlines())
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
_SIGNALLING_SUITES = {"TLS_EMPTY_RENEGOTIATION_INFO_SCSV", "TLS_FALLBACK_SCSV"}

_PEM_PASSWORD = "not used with PEM: set ssl.key.password for an encrypted key"
_JKS_MAGIC = {b"\xfe\xed\xfe\xed": "JKS", b"\xce\xce\xce\xce": "JCEKS"}
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


class _Props:
    """The ssl.* keys of one listener: ``listener.name.<l>.<key>`` over ``<key>`` over Kafka's default."""

    def __init__(self, props: Mapping[str, str], listener: str | None) -> None:
        self.props = props
        self.prefix = f"listener.name.{listener.lower()}." if listener else ""

    def key(self, name: str) -> str:
        """The key actually read for ``name``: the listener-prefixed one when present."""
        prefixed = self.prefix + name
        return prefixed if self.prefix and prefixed in self.props else name

    def get(self, name: str) -> str | None:
        value = self.props.get(self.key(name), KAFKA_DEFAULTS.get(name))
        if value is not None and name not in _EMPTY_MEANS_EMPTY:
            value = value.strip() or None
        return value

    def error(self, name: str, reason: str) -> ConfigError:
        """Kafka's wording, ``Invalid value V for configuration K: reason``; secrets hidden."""
        value = self.get(name)
        shown = "null" if value is None else "[hidden]" if name in _SECRETS else value
        return ConfigError(f"Invalid value {shown} for configuration {self.key(name)}: {reason}")

    def read(self, name: str) -> bytes:
        path = self.get(name)
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise self.error(name, f"cannot read the file: {exc.strerror or exc}") from None


# -- public API ----------------------------------------------------------------------------------

def server_context(props: Mapping[str, str], listener: str | None = None, *,
                   security_protocol: str = "SSL") -> ssl.SSLContext:
    """The server context of a TLS listener (``SSL`` or ``SASL_SSL``).

    For ``SASL_SSL`` only the listener-prefixed ``ssl.client.auth`` counts (KIP-684: the
    broker-wide key applies to SSL listeners only).  Raises ConfigError.  Reads files.
    """
    config = _Props(props, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # TLS 1.2 renegotiation refused, as Kafka's SSLTransportLayer does; kwire.security.tls_stream
    # does not let a write wait for a read
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    _apply_protocols(ctx, config)
    identity = _load_keystore(config)
    if identity is None:
        raise config.error("ssl.keystore.location", "a TLS listener needs a keystore: set "
                           "ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain")
    _install_identity(ctx, *identity)
    client_auth = config.get("ssl.client.auth") or "none"
    if security_protocol.upper() == "SASL_SSL" and config.key("ssl.client.auth") == "ssl.client.auth":
        client_auth = "none"
    if client_auth.lower() not in _CLIENT_AUTH:
        raise config.error("ssl.client.auth", "String must be one of: required, requested, none")
    ctx.verify_mode = _CLIENT_AUTH[client_auth.lower()]
    trusted = _load_truststore(config)          # checked even when unused, as Kafka does
    if ctx.verify_mode != ssl.CERT_NONE:
        _install_trust(ctx, trusted, ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(props: Mapping[str, str], listener: str | None = None) -> ssl.SSLContext:
    """The client context of an inter-broker TLS connection.

    The peer's chain is always verified; its host name too when
    ``ssl.endpoint.identification.algorithm`` is ``https`` (Kafka's default; empty turns it
    off).  The keystore, if any, is the certificate shown to a peer that asks for one.
    Raises ConfigError.  Reads files.
    """
    config = _Props(props, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    _apply_protocols(ctx, config)
    algorithm = (config.get("ssl.endpoint.identification.algorithm") or "").strip()
    if algorithm.lower() not in ("", "https"):
        raise config.error("ssl.endpoint.identification.algorithm", "must be https or empty")
    ctx.check_hostname = bool(algorithm)
    ctx.verify_mode = ssl.CERT_REQUIRED
    identity = _load_keystore(config)
    if identity is not None:
        _install_identity(ctx, *identity)
    _install_trust(ctx, _load_truststore(config), ssl.Purpose.SERVER_AUTH)
    return ctx


def principal_mapper(props: Mapping[str, str], listener: str | None = None) -> PrincipalMapper:
    """The parsed ``ssl.principal.mapping.rules`` of a listener; raises ConfigError."""
    config = _Props(props, listener)
    return PrincipalMapper(config.get("ssl.principal.mapping.rules"), key=config.key("ssl.principal.mapping.rules"))


# -- protocols and cipher suites -----------------------------------------------------------------

def _apply_protocols(ctx: ssl.SSLContext, config: _Props) -> None:
    protocol = config.get("ssl.protocol") or "TLSv1.3"
    if protocol not in _SSL_PROTOCOLS:
        raise config.error("ssl.protocol", f"must be one of {', '.join(sorted(_SSL_PROTOCOLS))}")
    names = _split(config.get("ssl.enabled.protocols"))
    if not names:
        names = ["TLSv1.2"] if protocol in ("TLSv1.2", "TLSv1.1", "TLSv1", "SSLv3") else ["TLSv1.2", "TLSv1.3"]
    unknown = [n for n in names if n not in _VERSIONS and n not in _IGNORED_VERSIONS]
    if unknown:
        raise config.error("ssl.enabled.protocols", f"unsupported protocol {unknown[0]}: "
                           "use TLSv1.2 and/or TLSv1.3")
    versions = {_VERSIONS[n] for n in names if n in _VERSIONS}
    if not versions:
        raise config.error("ssl.enabled.protocols", "kwire supports TLSv1.2 and TLSv1.3 only")
    versions = _apply_cipher_suites(ctx, config, versions)
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)


def _apply_cipher_suites(ctx: ssl.SSLContext, config: _Props, versions: set) -> set:
    """Restrict TLS 1.2 to the named suites; returns the versions that keep a suite."""
    names = [n for n in _split(config.get("ssl.cipher.suites")) if n not in _SIGNALLING_SUITES]
    if not names:
        return versions
    tls12 = {}
    for name in names:
        iana = "TLS_" + name[4:] if name.startswith("SSL_") else name      # Java's legacy aliases
        if iana in TLS12_SUITES:
            tls12[name] = TLS12_SUITES[iana]
        elif iana not in TLS13_SUITES:
            raise config.error("ssl.cipher.suites", f"unknown cipher suite {name} (use the Java/IANA names, "
                               "such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)")
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12.values()))
            available = {c["name"] for c in ctx.get_ciphers()}
        except ssl.SSLError:
            available = set()
        missing = [name for name, openssl in tls12.items() if openssl not in available]
        if missing:
            raise config.error("ssl.cipher.suites", f"{missing[0]} is not available in {ssl.OPENSSL_VERSION}")
    else:
        versions = versions - {ssl.TLSVersion.TLSv1_2}
    if len(tls12) == len(names):
        versions = versions - {ssl.TLSVersion.TLSv1_3}
    if not versions:
        raise config.error("ssl.cipher.suites", "no suite left for the protocols in ssl.enabled.protocols")
    return versions


def _split(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


# -- keystores and truststores -------------------------------------------------------------------

def _load_keystore(config: _Props):
    """(private key, [leaf, chain...]) from the keystore keys, or None when there is no keystore."""
    kind = (config.get("ssl.keystore.type") or "JKS").upper()
    location, password = config.get("ssl.keystore.location"), config.get("ssl.keystore.password")
    inline_key, inline_chain = config.get("ssl.keystore.key"), config.get("ssl.keystore.certificate.chain")
    if inline_key is not None or inline_chain is not None:
        if inline_key is None:
            raise config.error("ssl.keystore.certificate.chain", "set ssl.keystore.key too")
        if inline_chain is None:
            raise config.error("ssl.keystore.key", "set ssl.keystore.certificate.chain too")
        if kind != "PEM":
            raise config.error("ssl.keystore.type", "ssl.keystore.key needs ssl.keystore.type=PEM")
        if location is not None:
            raise config.error("ssl.keystore.location", "set either the file or ssl.keystore.key, not both")
        if password is not None:
            raise config.error("ssl.keystore.password", _PEM_PASSWORD)
        key = _pem_key(config, "ssl.keystore.key", inline_key.encode())
        return _matched(config, "ssl.keystore.key", key, _pem_certificates(
            config, "ssl.keystore.certificate.chain", inline_chain.encode()))
    if location is None:
        if password is not None:
            raise config.error("ssl.keystore.password", "set ssl.keystore.location too")
        return None
    data = config.read("ssl.keystore.location")
    if kind == "PEM":
        if password is not None:
            raise config.error("ssl.keystore.password", _PEM_PASSWORD)
        key = _pem_key(config, "ssl.keystore.location", data)
        certs = _pem_certificates(config, "ssl.keystore.location", data)
        return _matched(config, "ssl.keystore.location", key, certs)
    _check_pkcs12(config, "ssl.keystore", kind, data)
    if password is None:
        raise config.error("ssl.keystore.password", f"the PKCS12 keystore {location} needs a password")
    key, cert, extra = _open_pkcs12(config, "ssl.keystore", data, password)
    if key is None or cert is None:
        raise config.error("ssl.keystore.location", "the PKCS12 keystore holds no private key entry")
    return _matched(config, "ssl.keystore.location", key, [cert, *extra])


def _check_pkcs12(config: _Props, prefix: str, kind: str, data: bytes) -> None:
    """Refuse what is not PKCS12, telling a JKS user how to convert."""
    path = config.get(f"{prefix}.location")
    magic = _JKS_MAGIC.get(data[:4])
    if magic:
        raise config.error(f"{prefix}.type", f"{path} is a {magic} store, which kwire cannot read. Convert it "
                           f"with: keytool -importkeystore -srckeystore {path} -destkeystore {path}.p12 "
                           f"-deststoretype PKCS12, then set {prefix}.type=PKCS12 and {prefix}.location "
                           f"to the .p12 file (or use PEM: {prefix}.type=PEM)")
    if kind not in ("PKCS12", "JKS", "JCEKS"):
        raise config.error(f"{prefix}.type", "must be PEM or PKCS12 (JKS files must be converted to PKCS12)")
    if not data[:1] == b"\x30":
        hint = f"; it looks like PEM: set {prefix}.type=PEM" if b"-----BEGIN" in data[:4096] else ""
        raise config.error(f"{prefix}.location", f"{path} is not a PKCS12 file ({prefix}.type={kind}){hint}")


def _open_pkcs12(config: _Props, prefix: str, data: bytes, password: str | None):
    try:
        return pkcs12.load_key_and_certificates(data, None if password is None else password.encode())
    except (ValueError, TypeError):
        why = "it needs a password" if password is None else "wrong password, or a damaged file"
        raise config.error(f"{prefix}.password", f"cannot open the PKCS12 file "
                           f"{config.get(prefix + '.location')}: {why}") from None


def _pem_blocks(data: bytes, label: bytes) -> list[tuple[bytes, bytes | None]]:
    """(block, DER or None) of each PEM block whose label ends with ``label``.

    Like Kafka's PEM parser, whitespace inside the base64 does not matter, so a value written
    on one line in server.properties reads too; DER is None for an RFC 1421 block with headers.
    """
    blocks = []
    for m in _PEM_BLOCK.finditer(data):
        if m.group(1).endswith(label):
            body = m.group(2)
            try:
                der = None if b":" in body else base64.b64decode(b"".join(body.split()), validate=True)
            except binascii.Error:
                continue
            blocks.append((m.group(0), der))
    return blocks


def _where(config: _Props, name: str) -> str:
    return f"the file {config.get(name)}" if name.endswith("location") else name


def _pem_key(config: _Props, name: str, data: bytes):
    """The private key in PEM ``data`` (file or inline value ``name``), decrypted with ssl.key.password."""
    blocks = _pem_blocks(data, b"PRIVATE KEY")
    if not blocks:
        raise config.error(name, f"no PRIVATE KEY block in {_where(config, name)}")
    block, der = blocks[0]
    encrypted = block.startswith(b"-----BEGIN ENCRYPTED") or (der is None and b"ENCRYPTED" in block)
    password = config.get("ssl.key.password")
    if encrypted and password is None:
        raise config.error("ssl.key.password", f"the private key in {_where(config, name)} is "
                           "encrypted: set ssl.key.password")
    secret = password.encode() if encrypted else None      # a password for a clear key is ignored
    try:
        if der is None:
            return serialization.load_pem_private_key(block, secret)
        return serialization.load_der_private_key(der, secret)
    except (ValueError, TypeError):
        if encrypted:
            raise config.error("ssl.key.password", f"cannot decrypt the private key in {_where(config, name)}: "
                               "wrong password") from None
        raise config.error(name, f"cannot parse the private key in {_where(config, name)}") from None


def _pem_certificates(config: _Props, name: str, data: bytes) -> list[x509.Certificate]:
    certs = []
    for _, der in _pem_blocks(data, b"CERTIFICATE"):
        try:
            certs.append(x509.load_der_x509_certificate(der or b""))
        except ValueError:
            raise config.error(name, f"a CERTIFICATE block in {_where(config, name)} cannot be parsed") from None
    if not certs:
        raise config.error(name, f"no CERTIFICATE block in {_where(config, name)}")
    return certs


def _matched(config: _Props, name: str, key, certs: list[x509.Certificate]):
    """(key, chain) with the certificate of ``key`` first; refuses a key that matches none."""
    public = _spki(key.public_key())
    for i, cert in enumerate(certs):
        if _spki(cert.public_key()) == public:
            return key, [cert, *certs[:i], *certs[i + 1:]]
    raise config.error(name, f"the private key in {_where(config, name)} does not match its certificate "
                       f"({certs[0].subject.rfc4514_string()})")


def _spki(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _install_identity(ctx: ssl.SSLContext, key, chain: list[x509.Certificate]) -> None:
    """``load_cert_chain`` reads only files: write the key encrypted with a one-time password to a
    private temporary file, load it, delete it, so the clear key never reaches the disk."""
    once = secrets.token_urlsafe(24).encode()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(once))
    pem += b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in chain)
    fd, path = tempfile.mkstemp(prefix="kwire-tls-", suffix=".pem")      # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=once)
    finally:
        os.unlink(path)


def _install_trust(ctx: ssl.SSLContext, certs: list[x509.Certificate] | None, purpose: ssl.Purpose) -> None:
    """Trust ``certs``, or the system's CAs when there is no truststore (Java's cacerts)."""
    if certs is None:
        ctx.load_default_certs(purpose)
    else:
        ctx.load_verify_locations(cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))


def _load_truststore(config: _Props) -> list[x509.Certificate] | None:
    kind = (config.get("ssl.truststore.type") or "JKS").upper()
    location, password = config.get("ssl.truststore.location"), config.get("ssl.truststore.password")
    inline = config.get("ssl.truststore.certificates")
    if inline is not None:
        if kind != "PEM":
            raise config.error("ssl.truststore.type", "ssl.truststore.certificates needs ssl.truststore.type=PEM")
        if location is not None:
            raise config.error("ssl.truststore.location", "set either the file or ssl.truststore.certificates")
        if password is not None:
            raise config.error("ssl.truststore.password", "not used with PEM")
        return _pem_certificates(config, "ssl.truststore.certificates", inline.encode())
    if location is None:
        if password is not None:
            raise config.error("ssl.truststore.password", "set ssl.truststore.location too")
        return None
    data = config.read("ssl.truststore.location")
    if kind == "PEM":
        if password is not None:
            raise config.error("ssl.truststore.password", "not used with PEM")
        return _pem_certificates(config, "ssl.truststore.location", data)
    _check_pkcs12(config, "ssl.truststore", kind, data)
    _, cert, extra = _open_pkcs12(config, "ssl.truststore", data, password)
    certs = [c for c in (cert, *extra) if c is not None]
    if not certs:
        raise config.error("ssl.truststore.location", f"the PKCS12 truststore {location} holds no certificate")
    return certs
