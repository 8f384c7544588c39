"""The broker's listeners from its configuration, sans-I/O: ``listeners``,
``advertised.listeners`` and ``listener.security.protocol.map`` resolved to the listeners kwire
binds and advertises, and the inter-broker listener chosen and checked by Kafka's rules.

kwire.admin.broker_config calls these while it resolves a ``BrokerConfig`` and re-exports
``Listener``, ``parse_listeners`` and ``INTER_BROKER_SASL_MECHANISMS``.  Everything raises
ConfigError naming the key at fault.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from .config_def import ConfigError, invalid, split_list
from .security_config import SERVED_PROTOCOLS


@dataclasses.dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` entry.  ``host == ""`` binds every interface, as in Kafka.
    ``protocol`` is its security protocol from ``listener.security.protocol.map``."""
    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def parse_listeners(key: str, text: str) -> tuple[Listener, ...]:
    """Parse a ``listeners``-style value; raises ConfigError naming ``key``."""
    result: list[Listener] = []
    for uri in split_list(text):
        m = _LISTENER.match(uri)
        if not m or not m.group(1):
            raise invalid(key, text, f"{uri!r} is not a listener of the form NAME://host:port")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise invalid(key, text, f"port {port} is not between 0 and 65535")
        listener = Listener(m.group(1).upper(), m.group(2), port)
        if any(existing.name == listener.name for existing in result):
            raise invalid(key, text, f"each listener must have a different name; {listener.name} repeats")
        result.append(listener)
    return tuple(result)


def _security_protocol_map(text: str) -> dict[str, str]:
    mapping = {}
    for entry in split_list(text):
        name, sep, protocol = entry.partition(":")
        if not sep or not name or not protocol:
            raise invalid("listener.security.protocol.map", text, f"{entry!r} is not NAME:PROTOCOL")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def resolve_listeners(values: Mapping[str, Any], notes: list[str]
                      ) -> tuple[tuple[Listener, ...], tuple[Listener, ...]]:
    controller_names = {n.upper() for n in values["controller.listener.names"]}
    protocols = _security_protocol_map(values["listener.security.protocol.map"])
    bound = []
    for listener in parse_listeners("listeners", values["listeners"]):
        if listener.name in controller_names:
            notes.append(f"listener {listener} is a controller listener; kwire does not bind it")
            continue
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise invalid("listeners", values["listeners"],
                          f"no security protocol defined for listener {listener.name} in "
                          "listener.security.protocol.map")
        if protocol not in SERVED_PROTOCOLS:
            raise invalid("listeners", values["listeners"],
                          f"listener {listener.name} uses {protocol}; kwire serves "
                          f"{', '.join(SERVED_PROTOCOLS)} listeners")
        bound.append(dataclasses.replace(listener, protocol=protocol))
    if not bound:
        raise invalid("listeners", values["listeners"], "at least one listener is required")
    if values["advertised.listeners"] is None:
        advertised_from = tuple(bound)
    else:
        advertised_from = parse_listeners("advertised.listeners", values["advertised.listeners"])
    advertised = []
    names = {listener.name for listener in bound}
    for listener in advertised_from:
        if listener.name in controller_names:
            continue
        if listener.name not in names:
            raise invalid("advertised.listeners", values["advertised.listeners"],
                          f"listener {listener.name} is not one of the listeners ({', '.join(sorted(names))})")
        if listener.host in ("0.0.0.0", "::"):
            raise invalid("advertised.listeners", values["advertised.listeners"] or values["listeners"],
                          f"cannot advertise the non-routable meta-address {listener.host}; "
                          "set advertised.listeners to a routable host")
        # kwire: Kafka advertises the canonical host name for an empty host; kwire uses loopback so a
        # default single node works without DNS.
        advertised.append(dataclasses.replace(listener, host=listener.host or "127.0.0.1",
                                              protocol=protocols[listener.name]))
    return tuple(bound), tuple(advertised)


# kwire: the mechanisms a broker logs in to another broker with (Kafka's default is GSSAPI)
INTER_BROKER_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def inter_broker_listener(values: Mapping[str, Any], originals: Mapping[str, str],
                          advertised: tuple[Listener, ...], notes: list[str]) -> str:
    """The name of the listener brokers reach each other through, by Kafka's rules
    (KafkaConfig.interBrokerListenerNameAndSecurityProtocol and validateValues): at most one of
    inter.broker.listener.name and security.inter.broker.protocol is set; without the name it is
    the listener named after the protocol (PLAINTEXT by default).  In cluster mode it must be
    advertised, and a SASL one must use a mechanism kwire can log in with, enabled on it.
    Raises ConfigError naming the key."""
    name = values["inter.broker.listener.name"]
    if name is not None and "security.inter.broker.protocol" in originals:
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                          "should be set.")
    key = "inter.broker.listener.name" if name is not None else "security.inter.broker.protocol"
    if name is not None:
        name = name.strip().upper()
        if name not in _security_protocol_map(values["listener.security.protocol.map"]):
            raise invalid(key, name, f"Listener with name {name} defined in inter.broker.listener.name "
                          "not found in listener.security.protocol.map.")
    else:
        name = values["security.inter.broker.protocol"].strip().upper()
    if not values["zookeeper.connect"]:
        if key in originals:
            notes.append(f"{key}={originals[key].strip()} is accepted but ignored: a single node has no peers")
        return name
    names = [listener.name for listener in advertised]
    if name not in names:
        default = "" if key == "inter.broker.listener.name" else \
            f" (without inter.broker.listener.name, the listener named {name} is used)"
        raise invalid(key, name, f"inter.broker.listener.name must be a listener name defined in "
                      f"advertised.listeners{default}. The valid options based on currently configured "
                      f"listeners are {','.join(names)}")
    if next(listener for listener in advertised if listener.name == name).protocol.startswith("SASL_"):
        _check_inter_broker_mechanism(values, originals, name)
    return name


def _check_inter_broker_mechanism(values: Mapping[str, Any], originals: Mapping[str, str], listener: str) -> None:
    mechanism = (values["sasl.mechanism.inter.broker.protocol"] or "").strip()
    if mechanism not in INTER_BROKER_SASL_MECHANISMS:
        raise invalid("sasl.mechanism.inter.broker.protocol", mechanism,
                      f"kwire brokers log in to each other (over the SASL listener {listener}) with "
                      f"{', '.join(INTER_BROKER_SASL_MECHANISMS)} only; GSSAPI is Kafka's default: set "
                      "sasl.mechanism.inter.broker.protocol to one of them")
    own = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    enabled = split_list(originals[own]) if own in originals else list(values["sasl.enabled.mechanisms"])
    if mechanism not in enabled:
        raise invalid("sasl.mechanism.inter.broker.protocol", mechanism,
                      f"sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                      f"when SASL is used for inter-broker communication (listener {listener} enables "
                      f"{', '.join(enabled) or 'none'})")
