"""kwire.security.tls: Kafka ssl.* properties -> SSLContext, checked by real handshakes; TLS principals.

Handshakes run both ends in this thread over ``ssl.MemoryBIO`` pairs: the same
OpenSSL state machines as over a socket, without threads or timeouts.

The expected DNs were printed by Java 17's ``X500Principal.getName()`` and the
expected mapped names by Kafka 4.0's ``SslPrincipalMapper`` for the same
certificates and rules.
"""
from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kwire.security.tls import (
    ANONYMOUS, ConfigError, NoMatchingRule, PrincipalMapper, client_context, principal_mapper, principal_of,
    server_context, subject_dn,
)
from tests.support.certs import PASSWORD, CertificateAuthority

ALICE_DN = "CN=alice,OU=eng,O=kwire,C=US"


# -- fixtures and a handshake over memory BIOs ---------------------------------------------------

@pytest.fixture(scope="module")
def ca():
    return CertificateAuthority()


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tls")


@pytest.fixture(scope="module")
def server(ca, tls_dir):
    return ca.server_files(tls_dir)


@pytest.fixture(scope="module")
def alice(ca, tls_dir):
    return ca.client_files(tls_dir, ALICE_DN, name="alice")


class HandshakeError(Exception):
    def __init__(self, side: str, error: ssl.SSLError):
        super().__init__(f"{side}: {error}")
        self.side, self.error = side, error


class Link:
    """A TLS client and server joined by memory BIOs."""

    def __init__(self, server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str = "localhost"):
        self._bios = [ssl.MemoryBIO() for _ in range(4)]     # server in/out, client in/out
        s_in, s_out, c_in, c_out = self._bios
        self.server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
        self.client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)

    def _pump(self) -> bool:
        s_in, s_out, c_in, c_out = self._bios
        to_server, to_client = c_out.read(), s_out.read()
        s_in.write(to_server)
        c_in.write(to_client)
        return bool(to_server or to_client)

    def handshake(self) -> "Link":
        done = set()
        for _ in range(50):
            for side, obj in (("client", self.client), ("server", self.server)):
                if side not in done:
                    try:
                        obj.do_handshake()
                        done.add(side)
                    except ssl.SSLWantReadError:
                        pass
                    except ssl.SSLError as exc:
                        self._pump()
                        raise HandshakeError(side, exc) from exc
            if not self._pump() and len(done) == 2:
                return self
        raise AssertionError("handshake did not finish")

    def exchange(self) -> None:
        """Application data both ways; raises HandshakeError when a late alert arrives (TLS 1.3)."""
        for sender, receiver, side in ((self.client, self.server, "server"), (self.server, self.client, "client")):
            sender.write(b"ping")
            self._pump()
            try:
                assert receiver.read(4) == b"ping"
            except ssl.SSLError as exc:
                raise HandshakeError(side, exc) from exc


def trusting_client(ca, *, identity=None, maximum=None) -> ssl.SSLContext:
    """A stdlib client context that trusts the test CA, optionally with ``identity`` (TlsFiles)."""
    ctx = ssl.create_default_context(cadata=ca.ca_pem().decode())
    if identity is not None:
        ctx.load_cert_chain(identity.certificate, identity.key)
    if maximum is not None:
        ctx.maximum_version = maximum
    return ctx


def connect(server_props, ca, **client) -> Link:
    link = Link(server_context(server_props), trusting_client(ca, **client)).handshake()
    link.exchange()
    return link


# -- keystore and truststore forms ---------------------------------------------------------------

@pytest.mark.parametrize("form", ["PEM", "PEM_ENCRYPTED", "PKCS12", "INLINE"])
def test_each_keystore_form_completes_a_handshake(server, ca, form):
    link = connect(server.kafka_properties(form), ca)
    assert subject_dn(link.client.getpeercert(binary_form=True)) == "CN=localhost,O=kwire"
    assert link.server.version() == "TLSv1.3"


def test_pbes2_encrypted_key(server, ca, tls_dir):
    path = tls_dir / "pbes2.pem"
    path.write_bytes(server.identity.key_pem(PASSWORD, pbes2=True) + server.identity.chain_pem())
    connect({**server.kafka_properties("PEM_ENCRYPTED"), "ssl.keystore.location": str(path)}, ca)


