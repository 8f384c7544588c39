"""Kafka's ZooKeeper data layout: znode paths and their JSON, as pure encode/decode.

A ZooKeeper-era Kafka operator opening ``zkCli.sh`` against a kwire cluster
sees the tree Kafka writes (facts from Kafka's ``kafka.zk.ZkData``).  Data is
UTF-8 JSON, compact as Kafka's Jackson writes it (key order is irrelevant):

/brokers/ids/<id>  (ephemeral)
    {"listener_security_protocol_map":{"CLIENT":"SASL_SSL","PLAINTEXT":"PLAINTEXT"},
     "endpoints":["CLIENT://h:9093","PLAINTEXT://h:9092"],"jmx_port":-1,"features":{},
     "host":"h","timestamp":"<ms>","port":9092,"version":5[,"rack":"r1"]
     [,"kwire_schema_registry":"http://h:8081"]}   (kwire's own field: its Schema Registry)
    every advertised listener, in order; host/port are the first PLAINTEXT-protocol endpoint's,
    null/-1 when there is none (older clients cannot connect then).  Version 1 has host/port
    only; versions 2-3 have endpoints named by their protocol; version 4 adds the map.
/brokers/topics/<t>
    {"version":3,"partitions":{"0":[1,2,3]},"adding_replicas":{},"removing_replicas":{},"topic_id":"<id>"}
    (version 2: no topic_id, Kafka 2.4-2.7; version 1: partitions only)
/brokers/topics/<t>/partitions/<p>/state
    {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}
/controller  (ephemeral)            {"version":1,"brokerid":1,"timestamp":"<ms>"}
/controller_epoch                   1   (decimal text, not JSON)
/config/topics/<t>                  {"version":1,"config":{"retention.ms":"1000"}}
/config/changes/config_change_<n>   {"version":2,"entity_path":"topics/<t>"}
/admin/delete_topics/<t>            (empty)
/admin/preferred_replica_election   {"version":1,"partitions":[{"topic":"t","partition":0}]}
/admin/reassign_partitions          {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],
                                     "log_dirs":["any","any"]}]}
/isr_change_notification/isr_change_<n>   same shape as the preferred replica election
/cluster/id                         {"version":"1","id":"<cluster id>"}
/latest_producer_id_block           {"version":1,"broker":1,"block_start":"0","block_end":"999"}

A topic id is Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes,
no padding (22 characters).  The partition state's ``version`` key is the JSON
format version; the znode's own version (``stat.version``, used for
conditional updates) travels separately in ``PartitionState.version``.

Every ``decode_*`` raises ``ZnodeFormatError`` (a ValueError) when the bytes
are not Kafka's format; none of them raises anything else.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import uuid
from typing import Any, Iterable, NamedTuple

from .broker_config import Listener
from .security_config import PROTOCOLS

# -- paths -------------------------------------------------------------------------------------
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
# kwire's own: group configs (KIP-848/932; Kafka keeps them in KRaft's metadata log only),
# one znode per group in the topic config layout
CONFIG_GROUPS = "/config/groups"
CONFIG_CLIENT_METRICS = "/config/client-metrics"   # KIP-714 subscriptions, as ZooKeeper-era Kafka
CONFIG_BROKERS = "/config/brokers"     # dynamic broker configs: <id>, and <default> for the cluster
DEFAULT_BROKER_ENTITY = "<default>"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "/isr_change_notification/isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONSUMERS = "/consumers"

# Kafka's ZkData.PersistentZkPaths: what every broker ensures at startup (ConfigType.ALL
# under /config), so the tree looks the same as a ZooKeeper-era Kafka cluster's.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS, BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION, PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS, "/config/clients", "/config/users", "/config/brokers", "/config/ips", CONFIG_GROUPS,
)

NO_LEADER = -1          # LeaderAndIsr.NoLeader
NEW_ZNODE = -1          # PartitionState.version of a state whose znode does not exist yet


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<id>``: the broker's ephemeral registration."""
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<t>``: the topic's replica assignment (and topic id)."""
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, leader_epoch, isr."""
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_topic_path(topic: str) -> str:
    """``/config/topics/<t>``: the topic's config overrides."""
    return f"{CONFIG_TOPICS}/{topic}"


