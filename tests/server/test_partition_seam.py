"""One seam between a single node and a cluster (STYLE.md, "Where a thing lives"): handlers
never ask whether there is a cluster; the broker is built with one implementation of each
interface (partitions, topology, topic administration, ACL and SCRAM stores, share-partition
state, group configs) for its mode."""
from __future__ import annotations

import inspect
import pathlib
import re
from types import SimpleNamespace

import pytest
import trio

from kwire.admin.broker_config import broker_config_from_properties
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.cluster.group_configs import ZkGroupConfigStore
from kwire.cluster.partitions import ReplicatedPartitions
from kwire.cluster.replication import ReplicaManager
from kwire.cluster.throttles import ReplicationThrottles
from kwire.log.config import LogConfig
from kwire.log.partition import PartitionLog
from kwire.cluster.share_states import PersistedShareStates
from kwire.cluster.topic_admin import ZkTopicAdmin
from kwire.cluster.topology import ClusterTopology
from kwire.security.acl_store import AclService
from kwire.security.scram_store import ScramService
from kwire.server.broker import Broker
from kwire.services.group_configs import FileGroupConfigStore, GroupConfigStore
from kwire.services.partitions import LocalPartitions, PartitionService
from kwire.services.share_state import LocalShareStates, ShareStates
from kwire.services.topic_admin import LocalTopicAdmin, TopicAdmin
from kwire.services.topology import LocalTopology, Topology
from tests.log.logkit import build_batch

ROOT = pathlib.Path(__file__).resolve().parents[2]
HANDLERS = ROOT / "kwire" / "handlers"
CLUSTER_QUESTION = re.compile(r"cluster is (not )?None")

# The branches on "is there a cluster" still in kwire/handlers, each with why it stays.
ALLOWED: dict[str, int] = {}

PAIRS = [
    (PartitionService, LocalPartitions, ReplicatedPartitions),
    (Topology, LocalTopology, ClusterTopology),
    (TopicAdmin, LocalTopicAdmin, ZkTopicAdmin),
    (ShareStates, LocalShareStates, PersistedShareStates),
    (GroupConfigStore, FileGroupConfigStore, ZkGroupConfigStore),
]


def test_handlers_do_not_ask_whether_there_is_a_cluster():
    found = {}
    for path in sorted(HANDLERS.glob("*.py")):
        count = len(CLUSTER_QUESTION.findall(path.read_text()))
        if count:
            found[path.name] = count
    assert found == ALLOWED


def test_handlers_do_not_reach_into_the_cluster_node():
    offenders = [path.name for path in sorted(HANDLERS.glob("*.py"))
                 if re.search(r"broker\.cluster\b", path.read_text())]
    assert offenders == []


def test_the_coordinators_do_not_ask_either():
    # their replicated appends, read fences and internal topics go through the same seam
    for name in ("groups.py", "transactions.py"):
        assert not CLUSTER_QUESTION.search((ROOT / "kwire" / "services" / name).read_text()), name


def test_the_share_service_does_not_ask_or_reach_into_the_cluster_node():
    # where share-partition state lives and where group configs are kept are ShareStates and
    # GroupConfigStore; leadership is broker.partitions
    for name in ("shares.py", "share_state.py", "group_configs.py"):
        text = (ROOT / "kwire" / "services" / name).read_text()
        assert not CLUSTER_QUESTION.search(text), name
        assert not re.search(r"(?<!kwire)\.cluster\b|\.replicas\b|\.zk\b", text), name


def _members(protocol) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")} | set(
        getattr(protocol, "__annotations__", {}))


@pytest.mark.parametrize("protocol, local, clustered", PAIRS, ids=lambda p: getattr(p, "__name__", p))
def test_both_implementations_have_every_member_with_the_same_signature(protocol, local, clustered):
    for name in _members(protocol):
        for implementation in (local, clustered):
            if name in getattr(protocol, "__annotations__", {}):
                assert name in vars(implementation) or name in inspect.signature(implementation).parameters \
                    or name in _assigned_in_init(implementation), (implementation.__name__, name)
                continue
            ours = getattr(implementation, name, None)
            assert ours is not None, (implementation.__name__, name)
            assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(getattr(protocol, name)), \
                (implementation.__name__, name)
            assert list(inspect.signature(ours).parameters) == \
                list(inspect.signature(getattr(protocol, name)).parameters), (implementation.__name__, name)


def _assigned_in_init(cls) -> set[str]:
    return set(re.findall(r"self\.(\w+) =", inspect.getsource(cls.__init__)))


def test_a_single_node_broker_is_built_with_the_local_implementations(tmp_path):
    broker = Broker(broker_config_from_properties({"log.dirs": str(tmp_path)}))
    assert broker.cluster is None
    assert type(broker.partitions) is LocalPartitions and isinstance(broker.partitions, PartitionService)
    assert type(broker.topology) is LocalTopology and isinstance(broker.topology, Topology)
    assert type(broker.topic_admin) is LocalTopicAdmin and isinstance(broker.topic_admin, TopicAdmin)
    assert type(broker.acls) is AclService and type(broker.scram) is ScramService
    assert type(broker.shares.states) is LocalShareStates and isinstance(broker.shares.states, ShareStates)
    assert type(broker.shares.group_configs.store) is FileGroupConfigStore
    assert broker.partitions.appended == broker.notify_appended     # committed at once


