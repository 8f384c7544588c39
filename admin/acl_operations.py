"""Which ACL each Kafka API checks, as data keyed by api_key.

Taken from Kafka's ``KafkaApis``/``AclApis``/``ConfigHelper`` (trunk, late 2024) and checked
against the documentation's "Operations and Resources on Protocols" table.  Where the two
differ the code wins, and the entry's note says so: Produce no longer checks IDEMPOTENT_WRITE
(KIP-679 moved it to InitProducerId), OffsetFetch needs DESCRIBE (not READ), ElectLeaders
needs ALTER (not CLUSTER_ACTION), ConsumerGroupDescribe needs DESCRIBE.

Each API maps to its checks in Kafka's order.  A check names an operation on a resource type,
the error a denial answers, how the denial is answered (``Denied``) and when the check applies
(``When``, plus an api version range).  Resource names come from the request: the cluster is
``kafka-cluster``; a group or transactional id check uses the request's id (or each one, in a
batched version); a topic check is made once per distinct topic.  A check with
``by_resource_type`` is ``Authorizer.authorize_by_resource_type`` (no name).

Two things are not checks: the ``*_authorized_operations`` fields (Metadata, DescribeCluster,
DescribeGroups, DescribeTopicPartitions) are ``Authorizer.authorized_operations``, and for the
cluster Kafka reports 0 unless DESCRIBE on the cluster is allowed.  An API missing from
``API_ACLS`` is one kwire has not mapped (delegation tokens): deny it.
"""
from __future__ import annotations

import enum
import itertools
from typing import NamedTuple

from kwire.codecs.errors import ErrorCode

from .acls import CLUSTER_NAME, AclOperation, Authorizer, ResourceType


class Denied(enum.Enum):
    REQUEST = "the whole request is answered with the error"
    ENTRY = "each denied entry (topic's partitions, group, resource) carries the error; the rest go on"
    HIDE = "denied entries are left out of the response, without an error"
    FALLBACK = "no error by itself: allowed skips the next check, denied leaves the decision to it"


class When(enum.Enum):
    ALWAYS = "always"
    TRANSACTIONAL = "the request is transactional (Produce: transactional batches; a null id is denied)"
    HAS_TRANSACTIONAL_ID = "InitProducerId with a transactional id"
    IDEMPOTENT = "InitProducerId without a transactional id"
    FOLLOWER = "a replica's fetch (replica_id >= 0)"
    CONSUMER = "a client's fetch (replica_id < 0)"
    LISTED = "topics named in the request"
    ALL_TOPICS = "the request asks for all topics (null list; Metadata v0: empty list)"
    AUTO_CREATE = "topics that do not exist and would be auto-created"
    BY_TOPIC_ID = "topics addressed by id (a denied one's name is withheld)"
    GROUP_KEY = "FindCoordinator key_type 0 (group)"
    TRANSACTION_KEY = "FindCoordinator key_type 1 (transaction)"
    BROKER_CONFIG = "config resources BROKER, BROKER_LOGGER, CLIENT_METRICS"
    TOPIC_CONFIG = "config resources TOPIC"
    GROUP_CONFIG = "config resources GROUP"


class AclCheck(NamedTuple):
    operation: AclOperation
    resource_type: ResourceType
    error: ErrorCode | None
    denied: Denied
    when: When = When.ALWAYS
    min_version: int = 0
    max_version: int | None = None
    by_resource_type: bool = False
    note: str = ""


AUTHORIZATION_ERRORS: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}

Op, R, E, D, W = AclOperation, ResourceType, ErrorCode, Denied, When
_TOPIC_E, _GROUP_E = E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED
_CLUSTER_E, _TXN_E = E.CLUSTER_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _cluster(operation: AclOperation, note: str = "") -> tuple[AclCheck, ...]:
    return (AclCheck(operation, R.CLUSTER, _CLUSTER_E, D.REQUEST, note=note),)


_INTER_BROKER = _cluster(Op.CLUSTER_ACTION, "inter-broker / controller API")
_GROUP_MEMBER = (AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST),)


def _configs(operation: AclOperation) -> tuple[AclCheck, ...]:
    return (AclCheck(operation, R.CLUSTER, _CLUSTER_E, D.ENTRY, W.BROKER_CONFIG),
            AclCheck(operation, R.TOPIC, _TOPIC_E, D.ENTRY, W.TOPIC_CONFIG),
            AclCheck(operation, R.GROUP, _GROUP_E, D.ENTRY, W.GROUP_CONFIG))


