"""Security settings of the broker: listeners' protocols, TLS, SASL and the authorizer.

Kafka's keys and defaults, merged into ``broker_config.BROKER_KEYS``.  Kafka lets a
listener override any ``ssl.*`` or ``sasl.*`` key with
``listener.name.<listener name in lower case>.<key>`` (and a SASL key per mechanism,
``listener.name.<listener>.<mechanism in lower case>.sasl.jaas.config``);
``listener_settings`` resolves them for one listener.  ``connections.max.reauth.ms``
(KIP-368) may be given per listener and per mechanism the same way:
``listener.name.<listener>.<mechanism>.connections.max.reauth.ms``, then
``listener.name.<listener>.connections.max.reauth.ms``, then the broker-wide key.

Security protocols: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL are served, in cluster
mode too; brokers reach each other through the inter-broker listener
(``broker_config.BrokerConfig.inter_broker_listener_name``, kwire.security.peer).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from .config_def import ConfigKey, ConfigType as T, at_least, one_of

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = PROTOCOLS
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
LISTENER_PREFIX = "listener.name."

SECURITY_KEYS: list[ConfigKey] = [
    ConfigKey("ssl.keystore.type", T.STRING, "JKS",
              "Keystore format: PEM or PKCS12 (kwire cannot read JKS; convert it with keytool)."),
    ConfigKey("ssl.keystore.location", T.STRING, None, "Keystore file: PEM (key and certificate chain) or PKCS12."),
    ConfigKey("ssl.keystore.password", T.PASSWORD, None, "Keystore password (PKCS12)."),
    ConfigKey("ssl.key.password", T.PASSWORD, None, "Password of the private key (an encrypted PEM key)."),
    ConfigKey("ssl.keystore.key", T.PASSWORD, None, "The private key in PEM, inline (with ssl.keystore.type=PEM)."),
    ConfigKey("ssl.keystore.certificate.chain", T.PASSWORD, None,
              "The certificate chain in PEM, inline (with ssl.keystore.type=PEM)."),
    ConfigKey("ssl.truststore.type", T.STRING, "JKS", "Truststore format: PEM (or PKCS12)."),
    ConfigKey("ssl.truststore.location", T.STRING, None, "Truststore file."),
    ConfigKey("ssl.truststore.password", T.PASSWORD, None, "Truststore password."),
    ConfigKey("ssl.truststore.certificates", T.PASSWORD, None, "Trusted certificates in PEM, inline."),
    ConfigKey("ssl.client.auth", T.STRING, "none", "Client certificates: none, requested or required.",
              one_of("none", "requested", "required")),
    ConfigKey("ssl.enabled.protocols", T.LIST, ("TLSv1.2", "TLSv1.3"), "TLS versions accepted."),
    ConfigKey("ssl.protocol", T.STRING, "TLSv1.3", "The TLS protocol of the SSL context."),
    ConfigKey("ssl.cipher.suites", T.LIST, (), "Cipher suites (empty: the defaults)."),
    ConfigKey("ssl.endpoint.identification.algorithm", T.STRING, "https",
              "Host name verification of the server certificate by the client side (https, or empty)."),
    ConfigKey("ssl.principal.mapping.rules", T.STRING, "DEFAULT",
              "Rules mapping a client certificate's distinguished name to a principal name."),
    ConfigKey("sasl.enabled.mechanisms", T.LIST, ("GSSAPI",), "SASL mechanisms enabled on SASL listeners."),
    ConfigKey("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", "SASL mechanism between brokers."),
    ConfigKey("sasl.jaas.config", T.PASSWORD, None, "JAAS login context (users of PLAIN, for example)."),
    ConfigKey("sasl.server.max.receive.size", T.INT, 524288,
              "Largest frame a connection may send before its SASL authentication completes.", at_least(1)),
    ConfigKey("security.inter.broker.protocol", T.STRING, "PLAINTEXT",
              "Security protocol between brokers (when inter.broker.listener.name is not set).",
              one_of(*PROTOCOLS)),
    ConfigKey("connection.failed.authentication.delay.ms", T.INT, 100,
              "Delay before closing a connection whose authentication failed.", at_least(0)),
    ConfigKey("connections.max.reauth.ms", T.LONG, 0,
              "Longest SASL session before the client must re-authenticate on the same connection (KIP-368); "
              "an expired connection is closed at its next request other than a re-authentication. "
              "0: no limit beyond the credential's own lifetime (an OAUTHBEARER token's exp).", at_least(0)),
    ConfigKey("authorizer.class.name", T.STRING, "", "The authorizer; Kafka's ACL authorizers turn ACLs on."),
    ConfigKey("super.users", T.STRING, None, "Principals allowed everything, separated by semicolons."),
    ConfigKey("allow.everyone.if.no.acl.found", T.BOOLEAN, False,
              "Allow an operation on a resource no ACL names."),
]


MAX_REAUTH = "connections.max.reauth.ms"
_MAX_REAUTH_KEY = next(k for k in SECURITY_KEYS if k.name == MAX_REAUTH)


def is_listener_override(name: str) -> bool:
    """Whether ``name`` is a per-listener override Kafka accepts (``listener.name.x.ssl.*``,
    ``listener.name.x[.<mechanism>].connections.max.reauth.ms``)."""
    if not name.startswith(LISTENER_PREFIX):
        return False
    rest = name[len(LISTENER_PREFIX):]
    _listener, _, key = rest.partition(".")
    return (key.startswith(("ssl.", "sasl.")) or ".sasl." in rest or key == MAX_REAUTH
            or key.partition(".")[2] == MAX_REAUTH)


def max_reauth_ms(broker_value: int, originals: Mapping[str, str], listener: str,
                  mechanism: str) -> int:
    """``connections.max.reauth.ms`` for one mechanism of one listener, as Kafka's
    SaslChannelBuilder resolves it: ``listener.name.<l>.<mechanism>.`` first, then
    ``listener.name.<l>.``, then ``broker_value`` (the broker-wide key's).  Raises
    ConfigError naming the key."""
    own = f"{LISTENER_PREFIX}{listener.lower()}."
    for name in (f"{own}{mechanism.lower()}.{MAX_REAUTH}", f"{own}{MAX_REAUTH}"):
        if name in originals:
            return dataclasses.replace(_MAX_REAUTH_KEY, name=name).parse(originals[name])
    return broker_value


def listener_settings(values: Mapping[str, Any], originals: Mapping[str, str], listener: str,
                      prefix: str) -> dict[str, Any]:
    """The ``prefix`` keys (``"ssl."``) of one listener: the broker-wide typed values,
    overridden by ``listener.name.<listener>.<key>`` given as text."""
    settings = {name: value for name, value in values.items() if name.startswith(prefix)}
    own = f"{LISTENER_PREFIX}{listener.lower()}."
    for name, raw in originals.items():
        if name.startswith(own) and name[len(own):].startswith(prefix):
            settings[name[len(own):]] = raw
    return settings