def test_traditional_openssl_encrypted_key(server, ca, tls_dir):
    path = tls_dir / "traditional.pem"
    key = server.identity.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.BestAvailableEncryption(PASSWORD.encode()))
    assert b"Proc-Type: 4,ENCRYPTED" in key
    path.write_bytes(key + server.identity.chain_pem())
    connect({**server.kafka_properties("PEM_ENCRYPTED"), "ssl.keystore.location": str(path)}, ca)


def test_inline_pem_written_on_one_line_as_server_properties_continuations_give(server, ca):
    props = server.kafka_properties("INLINE")
    for key in ("ssl.keystore.key", "ssl.keystore.certificate.chain"):
        props[key] = " ".join(props[key].split("\n"))
    connect(props, ca)


def test_jks_type_reads_a_pkcs12_file_as_java_does(server, ca):
    props = server.kafka_properties("PKCS12")
    props["ssl.keystore.type"] = "JKS"
    connect(props, ca)


@pytest.mark.parametrize("form", ["PEM", "PKCS12", "INLINE"])
def test_each_truststore_form_verifies_client_certificates(server, alice, ca, form):
    props = {**server.kafka_properties("PEM"), "ssl.client.auth": "required"}
    if form == "PKCS12":
        props.update({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(server.truststore_p12),
                      "ssl.truststore.password": PASSWORD})
    elif form == "INLINE":
        del props["ssl.truststore.location"]
        props["ssl.truststore.certificates"] = ca.ca_pem().decode()
    link = connect(props, ca, identity=alice)
    assert principal_of(link.server, PrincipalMapper()) == f"User:{ALICE_DN}"


def test_listener_prefixed_keys_override_key_by_key(server, alice, ca, tls_dir):
    props = {**server.kafka_properties("PEM"), "ssl.keystore.location": str(tls_dir / "nowhere.pem"),
             "listener.name.secure.ssl.keystore.location": str(server.keystore)}
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        server_context(props)
    Link(server_context(props, listener="SECURE"), trusting_client(ca)).handshake()


# -- ssl.client.auth -----------------------------------------------------------------------------

def test_client_auth_none_does_not_ask_for_a_certificate(server, alice, ca):
    link = connect(server.kafka_properties(), ca, identity=alice)
    assert link.server.getpeercert(binary_form=True) is None
    assert principal_of(link.server, PrincipalMapper()) == ANONYMOUS


def test_client_auth_requested_accepts_both(server, alice, ca):
    props = {**server.kafka_properties(), "ssl.client.auth": "requested"}
    assert principal_of(connect(props, ca).server, PrincipalMapper()) == ANONYMOUS
    assert principal_of(connect(props, ca, identity=alice).server, PrincipalMapper()) == f"User:{ALICE_DN}"