API_ACLS: dict[int, tuple[AclCheck, ...]] = {
    0: (  # Produce
        AclCheck(Op.WRITE, R.TRANSACTIONAL_ID, _TXN_E, D.REQUEST, W.TRANSACTIONAL),
        AclCheck(Op.WRITE, R.TOPIC, _TOPIC_E, D.ENTRY,
                 note="no IDEMPOTENT_WRITE check since KIP-679 (the docs' table still lists one)")),
    1: (  # Fetch
        AclCheck(Op.CLUSTER_ACTION, R.CLUSTER, _TOPIC_E, D.ENTRY, W.FOLLOWER,
                 note="denied: every partition gets TOPIC_AUTHORIZATION_FAILED"),
        AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY, W.CONSUMER)),
    2: (AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.ENTRY),),  # ListOffsets
    3: (  # Metadata
        AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.ENTRY, W.LISTED),
        AclCheck(Op.DESCRIBE, R.TOPIC, None, D.HIDE, W.ALL_TOPICS),
        AclCheck(Op.CREATE, R.CLUSTER, None, D.FALLBACK, W.AUTO_CREATE),
        AclCheck(Op.CREATE, R.TOPIC, _TOPIC_E, D.ENTRY, W.AUTO_CREATE,
                 note="only topics already allowed DESCRIBE reach this check")),
    4: _INTER_BROKER,  # LeaderAndIsr
    5: _INTER_BROKER,  # StopReplica
    6: _INTER_BROKER,  # UpdateMetadata
    7: _INTER_BROKER,  # ControlledShutdown
    8: (AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST),  # OffsetCommit
        AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY)),
    9: (  # OffsetFetch
        AclCheck(Op.DESCRIBE, R.GROUP, _GROUP_E, D.REQUEST,
                 note="from v8 (several groups) each denied group carries the error"),
        AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.ENTRY, W.LISTED, note="the docs' table says READ; code DESCRIBE"),
        AclCheck(Op.DESCRIBE, R.TOPIC, None, D.HIDE, W.ALL_TOPICS)),
    10: (  # FindCoordinator
        AclCheck(Op.DESCRIBE, R.GROUP, _GROUP_E, D.ENTRY, W.GROUP_KEY,
                 note="below v4 the one key is the whole request"),
        AclCheck(Op.DESCRIBE, R.TRANSACTIONAL_ID, _TXN_E, D.ENTRY, W.TRANSACTION_KEY)),
    11: _GROUP_MEMBER,  # JoinGroup
    12: _GROUP_MEMBER,  # Heartbeat
    13: _GROUP_MEMBER,  # LeaveGroup
    14: _GROUP_MEMBER,  # SyncGroup
    15: (AclCheck(Op.DESCRIBE, R.GROUP, _GROUP_E, D.ENTRY),),  # DescribeGroups
    16: (AclCheck(Op.DESCRIBE, R.CLUSTER, None, D.FALLBACK),  # ListGroups
         AclCheck(Op.DESCRIBE, R.GROUP, None, D.HIDE)),
    17: (),  # SaslHandshake: part of authentication
    18: (),  # ApiVersions: before authentication
    19: (  # CreateTopics
        AclCheck(Op.CREATE, R.CLUSTER, None, D.FALLBACK),
        AclCheck(Op.CREATE, R.TOPIC, _TOPIC_E, D.ENTRY),
        AclCheck(Op.DESCRIBE_CONFIGS, R.TOPIC, _TOPIC_E, D.ENTRY,
                 note="sets only topic_config_error_code (v5+); the topic is still created")),
    20: (  # DeleteTopics
        AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.ENTRY, W.BY_TOPIC_ID),
        AclCheck(Op.DELETE, R.TOPIC, _TOPIC_E, D.ENTRY)),
    21: (AclCheck(Op.DELETE, R.TOPIC, _TOPIC_E, D.ENTRY),),  # DeleteRecords
    22: (  # InitProducerId
        AclCheck(Op.WRITE, R.TRANSACTIONAL_ID, _TXN_E, D.REQUEST, W.HAS_TRANSACTIONAL_ID),
        AclCheck(Op.IDEMPOTENT_WRITE, R.CLUSTER, None, D.FALLBACK, W.IDEMPOTENT),
        AclCheck(Op.WRITE, R.TOPIC, _CLUSTER_E, D.REQUEST, W.IDEMPOTENT, by_resource_type=True,
                 note="KIP-679: WRITE on any topic suffices; denied answers CLUSTER_AUTHORIZATION_FAILED")),
    23: (  # OffsetForLeaderEpoch
        AclCheck(Op.CLUSTER_ACTION, R.CLUSTER, None, D.FALLBACK, note="any caller, not only followers"),
        AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.ENTRY)),
    24: (  # AddPartitionsToTxn
        AclCheck(Op.CLUSTER_ACTION, R.CLUSTER, _CLUSTER_E, D.REQUEST, min_version=4,
                 note="v4+ comes from brokers only"),
        AclCheck(Op.WRITE, R.TRANSACTIONAL_ID, _TXN_E, D.REQUEST, max_version=3),
        AclCheck(Op.WRITE, R.TOPIC, _TOPIC_E, D.ENTRY, max_version=3,
                 note="internal topics are never authorized here")),
    25: (AclCheck(Op.WRITE, R.TRANSACTIONAL_ID, _TXN_E, D.REQUEST),  # AddOffsetsToTxn
         AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST)),
    26: (AclCheck(Op.WRITE, R.TRANSACTIONAL_ID, _TXN_E, D.REQUEST),),  # EndTxn
    27: (AclCheck(Op.ALTER, R.CLUSTER, None, D.FALLBACK),  # WriteTxnMarkers
         AclCheck(Op.CLUSTER_ACTION, R.CLUSTER, _CLUSTER_E, D.REQUEST)),
    28: (AclCheck(Op.WRITE, R.TRANSACTIONAL_ID, _TXN_E, D.REQUEST),  # TxnOffsetCommit
         AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST),
         AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY)),
    29: _cluster(Op.DESCRIBE, "no authorizer: SECURITY_DISABLED"),  # DescribeAcls
    30: _cluster(Op.ALTER, "no authorizer: SECURITY_DISABLED"),  # CreateAcls
    31: _cluster(Op.ALTER, "no authorizer: SECURITY_DISABLED"),  # DeleteAcls
    32: _configs(Op.DESCRIBE_CONFIGS),  # DescribeConfigs
    33: _configs(Op.ALTER_CONFIGS),  # AlterConfigs (rejects BROKER_LOGGER and GROUP before any check)
    34: _cluster(Op.ALTER),  # AlterReplicaLogDirs
    35: _cluster(Op.DESCRIBE, "denied: an empty result list with the error"),  # DescribeLogDirs
    36: (),  # SaslAuthenticate: part of authentication
    37: (AclCheck(Op.ALTER, R.TOPIC, _TOPIC_E, D.ENTRY),),  # CreatePartitions
    42: (AclCheck(Op.DELETE, R.GROUP, _GROUP_E, D.ENTRY),),  # DeleteGroups
    43: _cluster(Op.ALTER, "the docs' table says CLUSTER_ACTION; code ALTER"),  # ElectLeaders
    44: _configs(Op.ALTER_CONFIGS),  # IncrementalAlterConfigs
    45: _cluster(Op.ALTER),  # AlterPartitionReassignments
    46: _cluster(Op.DESCRIBE),  # ListPartitionReassignments
    47: (AclCheck(Op.DELETE, R.GROUP, _GROUP_E, D.REQUEST),  # OffsetDelete
         AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY)),
    48: _cluster(Op.DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: _cluster(Op.ALTER_CONFIGS),  # AlterClientQuotas
    50: _cluster(Op.DESCRIBE),  # DescribeUserScramCredentials
    51: _cluster(Op.ALTER),  # AlterUserScramCredentials
    52: _INTER_BROKER,  # Vote
    53: _INTER_BROKER,  # BeginQuorumEpoch
    54: _INTER_BROKER,  # EndQuorumEpoch
    55: _cluster(Op.DESCRIBE),  # DescribeQuorum
    56: _INTER_BROKER,  # AlterPartition
    57: _cluster(Op.ALTER),  # UpdateFeatures
    58: _INTER_BROKER,  # Envelope
    59: _INTER_BROKER,  # FetchSnapshot
    60: (),  # DescribeCluster: only cluster_authorized_operations
    61: (AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY),),  # DescribeProducers
    62: _INTER_BROKER,  # BrokerRegistration
    63: _INTER_BROKER,  # BrokerHeartbeat
    64: _cluster(Op.ALTER),  # UnregisterBroker
    65: (AclCheck(Op.DESCRIBE, R.TRANSACTIONAL_ID, _TXN_E, D.ENTRY),  # DescribeTransactions
         AclCheck(Op.DESCRIBE, R.TOPIC, None, D.HIDE, note="the transaction's partitions")),
    66: (AclCheck(Op.DESCRIBE, R.TRANSACTIONAL_ID, None, D.HIDE),),  # ListTransactions
    67: _INTER_BROKER,  # AllocateProducerIds
    68: _GROUP_MEMBER,  # ConsumerGroupHeartbeat
    69: (AclCheck(Op.DESCRIBE, R.GROUP, _GROUP_E, D.ENTRY,  # ConsumerGroupDescribe
                  note="the docs' table says READ; code DESCRIBE"),),
    70: _INTER_BROKER,  # ControllerRegistration
    71: (),  # GetTelemetrySubscriptions: no check
    72: (),  # PushTelemetry: no check
    73: _INTER_BROKER,  # AssignReplicasToDirs
    74: _cluster(Op.DESCRIBE_CONFIGS),  # ListClientMetricsResources
    75: (AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.ENTRY, W.LISTED),  # DescribeTopicPartitions
         AclCheck(Op.DESCRIBE, R.TOPIC, None, D.HIDE, W.ALL_TOPICS)),
    # share groups (KIP-932)
    76: (AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST),  # ShareGroupHeartbeat
         AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.REQUEST, note="the subscribed topics")),
    77: (AclCheck(Op.DESCRIBE, R.GROUP, _GROUP_E, D.ENTRY),),  # ShareGroupDescribe
    78: (AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST),  # ShareFetch
         AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY)),
    79: (AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST),  # ShareAcknowledge
         AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY)),
    # the share-group state persister, broker to broker (cluster mode)
    83: _INTER_BROKER,  # InitializeShareGroupState
    84: _INTER_BROKER,  # ReadShareGroupState
    85: _INTER_BROKER,  # WriteShareGroupState
    86: _INTER_BROKER,  # DeleteShareGroupState
    87: _INTER_BROKER,  # ReadShareGroupStateSummary
    90: (AclCheck(Op.DESCRIBE, R.GROUP, _GROUP_E, D.ENTRY),  # DescribeShareGroupOffsets
         AclCheck(Op.DESCRIBE, R.TOPIC, _TOPIC_E, D.ENTRY)),
    91: (AclCheck(Op.READ, R.GROUP, _GROUP_E, D.REQUEST),  # AlterShareGroupOffsets
         AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY)),
    92: (AclCheck(Op.DELETE, R.GROUP, _GROUP_E, D.REQUEST),  # DeleteShareGroupOffsets
         AclCheck(Op.READ, R.TOPIC, _TOPIC_E, D.ENTRY)),
}