def config_broker_path(entity: str) -> str:
    """``/config/brokers/<id>`` (one broker's dynamic configs) or ``/config/brokers/<default>``
    (the cluster default, entity ``""``), as ``encode_topic_config``."""
    return f"{CONFIG_BROKERS}/{entity or DEFAULT_BROKER_ENTITY}"


def broker_entity(child: str) -> str:
    """The entity of a ``/config/brokers`` child: ``""`` for ``<default>``."""
    return "" if child == DEFAULT_BROKER_ENTITY else child


def config_group_path(group_id: str) -> str:
    """``/config/groups/<g>``: the group's configs (kwire's), as ``encode_topic_config``."""
    return f"{CONFIG_GROUPS}/{group_id}"


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<t>``: the marker asking the controller to delete a topic."""
    return f"{DELETE_TOPICS}/{topic}"


class ZnodeFormatError(ValueError):
    """A znode's bytes are not in Kafka's format."""


# -- JSON helpers --------------------------------------------------------------------------------
def _dump(obj: dict[str, Any]) -> bytes:
    # Jackson writes compact UTF-8 without escaping non-ASCII characters
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZnodeFormatError(f"{what}: not JSON: {bytes(data)[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise ZnodeFormatError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _int(obj: dict[str, Any], key: str, what: str, *, as_text: bool = False) -> int:
    """An integer field; ``as_text`` for Kafka's longs written as strings ("timestamp")."""
    value = obj.get(key)
    if isinstance(value, str) and as_text:
        try:
            return int(value)
        except ValueError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ZnodeFormatError(f"{what}: {key!r} is not an integer: {value!r}")


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ZnodeFormatError(f"{what}: expected a list of broker ids, got {value!r}")
    return tuple(value)