def test_a_cluster_broker_is_built_with_the_replicated_implementations(tmp_path):
    pytest.importorskip("kazoo")
    from kwire.cluster.acl_store import ZkAclService
    from kwire.cluster.scram_store import ZkScramService
    broker = Broker(broker_config_from_properties({"log.dirs": str(tmp_path),
                                                  "zookeeper.connect": "127.0.0.1:1"}))
    try:
        assert broker.cluster is not None
        assert type(broker.partitions) is ReplicatedPartitions and isinstance(broker.partitions, PartitionService)
        assert type(broker.topology) is ClusterTopology and isinstance(broker.topology, Topology)
        assert type(broker.topic_admin) is ZkTopicAdmin and isinstance(broker.topic_admin, TopicAdmin)
        assert type(broker.acls) is ZkAclService and type(broker.scram) is ZkScramService
        assert type(broker.shares.states) is PersistedShareStates and isinstance(broker.shares.states, ShareStates)
        assert type(broker.shares.group_configs.store) is ZkGroupConfigStore
        assert broker.partitions.appended == broker.notify_log_end      # followers first
    finally:
        broker.close()


# -- the two partition services' behaviour on the produce path --------------------------------
# A real PartitionLog in a temporary directory and, for the cluster, a real leader-side
# ReplicaManager (the set-up of tests/server/test_replication_rules.py): ZooKeeper's ISR writes
# are a callback that applies them.
TP = ("t", 0)


class _Config:
    def value_of(self, key):
        return {"replica.lag.time.max.ms": 3000}[key]


class _Clock:
    def now_ms(self) -> int:
        return 1_000_000


async def _write_isr(tp, isr, leader_epoch, expected_version):
    return expected_version + 1


def a_log(tmp_path, min_isr: int = 1) -> PartitionLog:
    return PartitionLog.open(str(tmp_path / "t-0"), LogConfig(min_insync_replicas=min_isr), now_ms=0, recover=False)


def replicated(tmp_path, *, leads: bool, isr=(1, 2, 3), min_isr: int = 1):
    """The cluster's partition service over broker 1, which leads t-0 (ISR ``isr``) or follows it."""
    plog = a_log(tmp_path, min_isr)
    replicas = ReplicaManager(1, _Config(), _Clock(), lambda tps: None, lambda tps: None, _write_isr)
    if leads:
        replicas.become_leader(TP, plog, 1, (1, 2, 3), isr, 0)
    broker = SimpleNamespace(notify_log_end=lambda partitions: None)
    return plog, ReplicatedPartitions(broker, SimpleNamespace(replicas=replicas, throttles=ReplicationThrottles(1)))


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_a_local_append_is_committed_at_once(tmp_path, acks):
    plog, waits = a_log(tmp_path), []
    local = LocalPartitions(SimpleNamespace(logs=None, notify_appended=lambda partitions: None))
    local.append("t", 0, plog, build_batch([b"v"] * 3), 0, 9, acks, waits)
    assert (plog.log_end_offset, waits) == (3, [])
    local.check_serving("t", 0, plog, plog.leader_epoch)
    with pytest.raises(KafkaApiError) as unknown:
        local.check_serving("t", 0, plog, plog.leader_epoch + 1)
    assert unknown.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_replicated_append_waits_for_the_isr_only_with_acks_all(tmp_path):
    plog, service = replicated(tmp_path, leads=True)
    waits = []
    service.append("t", 0, plog, build_batch([b"one"]), 0, 9, 1, waits)
    assert waits == [] and plog.high_watermark == 0          # followers have not fetched it
    service.append("t", 0, plog, build_batch([b"two"]), 0, 9, -1, waits)
    assert [(tp, required) for tp, _leader, required in waits] == [(TP, 2)]

    async def followers_fetch_then_wait():
        leader = waits[0][1]
        for follower in (2, 3):
            service.follower_fetched("t", 0, leader, follower, 2, 0)
        return await service.wait_acks(waits[0], trio.current_time() + 5)
    assert trio.run(followers_fetch_then_wait) == ErrorCode.NONE
    assert plog.high_watermark == 2


@pytest.mark.parametrize("leads, isr, min_isr, acks, code", [
    (False, (1, 2, 3), 1, 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (True, (1,), 2, -1, ErrorCode.NOT_ENOUGH_REPLICAS),
])
def test_a_refused_replicated_append_changes_nothing(tmp_path, leads, isr, min_isr, acks, code):
    plog, service = replicated(tmp_path, leads=leads, isr=isr, min_isr=min_isr)
    waits = []
    with pytest.raises(KafkaApiError) as refused:
        service.append("t", 0, plog, build_batch([b"v"]), 0, 9, acks, waits)
    assert refused.value.code == code
    assert plog.log_end_offset == 0 and waits == []


def test_too_few_in_sync_replicas_does_not_refuse_acks_1(tmp_path):
    plog, service = replicated(tmp_path, leads=True, isr=(1,), min_isr=2)
    waits = []
    service.append("t", 0, plog, build_batch([b"v"]), 0, 9, 1, waits)
    assert plog.log_end_offset == 1 and waits == []


def test_a_share_partition_leader_sees_leadership_move_while_it_loads(tmp_path):
    plog, service = replicated(tmp_path, leads=True)
    leader = service.check_writer("t", 0, plog)
    assert service.still_leads("t", 0, leader)
    assert not service.still_leads("t", 0, SimpleNamespace())      # another leader state: moved
    local = LocalPartitions(SimpleNamespace(logs=None, notify_appended=lambda partitions: None))
    assert local.check_writer("t", 0, plog) is None and local.still_leads("t", 0, None)
