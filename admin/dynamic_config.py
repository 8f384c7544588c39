"""Dynamic broker configs: set with AlterConfigs / IncrementalAlterConfigs on a BROKER
resource and applied without a restart, as Kafka's ``DynamicBrokerConfig``.

Two entities hold them: one broker (resource name its id) and the cluster-wide default
(resource name ``""``, Kafka's ``<default>``).  In force, per key: this broker's dynamic
value, else the cluster default's, else server.properties (with ``--override``), else the
key's default (Kafka's DYNAMIC_BROKER_CONFIG > DYNAMIC_DEFAULT_BROKER_CONFIG >
STATIC_BROKER_CONFIG > DEFAULT_CONFIG); the synonym rules (``log.retention.ms`` over
``.minutes`` over ``.hours``) then apply to the merged keys, as in Kafka.

Which keys may change at runtime: the broker defaults of topic configs (Kafka's
``DynamicLogConfig``: ``log.retention.*``, ``log.segment.bytes``, ``log.roll.*``,
``log.cleanup.policy``, ``message.max.bytes``, ``min.insync.replicas``,
``compression.type``, the ``log.cleaner.*`` topic defaults, ...), which every partition
re-reads when they change; the cleaner's threads, back-off, dedupe buffer and I/O rate
(``kwire.services.cleaner``); ``max.connections``, read as each connection opens;
``num.replica.fetchers``, which the cluster applies at its next reconciliation (the alter's
own ZooKeeper write brings one); and, on
one broker only (Kafka's rule for security configs), a TLS listener's key and trust stores
named with its listener prefix (``listener.name.<l>.ssl.keystore.location`` and the rest of
``LISTENER_SSL_KEYS``): certificate rotation, for the connections made from then on.  Setting
a store's location again reloads its file, so a certificate renewed in place is picked up.  Any
other known key is refused with Kafka's error (INVALID_REQUEST, "Cannot update these configs
dynamically"); an unknown key or a bad value is INVALID_CONFIG.

Pure: where the values are stored is ``kwire.services.broker_configs``'s concern.
"""
from __future__ import annotations

import dataclasses
import logging
import re
import types
from typing import Iterable, Mapping

from kwire.codecs.errors import ErrorCode, KafkaApiError

from .broker_config import BROKER_KEYS, BrokerConfig, ConfigError, ConfigType, broker_config_from_properties
from .topic_config import TOPIC_KEYS, AlterOp, check_alter_ops, list_op

logger = logging.getLogger("kwire.config")

DEFAULT_ENTITY = ""            # the cluster-wide default (ZooKeeper: /config/brokers/<default>)
# the broker keys behind a topic config's default, except the message format (as Kafka)
_LOG_KEYS = frozenset(s for key in TOPIC_KEYS.values() for s, _ in key.synonyms) - {"log.message.format.version"}
# the cleaner's (Kafka's LogCleaner.ReconfigurableConfigs that kwire uses)
_CLEANER_KEYS = {"log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
                 "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second"}
DYNAMIC_KEYS: frozenset[str] = frozenset(
    k for k in _LOG_KEYS | _CLEANER_KEYS | {"max.connections", "num.replica.fetchers", "leader.replication.throttled.rate",
                                            "follower.replication.throttled.rate",
                                            "replica.alter.log.dirs.io.max.bytes.per.second"} if k in BROKER_KEYS)


# what a TLS listener takes at runtime, behind its prefix: listener.name.<listener>.<key>
LISTENER_SSL_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates"})
_LISTENER_SSL = re.compile(r"listener\.name\.[a-z0-9_-]+\.(" + "|".join(re.escape(k) for k in LISTENER_SSL_KEYS) + ")")


def is_dynamic(name: str) -> bool:
    return name in DYNAMIC_KEYS or is_listener_ssl(name)


def is_listener_ssl(name: str) -> bool:
    """Whether ``name`` is a TLS listener's store setting (``listener.name.<l>.ssl.keystore.*``...)."""
    return _LISTENER_SSL.fullmatch(name) is not None


def validate_update(configs_in: Mapping[str, str | None], per_broker: bool = True) -> dict[str, str]:
    """The dynamic configs of one entity after an alter, checked: returns them as strings.
    Raises KafkaApiError: INVALID_REQUEST for a known key that cannot change at runtime (all
    of them named, as Kafka) or a listener's store set on the cluster default (``per_broker``
    False), INVALID_CONFIG for an unknown key or a value its type refuses."""
    listener = sorted(n for n in configs_in if is_listener_ssl(n))
    if listener and not per_broker:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                       f"broker id must be specified: Set({', '.join(listener)})")
    configs = {n: v for n, v in configs_in.items() if n not in listener}
    unknown = sorted(n for n in configs if n not in BROKER_KEYS)
    if unknown:
        raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Unknown broker config(s): {', '.join(unknown)}")
    static = sorted(n for n in configs if n not in DYNAMIC_KEYS)
    if static:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                            f"Cannot update these configs dynamically: Set({', '.join(static)})")
    result = {}
    for name, raw in configs_in.items():
        if raw is None:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        try:
            if name not in listener:     # a listener's stores are read when its context is built
                BROKER_KEYS[name].parse(raw)
        except ConfigError as exc:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        result[name] = str(raw).strip()
    return result


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]],
                      per_broker: bool = True) -> dict[str, str]:
    """IncrementalAlterConfigs on one entity's dynamic configs (SET=0, DELETE=1, APPEND=2,
    SUBTRACT=3; a list operation starts from the entity's value, else the key's default).  Raises
    KafkaApiError."""
    result = dict(current)
    for name, op, value in check_alter_ops(ops):
        op = AlterOp(op)
        if op is AlterOp.DELETE:
            result.pop(name, None)
        elif op is AlterOp.SET:
            result[name] = value
        else:
            key = BROKER_KEYS.get(name)
            if key is None or key.type is not ConfigType.LIST:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                    f"Can't {op.name} to key {name} because its type is not LIST.")
            result[name] = list_op(result.get(name, ",".join(key.default or ())), op, value)
    return validate_update(result, per_broker)


def with_dynamic(config: BrokerConfig, default: Mapping[str, str], own: Mapping[str, str]) -> BrokerConfig:
    """``config`` (its static part) with the dynamic configs of the cluster default and of this
    broker in force.  A stored value that no longer parses, or a key that cannot change at
    runtime, is left out with a warning: a bad znode must not stop a broker."""
    default = _usable(default, "the cluster default", per_broker=False)
    own = _usable(own, f"broker {config.node_id}", per_broker=True)
    resolved = broker_config_from_properties(config.static, {**default, **own})
    return dataclasses.replace(resolved, static=config.static, dynamic_default=types.MappingProxyType(default),
                               dynamic_broker=types.MappingProxyType(own))


def _usable(configs: Mapping[str, str], entity: str, per_broker: bool) -> dict[str, str]:
    usable = {}
    for name, raw in configs.items():
        try:
            validate_update({name: raw}, per_broker)
        except KafkaApiError as exc:
            logger.warning("ignoring the dynamic config %s=%s of %s: %s", name, raw, entity, exc.message)
            continue
        usable[name] = raw
    return usable