# -- /brokers/ids/<id> ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration. ``broker_id`` is the znode's name, not part of the JSON.

    ``endpoints`` are all its advertised listeners, in order (one PLAINTEXT listener at
    ``host:port`` when not given), as the ``Listener`` of a broker's own configuration
    (Kafka's EndPoint serves both too; ``str()`` is its ``NAME://host:port``).  ``host``/``port`` are the address of its first
    PLAINTEXT-protocol endpoint, else of its first endpoint: what a caller that knows no
    listener name reaches it by.  ``BrokerInfo.of`` builds one from endpoints."""
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    timestamp_ms: int = 0
    endpoints: tuple[Listener, ...] = ()
    schema_registry: str | None = None     # kwire: its Schema Registry's URL (kwire.schemas), if it serves one

    def __post_init__(self) -> None:
        if not self.endpoints:
            object.__setattr__(self, "endpoints", (Listener("PLAINTEXT", self.host, self.port),))

    @classmethod
    def of(cls, broker_id: int, endpoints: Iterable[Listener], rack: str | None = None,
           timestamp_ms: int = 0, schema_registry: str | None = None) -> "BrokerInfo":
        """Raises ValueError without endpoints."""
        endpoints = tuple(endpoints)
        if not endpoints:
            raise ValueError("a broker registers at least one endpoint")
        first = _plaintext(endpoints) or endpoints[0]
        return cls(broker_id, first.host, first.port, rack, timestamp_ms, endpoints, schema_registry)

    def endpoint(self, listener: str) -> Listener | None:
        """The endpoint of ``listener`` (a listener name), None when the broker has none."""
        for ep in self.endpoints:
            if ep.name == listener:
                return ep
        return None


def _plaintext(endpoints: Iterable[Listener]) -> Listener | None:
    return next((ep for ep in endpoints if ep.protocol == "PLAINTEXT"), None)


def _parse_endpoint(endpoint: Any, protocols: dict[str, str] | None, what: str) -> Listener:
    """``LISTENER://host:port`` with its protocol from ``protocols`` (versions 4-5), or named by
    it (versions 2-3, whose listener names are protocol names), as Kafka's EndPoint reads it."""
    if not isinstance(endpoint, str) or "://" not in endpoint:
        raise ZnodeFormatError(f"{what}: bad endpoint {endpoint!r}")
    listener, rest = endpoint.split("://", 1)
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        raise ZnodeFormatError(f"{what}: bad endpoint {endpoint!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    protocol = protocols.get(listener) if protocols is not None else listener
    if protocol not in PROTOCOLS:
        raise ZnodeFormatError(f"{what}: no security protocol for listener {listener!r} "
                               f"(listener_security_protocol_map: {protocols})")
    return Listener(listener, host, int(port), protocol)


def encode_broker(info: BrokerInfo) -> bytes:
    """Kafka's version 5 broker registration: every endpoint and its protocol."""
    plaintext = _plaintext(info.endpoints)
    obj: dict[str, Any] = {
        "listener_security_protocol_map": {ep.name: ep.protocol for ep in info.endpoints},
        "endpoints": [str(ep) for ep in info.endpoints],
        "jmx_port": -1,
        "features": {},
        "host": plaintext.host if plaintext else None,
        "timestamp": str(info.timestamp_ms),
        "port": plaintext.port if plaintext else -1,
        "version": 5,
    }
    if info.rack is not None:
        obj["rack"] = info.rack
    if info.schema_registry is not None:      # an extra field: Kafka's readers ignore it
        obj["kwire_schema_registry"] = info.schema_registry
    return _dump(obj)


def decode_broker(data: bytes, broker_id: int = -1) -> BrokerInfo:
    """A broker registration of any version 1..5 (``broker_id`` comes from the znode name).

    Version 1 is one PLAINTEXT endpoint at its top-level host/port; later versions list
    their endpoints (protocols from listener_security_protocol_map, from version 4).
    Raises ZnodeFormatError."""
    what = f"broker {broker_id} registration"
    obj = _load(data, what)
    version = _int(obj, "version", what)
    if version < 1:
        raise ZnodeFormatError(f"{what}: unsupported version {version}")
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZnodeFormatError(f"{what}: rack is not a string: {rack!r}")
    timestamp = _int(obj, "timestamp", what, as_text=True) if "timestamp" in obj else 0
    if version == 1:
        host, port = obj.get("host"), _int(obj, "port", what)
        if not isinstance(host, str):
            raise ZnodeFormatError(f"{what}: host is not a string: {host!r}")
        return BrokerInfo(broker_id, host, port, rack, timestamp)
    endpoints = obj.get("endpoints")
    if not isinstance(endpoints, list) or not endpoints:
        raise ZnodeFormatError(f"{what}: endpoints is not a list of endpoints: {endpoints!r}")
    protocols = obj.get("listener_security_protocol_map")
    if protocols is not None and not (isinstance(protocols, dict)
                                      and all(isinstance(v, str) for v in protocols.values())):
        raise ZnodeFormatError(f"{what}: listener_security_protocol_map is not an object of names")
    registry = obj.get("kwire_schema_registry")
    return BrokerInfo.of(broker_id, [_parse_endpoint(e, protocols, what) for e in endpoints], rack, timestamp,
                         registry if isinstance(registry, str) else None)


# -- /brokers/topics/<t> -------------------------------------------------------------------------
def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``.  Raises ZnodeFormatError unless it is 16 bytes of base64."""
    if not isinstance(text, str) or len(text) > 24:
        raise ZnodeFormatError(f"topic id {text!r} is not a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ZnodeFormatError(f"topic id {text!r} is not base64") from exc
    if len(raw) != 16:
        raise ZnodeFormatError(f"topic id {text!r} is {len(raw)} bytes, not 16")
    return uuid.UUID(bytes=raw)


@dataclasses.dataclass(frozen=True)
class TopicAssignment:
    """The whole topic znode: replicas per partition (first = preferred leader), the topic id
    (None for topics written by Kafka before 2.8), and any reassignment in progress."""
    partitions: dict[int, tuple[int, ...]]
    topic_id: uuid.UUID | None = None
    adding_replicas: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    removing_replicas: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)


def _partition_map(assignment: dict[int, Iterable[int]]) -> dict[str, list[int]]:
    return {str(p): list(replicas) for p, replicas in sorted(assignment.items())}


def encode_assignment(assignment: dict[int, Iterable[int]], topic_id: uuid.UUID | None = None, *,
                      adding_replicas: dict[int, Iterable[int]] | None = None,
                      removing_replicas: dict[int, Iterable[int]] | None = None) -> bytes:
    """The topic znode: version 3 with a topic id (Kafka 2.8+), version 2 without one."""
    obj: dict[str, Any] = {
        "version": 3 if topic_id is not None else 2,
        "partitions": _partition_map(assignment),
        "adding_replicas": _partition_map(adding_replicas or {}),
        "removing_replicas": _partition_map(removing_replicas or {}),
    }
    if topic_id is not None:
        obj["topic_id"] = encode_topic_id(topic_id)
    return _dump(obj)


def _decode_partition_map(value: Any, what: str) -> dict[int, tuple[int, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ZnodeFormatError(f"{what}: expected an object of partitions, got {value!r}")
    try:
        return {int(p): _int_list(replicas, what) for p, replicas in value.items()}
    except ValueError as exc:       # int("x") as well as our own errors
        raise ZnodeFormatError(f"{what}: {exc}") from exc


def decode_topic(data: bytes) -> TopicAssignment:
    """The topic znode of any version (1: partitions only; 2: + adding/removing; 3: + topic_id).
    Empty data is a topic without partitions, as Kafka reads it.  Raises ZnodeFormatError."""
    if not data:
        return TopicAssignment({})
    obj = _load(data, "topic assignment")
    topic_id = obj.get("topic_id")
    return TopicAssignment(
        _decode_partition_map(obj.get("partitions"), "topic assignment"),
        decode_topic_id(topic_id) if topic_id is not None else None,
        _decode_partition_map(obj.get("adding_replicas"), "topic adding_replicas"),
        _decode_partition_map(obj.get("removing_replicas"), "topic removing_replicas"),
    )


def decode_assignment(data: bytes) -> tuple[dict[int, tuple[int, ...]], uuid.UUID | None]:
    """``(replicas per partition, topic id or None)`` of a topic znode.  Raises ZnodeFormatError."""
    topic = decode_topic(data)
    return topic.partitions, topic.topic_id


# -- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PartitionState:
    """The content of ``.../partitions/<p>/state`` plus its znode version."""
    leader: int                 # NO_LEADER (-1): offline
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = NEW_ZNODE    # znode version (stat.version); -1: the znode does not exist yet


def encode_partition_state(state: PartitionState) -> bytes:
    """Kafka's LeaderAndIsr JSON (version 1); ``state.version`` is not part of it."""
    return _dump({"controller_epoch": state.controller_epoch, "leader": state.leader, "version": 1,
                  "leader_epoch": state.leader_epoch, "isr": list(state.isr)})


def decode_partition_state(data: bytes, version: int = NEW_ZNODE) -> PartitionState:
    """A state znode's JSON with its znode ``version`` (stat.version).  A
    ``leader_recovery_state`` key (Kafka 3.2+) is accepted and ignored.  Raises ZnodeFormatError."""
    what = "partition state"
    obj = _load(data, what)
    return PartitionState(_int(obj, "leader", what), _int(obj, "leader_epoch", what),
                          _int_list(obj.get("isr"), what), _int(obj, "controller_epoch", what), version)


# -- /controller, /controller_epoch, /cluster/id ---------------------------------------------------
class ControllerInfo(NamedTuple):
    broker_id: int
    timestamp_ms: int


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """``/controller`` as a ZooKeeper-era controller writes it (version 1)."""
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller_info(data: bytes) -> ControllerInfo:
    """Broker id and timestamp of ``/controller`` (version 1, or 2 from a migrating Kafka 3.4+).
    Raises ZnodeFormatError."""
    obj = _load(data, "controller")
    timestamp = _int(obj, "timestamp", "controller", as_text=True) if "timestamp" in obj else 0
    return ControllerInfo(_int(obj, "brokerid", "controller"), timestamp)


def decode_controller(data: bytes) -> int:
    """The controller's broker id, as Kafka's ControllerZNode.decode.  Raises ZnodeFormatError."""
    return decode_controller_info(data).broker_id


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` holds the epoch as decimal text."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    """Raises ZnodeFormatError unless the data is a decimal integer."""
    try:
        return int(bytes(data).decode("ascii").strip())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZnodeFormatError(f"controller epoch: not an integer: {bytes(data)[:50]!r}") from exc


def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id``; Kafka writes this "version" as a string."""
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    """Raises ZnodeFormatError."""
    cluster_id = _load(data, "cluster id").get("id")
    if not isinstance(cluster_id, str):
        raise ZnodeFormatError(f"cluster id: 'id' is not a string: {cluster_id!r}")
    return cluster_id


# -- /config ---------------------------------------------------------------------------------
def encode_topic_config(config: dict[str, str]) -> bytes:
    """``/config/topics/<t>``: the overrides, every value a string (Java Properties)."""
    return _dump({"version": 1, "config": {k: str(v) for k, v in config.items()}})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    """The overrides of a config znode; empty data is no overrides.  Raises ZnodeFormatError."""
    if not data:
        return {}
    config = _load(data, "topic config").get("config") or {}
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise ZnodeFormatError(f"topic config: 'config' is not an object of strings: {config!r}")
    return dict(config)


def encode_config_change(entity_path: str) -> bytes:
    """A ``/config/changes/config_change_<seq>`` notification, e.g. entity_path "topics/t"."""
    return _dump({"version": 2, "entity_path": entity_path})


# -- partition-list notifications ------------------------------------------------------------
def _encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def _decode_partition_list(data: bytes, what: str) -> list[tuple[str, int]]:
    entries = _load(data, what).get("partitions")
    if not isinstance(entries, list):
        raise ZnodeFormatError(f"{what}: 'partitions' is not a list")
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ZnodeFormatError(f"{what}: bad partition entry {entry!r}")
        out.append((entry["topic"], _int(entry, "partition", what)))
    return out


def encode_preferred_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    """``/admin/preferred_replica_election``: the partitions to move back to preferred leaders."""
    return _encode_partition_list(partitions)


def decode_preferred_election(data: bytes) -> list[tuple[str, int]]:
    """Raises ZnodeFormatError."""
    return _decode_partition_list(data, "preferred replica election")


def encode_reassign_partitions(targets: dict[tuple[str, int], Iterable[int]]) -> bytes:
    """``/admin/reassign_partitions``, as kafka-reassign-partitions.sh (ZooKeeper era) writes it."""
    return _dump({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(list(r))}
        for (t, p), r in targets.items()]})


def decode_reassign_partitions(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    """The target replicas per partition.  Raises ZnodeFormatError."""
    what = "partition reassignment"
    entries = _load(data, what).get("partitions")
    if not isinstance(entries, list):
        raise ZnodeFormatError(f"{what}: 'partitions' is not a list")
    out = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ZnodeFormatError(f"{what}: bad partition entry {entry!r}")
        out[(entry["topic"], _int(entry, "partition", what))] = _int_list(entry.get("replicas"), what)
    return out


def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    """An ``/isr_change_notification/isr_change_<seq>`` notification."""
    return _encode_partition_list(partitions)


def decode_isr_change(data: bytes) -> list[tuple[str, int]]:
    """Raises ZnodeFormatError."""
    return _decode_partition_list(data, "isr change notification")


# -- /latest_producer_id_block ---------------------------------------------------------------
def encode_producer_id_block(block_start: int, block_size: int, broker_id: int = -1) -> bytes:
    """The last producer-id block handed out: ids block_start .. block_start+block_size-1."""
    return _dump({"version": 1, "broker": broker_id, "block_start": str(block_start),
                  "block_end": str(block_start + block_size - 1)})


def decode_producer_id_block_end(data: bytes) -> int:
    """The last producer id already handed out.  Raises ZnodeFormatError."""
    return _int(_load(data, "producer id block"), "block_end", "producer id block", as_text=True)