@pytest.mark.parametrize("maximum", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_client_auth_required_rejects_a_client_without_certificate(server, alice, ca, maximum):
    props = {**server.kafka_properties(), "ssl.client.auth": "REQUIRED"}
    with pytest.raises(HandshakeError) as failure:
        connect(props, ca, maximum=maximum)
    assert failure.value.side == "server"
    assert connect(props, ca, identity=alice, maximum=maximum).server.getpeercert() is not None


def test_certs_helpers_for_stock_clients(server, alice):
    """The contexts and librdkafka settings the client tests use, checked against the broker side."""
    props = {**server.kafka_properties(), "ssl.client.auth": "required"}
    link = Link(server_context(props), alice.ssl_context()).handshake()
    assert principal_of(link.server, PrincipalMapper()) == f"User:{ALICE_DN}"
    with pytest.raises(HandshakeError):
        Link(server_context(props), alice.ssl_context(client_certificate=False)).handshake().exchange()
    config = alice.librdkafka_config()
    assert config["security.protocol"] == "SSL"
    for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        assert Path(config[key]).is_file()


def test_client_auth_required_rejects_a_certificate_from_another_ca(server, ca, tls_dir):
    stranger = CertificateAuthority(key_type="ec").client_files(tls_dir, "CN=mallory", name="mallory")
    props = {**server.kafka_properties(), "ssl.client.auth": "required"}
    with pytest.raises(HandshakeError):
        connect(props, ca, identity=stranger)


def test_sasl_ssl_listener_ignores_the_broker_wide_client_auth(server, alice, ca):
    props = {**server.kafka_properties(), "ssl.client.auth": "required"}
    assert server_context(props, "SASL_SSL", security_protocol="SASL_SSL").verify_mode == ssl.CERT_NONE
    props["listener.name.sasl_ssl.ssl.client.auth"] = "required"
    assert server_context(props, "SASL_SSL", security_protocol="SASL_SSL").verify_mode == ssl.CERT_REQUIRED


def test_bad_client_auth_value_is_a_config_error(server):
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        server_context({**server.kafka_properties(), "ssl.client.auth": "sometimes"})


# -- protocols and cipher suites -----------------------------------------------------------------

def test_defaults_are_tls12_to_tls13(server):
    ctx = server_context(server.kafka_properties())
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


@pytest.mark.parametrize("extra, version", [
    ({"ssl.enabled.protocols": "TLSv1.2"}, "TLSv1.2"),
    ({"ssl.enabled.protocols": "TLSv1.2,TLSv1.1,TLSv1"}, "TLSv1.2"),      # Kafka < 2.5's default
    ({"ssl.enabled.protocols": "", "ssl.protocol": "TLSv1.2"}, "TLSv1.2"),
    ({"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2"}, "TLSv1.3"),
    ({"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "TLSv1.2"),
    ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "TLSv1.3"),
])
def test_negotiated_version(server, ca, extra, version):
    assert connect({**server.kafka_properties(), **extra}, ca).server.version() == version


def test_tls13_only_refuses_a_tls12_client(server, ca):
    props = {**server.kafka_properties(), "ssl.enabled.protocols": "TLSv1.3"}
    with pytest.raises(HandshakeError):
        connect(props, ca, maximum=ssl.TLSVersion.TLSv1_2)


def test_tls12_cipher_suites_map_from_java_names(server, ca):
    props = {**server.kafka_properties(),
             "ssl.cipher.suites": "SSL_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_EMPTY_RENEGOTIATION_INFO_SCSV"}
    link = connect(props, ca)
    assert link.server.cipher()[:2] == ("ECDHE-RSA-AES256-GCM-SHA384", "TLSv1.2")
    with pytest.raises(HandshakeError):       # a client that offers none of them
        client = trusting_client(ca, maximum=ssl.TLSVersion.TLSv1_2)
        client.set_ciphers("ECDHE-RSA-CHACHA20-POLY1305")
        Link(server_context(props), client).handshake()


def test_tls13_suites_keep_tls12_suites_named_beside_them(server, ca):
    props = {**server.kafka_properties(),
             "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
    assert connect(props, ca).server.version() == "TLSv1.3"
    link = connect(props, ca, maximum=ssl.TLSVersion.TLSv1_2)
    assert link.server.cipher()[0] == "ECDHE-RSA-AES128-GCM-SHA256"


@pytest.mark.parametrize("extra, key", [
    ({"ssl.enabled.protocols": "TLSv1.4"}, "ssl.enabled.protocols"),
    ({"ssl.enabled.protocols": "TLSv1,TLSv1.1"}, "ssl.enabled.protocols"),
    ({"ssl.protocol": "TLSv2"}, "ssl.protocol"),
    ({"ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256", "ssl.enabled.protocols": "TLSv1.2"}, "ssl.cipher.suites"),
])
def test_bad_protocol_settings_are_config_errors(server, extra, key):
    with pytest.raises(ConfigError, match=f"configuration {key}:"):
        server_context({**server.kafka_properties(), **extra})


# -- inter-broker client context -----------------------------------------------------------------

def test_client_context_checks_the_host_name_when_https(server):
    props = server.kafka_properties()
    Link(server_context(props), client_context(props), "localhost").handshake()
    Link(server_context(props), client_context(props), "127.0.0.1").handshake()
    with pytest.raises(HandshakeError, match="match|mismatch"):
        Link(server_context(props), client_context(props), "broker9.example.com").handshake()
    no_check = client_context({**props, "ssl.endpoint.identification.algorithm": ""})
    assert not no_check.check_hostname
    Link(server_context(props), no_check, "broker9.example.com").handshake()


def test_client_context_presents_its_keystore_to_a_peer_that_requires_one(server):
    props = {**server.kafka_properties("PKCS12"), "ssl.client.auth": "required"}
    link = Link(server_context(props), client_context(props)).handshake()
    link.exchange()
    assert principal_of(link.server, PrincipalMapper()) == "User:CN=localhost,O=kwire"


def test_client_context_refuses_an_unknown_identification_algorithm(server):
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        client_context({**server.kafka_properties(), "ssl.endpoint.identification.algorithm": "dns"})


# -- misconfigurations ---------------------------------------------------------------------------

SECRET = "hunter2"          # a password that must never appear in an error


def _jks(tls_dir):
    path = tls_dir / "broker.keystore.jks"
    path.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + bytes(64))       # a JKS header
    return path


@pytest.mark.parametrize("change, key, words", [
    (lambda s, d: {"ssl.keystore.location": str(d / "missing.pem")}, "ssl.keystore.location", "missing.pem"),
    (lambda s, d: {"ssl.truststore.location": str(d / "gone.pem"), "ssl.client.auth": "required"},
     "ssl.truststore.location", "gone.pem"),
    (lambda s, d: {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(s.keystore_p12),
                   "ssl.keystore.password": SECRET}, "ssl.keystore.password", "keystore.p12"),
    (lambda s, d: {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(s.keystore_p12)},
     "ssl.keystore.password", "needs a password"),
    (lambda s, d: {"ssl.keystore.location": str(s.keystore_encrypted), "ssl.key.password": SECRET},
     "ssl.key.password", "keystore-encrypted.pem"),
    (lambda s, d: {"ssl.keystore.location": str(s.keystore_encrypted)}, "ssl.key.password", "is encrypted"),
    (lambda s, d: {"ssl.keystore.type": "JKS", "ssl.keystore.location": str(_jks(d)),
                   "ssl.keystore.password": SECRET}, "ssl.keystore.type", "keytool -importkeystore"),
    (lambda s, d: {"ssl.keystore.type": None, "ssl.keystore.location": str(_jks(d)),
                   "ssl.keystore.password": SECRET}, "ssl.keystore.type", "PKCS12"),
    (lambda s, d: {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(_jks(d)),
                   "ssl.keystore.password": SECRET}, "ssl.keystore.type", "keytool -importkeystore"),
    (lambda s, d: {"ssl.keystore.type": None}, "ssl.keystore.location", "set ssl.keystore.type=PEM"),
    (lambda s, d: {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(s.truststore_p12)},
     "ssl.truststore.password", "needs a password"),
    (lambda s, d: {"ssl.truststore.type": None}, "ssl.truststore.location", "set ssl.truststore.type=PEM"),
    (lambda s, d: {"ssl.keystore.type": "BCFKS", "ssl.keystore.password": SECRET},
     "ssl.keystore.type", "PEM or PKCS12"),
    (lambda s, d: {"ssl.keystore.password": SECRET}, "ssl.keystore.password", "ssl.key.password"),
    (lambda s, d: {"ssl.truststore.password": SECRET}, "ssl.truststore.password", "PEM"),
    (lambda s, d: {"ssl.keystore.location": None}, "ssl.keystore.location", "needs a keystore"),
    (lambda s, d: {"ssl.keystore.location": str(s.truststore)}, "ssl.keystore.location", "no PRIVATE KEY"),
    (lambda s, d: {"ssl.keystore.location": str(s.key)}, "ssl.keystore.location", "no CERTIFICATE"),
    (lambda s, d: {"ssl.keystore.location": None, "ssl.keystore.key": s.identity.key_pem().decode()},
     "ssl.keystore.key", "certificate.chain"),
    (lambda s, d: {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(s.truststore_p12),
                   "ssl.keystore.password": PASSWORD}, "ssl.keystore.location", "no private key"),
])
def test_misconfiguration_names_the_key_and_the_file(server, tls_dir, change, key, words):
    props = {**server.kafka_properties(), **change(server, tls_dir)}
    props = {k: v for k, v in props.items() if v is not None}
    with pytest.raises(ConfigError, match=f"configuration {key}:") as failure:
        server_context(props)
    assert words in str(failure.value)
    assert SECRET not in str(failure.value) and PASSWORD not in str(failure.value)


def test_key_not_matching_the_certificate(server, alice, tls_dir):
    path = tls_dir / "mismatched.pem"
    path.write_bytes(alice.identity.key_pem() + server.identity.chain_pem())
    with pytest.raises(ConfigError, match="ssl.keystore.location: the private key in the file .*mismatched.pem "
                                          "does not match its certificate"):
        server_context({**server.kafka_properties(), "ssl.keystore.location": str(path)})


def test_chain_out_of_order_is_reordered_leaf_first(server, ca, tls_dir):
    path = tls_dir / "reversed.pem"
    leaf = server.identity.certificate.public_bytes(serialization.Encoding.PEM)
    path.write_bytes(server.identity.key_pem() + ca.ca_pem() + leaf)
    connect({**server.kafka_properties(), "ssl.keystore.location": str(path)}, ca)


def test_error_names_the_listener_prefixed_key(server, tls_dir):
    props = {**server.kafka_properties(), "listener.name.external.ssl.keystore.location": str(tls_dir / "x.pem")}
    with pytest.raises(ConfigError, match="listener.name.external.ssl.keystore.location: cannot read"):
        server_context(props, "EXTERNAL")


# -- the subject DN as Java prints it ------------------------------------------------------------

def _cert_der(name: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer = x509.Name.from_rfc4514_string("CN=issuer")
    day = datetime.datetime(2024, 1, 1)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(issuer).public_key(key.public_key())
            .serial_number(1).not_valid_before(day).not_valid_after(day + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER))


A, RDN, T = x509.NameAttribute, x509.RelativeDistinguishedName, x509.name._ASN1Type


@pytest.mark.parametrize("name, java", [
    (x509.Name.from_rfc4514_string(ALICE_DN), ALICE_DN),
    (x509.Name.from_rfc4514_string("CN=a\\,b+UID=x,O=kwire"), "CN=a\\,b+UID=x,O=kwire"),
    (x509.Name([A(NameOID.COMMON_NAME, "  two lead and trail  ")]), "CN=\\ \\ two lead and trail\\ \\ "),
    (x509.Name([A(NameOID.COMMON_NAME, "\rcr\r")]), "CN=\\\rcr\\\r"),
    (x509.Name([A(NameOID.COMMON_NAME, "nul\0x")]), "CN=nul\\00x"),
    (x509.Name([A(NameOID.COMMON_NAME, "#=+<>;\"\\ mid#")]), "CN=\\#\\=\\+\\<\\>\\;\\\"\\\\ mid\\#"),
    (x509.Name([A(NameOID.COMMON_NAME, "ünïcode")]), "CN=ünïcode"),
    (x509.Name([A(NameOID.COMMON_NAME, "bmp ü", _type=T.BMPString)]), "CN=\\00b\\00m\\00p\\00 \\00\ufffd"),
    (x509.Name([A(NameOID.COMMON_NAME, "univ", _type=T.UniversalString)]),
     "CN=#1c10000000750000006e0000006900000076"),
    (x509.Name([A(NameOID.EMAIL_ADDRESS, "bob@example.com"), A(NameOID.SERIAL_NUMBER, "1234"),
                A(NameOID.TITLE, "boss")]),
     "2.5.4.12=#0c04626f7373,2.5.4.5=#130431323334,1.2.840.113549.1.9.1=#160f626f62406578616d706c652e636f6d"),
    (x509.Name([RDN([A(NameOID.COMMON_NAME, "m"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "u"),
                     A(NameOID.EMAIL_ADDRESS, "e@x")])]), "CN=m+OU=u+1.2.840.113549.1.9.1=#1603654078"),
    (x509.Name([A(NameOID.COUNTRY_NAME, "US"), A(NameOID.DOMAIN_COMPONENT, "com"),
                A(NameOID.STREET_ADDRESS, "1 Main"), A(NameOID.LOCALITY_NAME, "L"),
                A(NameOID.STATE_OR_PROVINCE_NAME, "S"), A(NameOID.USER_ID, "u1"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "y" * 200, _validate=False)]),
     "OU=" + "y" * 200 + ",UID=u1,ST=S,L=L,STREET=1 Main,DC=com,C=US"),
    (x509.Name([]), ""),
])
def test_subject_dn_prints_like_java(name, java):
    assert subject_dn(_cert_der(name)) == java


# -- ssl.principal.mapping.rules -----------------------------------------------------------------

SERVICE = "CN=Bob Smith,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
ADMIN = "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
KAFKA_DOCS_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
                    "DEFAULT")
NO_MATCH = NoMatchingRule


@pytest.mark.parametrize("rules, dn, expected", [
    ("DEFAULT", ALICE_DN, ALICE_DN),
    (None, ALICE_DN, ALICE_DN),
    (" DEFAULT , ", ALICE_DN, ALICE_DN),
    ("", ALICE_DN, NO_MATCH),                        # no rules at all: nobody maps
    ("RULE:^CN=(.*?),OU=(.*?)$/$1/L,", "CN=Alice,OU=eng", "alice"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1/L,", "OU=eng,CN=alice", NO_MATCH),    # it must match the whole DN
    ("RULE:^CN=(.*?),OU=(.*?)$/$1/U", "CN=Alice,OU=eng", "ALICE"),
    (KAFKA_DOCS_RULES, SERVICE, "Bob Smith"),
    (KAFKA_DOCS_RULES, ADMIN, "adminuser@admin"),
    (KAFKA_DOCS_RULES, "CN=kafka1.example.com,OU=brokers", "kafka1.example.com"),
    (KAFKA_DOCS_RULES, "OU=x", "OU=x"),
    ("RULE:^CN=(.*?),.*$/$1/,RULE:.*/fallback/", ALICE_DN, "alice"),     # the first match wins
    ("RULE:^CN=(.*?),.*$/$1/,RULE:.*/fallback/", "OU=x", "fallbackfallback"),  # replaceAll: .* matches twice
    ("  RULE:^CN=(.*?),.*$/$1/  ,  DEFAULT  ", "OU=x", "OU=x"),
    ("RULE:^CN=(.*?),.*$/$1/L,,DEFAULT", ALICE_DN, "alice"),
    ("RULE:^CN=(.*?),.*$/$1@$4/", ALICE_DN, "alice@$4"),        # a group beyond the pattern's is literal
    ("RULE:^CN=(.*?),.*$/$12/", ALICE_DN, "alice2"),
    ("RULE:^CN=(.*?),.*$/$0/", ALICE_DN, ALICE_DN),
    ("RULE:^CN=(.*?),.*$/\\$1/", ALICE_DN, "$1"),
    ("RULE:^CN=(.*?),(.*?)$/$3$2$1/", "CN=a,b", "$3ba"),
    ("RULE:^CN=(.*?),(.*?),(.*?),(.*?),(.*?),(.*?),(.*?),(.*?),(.*?),(.*?),(.*?)$/$11-$10-$12-$1$2/",
     "CN=a,b,c,d,e,f,g,h,i,j,k", "k-j-a2-ab"),
    ("RULE:^CN=([^,\\/]*)\\/(.*?),.*$/$1\\/$2/", "CN=a/b,OU=c\\,d", "a/b"),     # \\/ is a slash
    ("RULE:^CN=(?<name>[^,]*),.*$/${name}/L", SERVICE, "bob smith"),
    ("RULE:(.*?)/<$1>/", "OU=x", "<>O<>U<>=<>x<>"),             # Java's replaceAll on empty matches
    ("RULE:(x)?.*/[$1]/", ALICE_DN, "[][]"),
    ("RULE:(?i)^cn=(.*?),.*$/$1/U", ALICE_DN, "ALICE"),
    ("RULE:^CN=(\\w+).*$/$1/", "CN=ünïcode,O=x", NO_MATCH),       # \w is ASCII, as in Java
    ("RULE:^CN=([^,]+).*$/$1/U", "CN=ünïcode,O=x", "ÜNÏCODE"),
])
def test_mapping_rules_as_kafka_applies_them(rules, dn, expected):
    mapper = PrincipalMapper(rules)
    if expected is NO_MATCH:
        with pytest.raises(NoMatchingRule, match="No rules apply to"):
            mapper.name(dn)
    else:
        assert mapper.name(dn) == expected


@pytest.mark.parametrize("rules", [
    "RULE:^CN=(.*?),.*$/$1/X", "RULE:^CN=(.*?),.*$/$1/LX", "RULE:^CN=(.*?),.*$/$1/L junk",
    "RULE:^CN=(.*?),.*$/$1", "RULE:abc", "DEFAULTX", "FOO", "DEFAULT,FOO", "RULE:[/x/",
    # Kafka fails these only when a client's DN matches; kwire at startup
    "RULE:^CN=.*$/$1/", "RULE:^CN=(.*?),.*$/a$b/", "RULE:^CN=(.*?),.*$/$1$/", "RULE:^CN=(?<n>.*)$/${nope}/",
])
def test_malformed_rules_are_config_errors(rules):
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        PrincipalMapper(rules)


def test_principal_through_a_handshake_with_listener_rules(server, alice, ca):
    props = {**server.kafka_properties(), "ssl.client.auth": "required",
             "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/U"}
    link = Link(server_context(props, "MTLS"), trusting_client(ca, identity=alice)).handshake()
    assert principal_of(link.server, principal_mapper(props, "MTLS")) == "User:ALICE@ENG"
    assert principal_of(link.server, principal_mapper(props)) == f"User:{ALICE_DN}"
    with pytest.raises(NoMatchingRule):
        principal_of(link.server, PrincipalMapper("RULE:^CN=bob,.*$/bob/"))
    with pytest.raises(ConfigError, match="listener.name.mtls.ssl.principal.mapping.rules"):
        principal_mapper({"listener.name.mtls.ssl.principal.mapping.rules": "nonsense"}, "MTLS")
