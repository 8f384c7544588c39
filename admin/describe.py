"""DescribeConfigs results for topics and the broker, with Kafka's sources and synonyms.

Each entry's synonyms run from highest to lowest precedence, the way Kafka
lists them: the topic override (DYNAMIC_TOPIC_CONFIG), then the broker keys set
dynamically for this broker (DYNAMIC_BROKER_CONFIG) and for the cluster default
(DYNAMIC_DEFAULT_BROKER_CONFIG), then those set in server.properties
(STATIC_BROKER_CONFIG), then the broker keys that have a default (DEFAULT_CONFIG),
each group in synonym order.  The entry's source is that of its first synonym, or
DEFAULT_CONFIG if none.  A broker entry is read-only unless the key can change at
runtime (``dynamic_config.DYNAMIC_KEYS``); broker loggers (source 6) have none.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from .broker_config import BROKER_KEYS, BROKER_SYNONYMS, BrokerConfig, ConfigType, format_value
from .dynamic_config import is_dynamic
from .topic_config import TOPIC_KEYS, topic_value


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigSynonym(NamedTuple):
    name: str
    value: str | None
    source: int


@dataclasses.dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    source: int
    is_sensitive: bool
    synonyms: list[ConfigSynonym]      # empty unless include_synonyms
    config_type: int
    documentation: str | None          # None unless include_documentation
    is_default: bool                   # DescribeConfigs v0's flag: source == DEFAULT_CONFIG


def _selected(all_names: Iterable[str], keys: Sequence[str] | None) -> list[str]:
    # Kafka answers null or empty keys with every config, and silently drops names it does not know.
    names = sorted(all_names)
    if not keys:
        return names
    wanted = set(keys)
    return [name for name in names if name in wanted]


def _broker_synonyms(broker: BrokerConfig, names: Iterable[str], *, hide: bool) -> list[ConfigSynonym]:
    names = list(names)
    found = []
    for layer, source in ((broker.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (broker.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                          (broker.static, ConfigSource.STATIC_BROKER_CONFIG)):
        for name in names:
            if name in layer:
                key = BROKER_KEYS[name]
                found.append(ConfigSynonym(name, None if hide else format_value(key.type, key.parse(layer[name])),
                                           int(source)))
    for name in names:
        default = BROKER_KEYS[name].default
        if default is not None:
            found.append(ConfigSynonym(name, None if hide else format_value(BROKER_KEYS[name].type, default),
                                       int(ConfigSource.DEFAULT_CONFIG)))
    return found


def _entry(name: str, value: str | None, synonyms: list[ConfigSynonym], config_type: ConfigType, *,
           read_only: bool, sensitive: bool, include_synonyms: bool, doc: str | None) -> ConfigEntry:
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(name=name, value=None if sensitive else value, read_only=read_only, source=int(source),
                       is_sensitive=sensitive, synonyms=synonyms if include_synonyms else [],
                       config_type=int(config_type), documentation=doc,
                       is_default=source == ConfigSource.DEFAULT_CONFIG)


def describe_topic(broker: BrokerConfig, overrides: Mapping[str, str], keys: Sequence[str] | None,
                   include_synonyms: bool, include_documentation: bool) -> list[ConfigEntry]:
    """Every topic config (or those named in ``keys``) with its effective value and source.

    ``overrides`` are the topic's stored configs.  Unknown names in ``keys`` are
    omitted.  Raises KafkaApiError(INVALID_CONFIG) only if a stored override is invalid.
    """
    entries = []
    for name in _selected(TOPIC_KEYS, keys):
        key = TOPIC_KEYS[name]
        value = format_value(key.type, topic_value(broker, overrides, name))
        synonyms = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, value, int(ConfigSource.DYNAMIC_TOPIC_CONFIG)))
        synonyms += _broker_synonyms(broker, (s for s, _ in key.synonyms), hide=False)
        entries.append(_entry(name, value, synonyms, key.type, read_only=False, sensitive=False,
                              include_synonyms=include_synonyms,
                              doc=key.doc if include_documentation else None))
    return entries


def _broker_value(broker: BrokerConfig, name: str) -> Any:
    if name in ("node.id", "broker.id"):
        return broker.node_id       # the id in force, even when kwire's default supplied it
    return broker.value_of(name)


def describe_broker(broker: BrokerConfig, keys: Sequence[str] | None, include_synonyms: bool,
                    include_documentation: bool, *, per_broker: bool = True) -> list[ConfigEntry]:
    """Every broker config (or those named in ``keys``), passwords hidden; read-only unless
    the key can change at runtime.

    Keys the user set that kwire does not know are listed too, as Kafka does,
    with an unknown type and treated as sensitive.  ``per_broker=False`` is the
    cluster-default resource (empty resource name): as Kafka, only the dynamic
    defaults set there (DYNAMIC_DEFAULT_BROKER_CONFIG).  Never raises.
    """
    if not per_broker:
        return [_dynamic_default_entry(broker, name, include_synonyms, include_documentation)
                for name in _selected(broker.dynamic_default, keys)]
    unknown = [name for name in (*broker.static, *broker.dynamic_broker) if name not in BROKER_KEYS]
    entries = []
    for name in _selected([*BROKER_KEYS, *unknown], keys):
        key = BROKER_KEYS.get(name)
        if key is None:
            entries.append(_unlisted_entry(broker, name, include_synonyms))
            continue
        synonyms = _broker_synonyms(broker, BROKER_SYNONYMS.get(name, (name,)), hide=key.sensitive)
        while synonyms and synonyms[0].name != name:
            synonyms.pop(0)      # a higher-precedence key belongs to its own entry, not this one
        entries.append(_entry(name, format_value(key.type, _broker_value(broker, name)), synonyms, key.type,
                              read_only=not is_dynamic(name), sensitive=key.sensitive,
                              include_synonyms=include_synonyms, doc=key.doc if include_documentation else None))
    return entries


def _unlisted_entry(broker: BrokerConfig, name: str, include_synonyms: bool) -> ConfigEntry:
    """A key outside kwire's table: a listener's TLS store set dynamically (shown, but not
    its passwords), or a key server.properties sets that kwire does not know (hidden)."""
    if name in broker.dynamic_broker:
        sensitive = "password" in name
        value = None if sensitive else broker.dynamic_broker[name]
        synonyms = [ConfigSynonym(name, value, int(ConfigSource.DYNAMIC_BROKER_CONFIG))]
        return _entry(name, value, synonyms, ConfigType.PASSWORD if sensitive else ConfigType.STRING,
                      read_only=False, sensitive=sensitive, include_synonyms=include_synonyms, doc=None)
    synonyms = [ConfigSynonym(name, None, int(ConfigSource.STATIC_BROKER_CONFIG))]
    return _entry(name, None, synonyms, ConfigType.UNKNOWN, read_only=not is_dynamic(name), sensitive=True,
                  include_synonyms=include_synonyms, doc=None)


def _dynamic_default_entry(broker: BrokerConfig, name: str, include_synonyms: bool, docs: bool) -> ConfigEntry:
    key = BROKER_KEYS[name]
    value = format_value(key.type, key.parse(broker.dynamic_default[name]))
    synonyms = [ConfigSynonym(name, None if key.sensitive else value, int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))]
    return _entry(name, value, synonyms, key.type, read_only=False, sensitive=key.sensitive,
                  include_synonyms=include_synonyms, doc=key.doc if docs else None)
