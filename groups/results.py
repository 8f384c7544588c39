"""Plain values the coordinator takes and returns; the server maps them to wire fields."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kwire.codecs.errors import ErrorCode


@dataclass
class GroupConfig:
    """Kafka's broker settings for classic groups (names without the ``group.`` prefix)."""
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    max_size: int = 2**31 - 1
    # Kafka's hard-coded NewMemberJoinTimeoutMs: a new member's parked JoinGroup
    # expires after this long (it cannot heartbeat before it has a member id).
    new_member_join_timeout_ms: int = 300000
    # offsets.retention.check.interval.ms: Kafka removes an Empty group without
    # offsets at its next cleanup run; here exactly this long after it became Empty.
    offsets_retention_check_interval_ms: int = 600000
    # offset.metadata.max.bytes
    offset_metadata_max_bytes: int = 4096
    # group.consumer.*: KIP-848 consumer groups
    consumer: "ConsumerGroupConfig" = field(default_factory=lambda: ConsumerGroupConfig())


class Record(NamedTuple):
    """A record for ``__consumer_offsets``: append to ``partition_for(group_id, n)``; value None = tombstone.

    ``producer`` (producer id, epoch) marks an offset commit of a transaction (TxnOffsetCommit):
    it goes into a transactional batch of that producer, and counts only once the
    transaction's COMMIT marker follows it in the partition."""
    group_id: str
    key: bytes
    value: bytes | None
    producer: tuple[int, int] | None = None


@dataclass(frozen=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, kw_only=True)
class JoinRequest:
    """A JoinGroup request as the coordinator needs it.

    ``rebalance_timeout_ms`` is the session timeout for v0 (which has none);
    ``client_host`` is the peer address Kafka reports in DescribeGroups.
    Missing strings become "" and protocol metadata becomes bytes.
    """
    group_id: str
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str = ""
    protocols: tuple[tuple[str, bytes], ...] = ()
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    api_version: int
    reason: str | None = None

    def __post_init__(self):
        normal = {"member_id": self.member_id or "", "protocol_type": self.protocol_type or "",
                  "client_id": self.client_id or "", "client_host": self.client_host or "",
                  "protocols": tuple((str(name), bytes(metadata or b"")) for name, metadata in self.protocols or ())}
        for name, value in normal.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True, kw_only=True)
class SyncRequest:
    """A SyncGroup request; ``assignments`` (member_id, assignment) come from the leader only."""
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "assignments",
                           tuple((str(m), bytes(a or b"")) for m, a in self.assignments or ()))


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata of the chosen protocol); the leader's only.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class LeaveResult:
    error: ErrorCode                 # top level: INVALID_GROUP_ID, else NONE
    member_errors: list[ErrorCode]   # one per requested member, in order (empty on a top-level error)


@dataclass(frozen=True)
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    # (member_id, group_instance_id, client_id, client_host, metadata, assignment)
    members: list[tuple[str, str | None, str, str, bytes, bytes]]


@dataclass(frozen=True)
class Outcome:
    """What one coordinator call decided; every public call that changes state returns one.

    ``records`` go to ``__consumer_offsets`` before any response is sent
    (Kafka's write-then-respond order); ``completed`` answers parked requests,
    (ticket, JoinResult | SyncResult); ``result`` is the call's own answer;
    ``next_deadline_ms`` is when ``tick`` next has work (None: no timer).
    """
    records: list[Record] = field(default_factory=list)
    completed: list[tuple[int, Any]] = field(default_factory=list)
    result: Any = None
    next_deadline_ms: int | None = None


@dataclass
class ConsumerGroupConfig:
    """Kafka's broker settings for KIP-848 consumer groups (``group.consumer.*``)."""
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")     # the first is the default
    migration_policy: str = "bidirectional"


@dataclass(frozen=True, kw_only=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat request; ``owned`` is (topic id, partitions) pairs, None when not sent."""
    group_id: str
    member_id: str = ""
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[Any, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ConsumerHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: dict | None = None     # topic id -> partitions, None: not sent


@dataclass(frozen=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: dict
    target_assignment: dict
    classic: bool = False        # a classic member of a mixed group


@dataclass(frozen=True)
class ConsumerGroupDescription:
    error: ErrorCode
    message: str | None
    group_id: str
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ConsumerMemberDescription, ...] = ()
