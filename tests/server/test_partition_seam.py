"""One seam between a single node and a cluster (STYLE.md, "Where a thing lives"): handlers
never ask whether there is a cluster; the broker is built with one implementation of each
interface (partitions, topology, topic administration, ACL and SCRAM stores) for its mode."""
from __future__ import annotations

import inspect
import pathlib
import re
from types import SimpleNamespace

import pytest
import trio

from kwire.admin.broker_config import broker_config_from_properties
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.cluster.partitions import ReplicatedPartitions
from kwire.cluster.topic_admin import ZkTopicAdmin
from kwire.cluster.topology import ClusterTopology
from kwire.security.acl_store import AclService
from kwire.security.scram_store import ScramService
from kwire.server.broker import Broker
from kwire.services.partitions import LocalPartitions, PartitionService
from kwire.services.topic_admin import LocalTopicAdmin, TopicAdmin
from kwire.services.topology import LocalTopology, Topology

ROOT = pathlib.Path(__file__).resolve().parents[2]
HANDLERS = ROOT / "kwire" / "handlers"
CLUSTER_QUESTION = re.compile(r"cluster is (not )?None")

# The branches on "is there a cluster" still in kwire/handlers, each with why it stays.
ALLOWED = {
    # where a share-partition's state lives: the share coordinator's memory on a single node,
    # the share coordinators' persister in a cluster; a question for ShareService (another
    # seam), not for the partitions or the topology
    "share_admin.py": 1,
}

PAIRS = [
    (PartitionService, LocalPartitions, ReplicatedPartitions),
    (Topology, LocalTopology, ClusterTopology),
    (TopicAdmin, LocalTopicAdmin, ZkTopicAdmin),
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
    assert offenders == ["share_admin.py"]          # the allowed branch above


def test_the_coordinators_do_not_ask_either():
    # their replicated appends, read fences and internal topics go through the same seam
    for name in ("groups.py", "transactions.py"):
        assert not CLUSTER_QUESTION.search((ROOT / "kwire" / "services" / name).read_text()), name


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
        assert broker.partitions.appended == broker.notify_log_end      # followers first
    finally:
        broker.close()


# -- the two partition services' behaviour on the produce path --------------------------------
class FakeLog:
    """Stands in for a PartitionLog: records what was appended."""

    def __init__(self):
        self.appended = []
        self.leader_epoch = 3

    def append(self, records, now_ms, produce_version):
        self.appended.append(records)
        return SimpleNamespace(last_offset=len(self.appended) - 1)


class FakeReplicas:
    """Stands in for kwire.cluster.replication.ReplicaManager."""

    def __init__(self, leads: bool, isr_ok: bool = True):
        self.leads, self.isr_ok, self.after = leads, isr_ok, []

    def check_leader(self, tp, plog, current_leader_epoch):
        if not self.leads:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return "leader-state"

    def check_min_isr(self, tp, leader):
        if not self.isr_ok:
            raise KafkaApiError(ErrorCode.NOT_ENOUGH_REPLICAS)

    def after_append(self, tp):
        self.after.append(tp)

    async def wait_replicated(self, tp, leader, required, deadline):
        return ErrorCode.NONE if leader == "leader-state" else ErrorCode.NOT_LEADER_OR_FOLLOWER


def replicated(replicas: FakeReplicas) -> ReplicatedPartitions:
    broker = SimpleNamespace(notify_log_end=lambda partitions: None)
    return ReplicatedPartitions(broker, SimpleNamespace(replicas=replicas))


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_a_local_append_is_committed_at_once(acks):
    plog, waits = FakeLog(), []
    local = LocalPartitions(SimpleNamespace(logs=None, notify_appended=lambda partitions: None))
    local.append("t", 0, plog, b"batch", 0, 9, acks, waits)
    assert plog.appended == [b"batch"] and waits == []
    local.check_serving("t", 0, plog, 3)
    with pytest.raises(KafkaApiError) as fenced:
        local.check_serving("t", 0, plog, 2)
    assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH


def test_a_replicated_append_waits_for_the_isr_only_with_acks_all():
    plog, waits, replicas = FakeLog(), [], FakeReplicas(leads=True)
    service = replicated(replicas)
    service.append("t", 0, plog, b"one", 0, 9, 1, waits)
    service.append("t", 0, plog, b"two", 0, 9, -1, waits)
    assert waits == [(("t", 0), "leader-state", 2)] and replicas.after == [("t", 0), ("t", 0)]
    assert trio.run(service.wait_acks, waits[0], 0.0) == ErrorCode.NONE


@pytest.mark.parametrize("replicas, acks, code", [
    (FakeReplicas(leads=False), 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (FakeReplicas(leads=True, isr_ok=False), -1, ErrorCode.NOT_ENOUGH_REPLICAS),
])
def test_a_refused_replicated_append_changes_nothing(replicas, acks, code):
    plog, waits = FakeLog(), []
    with pytest.raises(KafkaApiError) as refused:
        replicated(replicas).append("t", 0, plog, b"batch", 0, 9, acks, waits)
    assert refused.value.code == code
    assert plog.appended == [] and waits == [] and replicas.after == []


def test_too_few_in_sync_replicas_does_not_refuse_acks_1():
    plog, waits = FakeLog(), []
    replicated(FakeReplicas(leads=True, isr_ok=False)).append("t", 0, plog, b"batch", 0, 9, 1, waits)
    assert plog.appended == [b"batch"] and waits == []