def checks(api_key: int, version: int) -> tuple[AclCheck, ...]:
    """The checks of an API at a version, in Kafka's order; raises KeyError for an unmapped api_key."""
    return tuple(c for c in API_ACLS[api_key]
                 if c.min_version <= version and (c.max_version is None or version <= c.max_version))


def cluster_gate(authorizer: Authorizer, api_key: int, version: int, principal: str,
                 host: str) -> ErrorCode | None:
    """The error that fails the whole request on its cluster checks alone, or None.

    Walks the API's leading unconditional checks on the cluster: a FALLBACK allowed passes, a
    REQUEST denied answers its error; the first other check stops the walk (the handler makes
    it).  A dispatcher can run this before every handler.  Raises KeyError for an unmapped
    api_key.
    """
    gated = list(itertools.takewhile(_gated, checks(api_key, version)))
    skip_next = False
    for i, check in enumerate(gated):
        if skip_next:
            skip_next = False
            continue
        if check.denied is D.FALLBACK and i + 1 == len(gated):
            return None           # it only lets a check the handler makes pass: the handler asks
        allowed = authorizer.authorize(principal, host, check.operation, R.CLUSTER, CLUSTER_NAME)
        if check.denied is D.FALLBACK:
            skip_next = allowed
        elif check.denied is D.REQUEST and not allowed:
            return check.error
    return None


def _gated(check: AclCheck) -> bool:
    """An unconditional check on the cluster itself, which cluster_gate can make."""
    return check.resource_type is R.CLUSTER and check.when is W.ALWAYS and not check.by_resource_type
