"""``AclZnodes.update`` against a real ZooKeeper (Debian's, started here): the change is prepared by the
sans-I/O store (``prepare_create``/``prepare_delete``) on the ACLs ZooKeeper holds, and the
bytes written are ``acl_formats.zk_writes``'; ``from_znodes`` with ``on_error`` is the
start-up load that keeps going past an unreadable znode."""
from __future__ import annotations

import uuid

import pytest
from kazoo.client import KazooClient

from kwire.admin import acl_formats as fmt
from kwire.admin.acls import (
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType,
)
from kwire.cluster.acl_store import AclZnodes
from kwire.testing.zookeeper import ZooKeeperProcess
from tests.cluster.conftest import require_zookeeper

TOPIC = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
PATH = "/kafka-acl/Topic/orders"
ALLOW = AclPermissionType.ALLOW


def entry(principal: str, op: AclOperation = AclOperation.READ) -> AccessControlEntry:
    return AccessControlEntry(principal, "*", op, ALLOW)


@pytest.fixture(scope="module")
def zookeeper():
    require_zookeeper()
    with ZooKeeperProcess() as zk:
        yield zk


@pytest.fixture
def client(zookeeper):
    """A kazoo session on a fresh chroot, with the ACL paths made and ``PATH`` absent."""
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=15)
    chroot = f"/t{uuid.uuid4().hex[:8]}"
    root.ensure_path(chroot)
    root.stop()
    c = KazooClient(hosts=zookeeper.connect + chroot, timeout=10)
    c.start(timeout=15)
    AclZnodes(c).ensure_paths()
    c.ensure_path("/kafka-acl-changes")
    yield c
    c.stop()
    c.close()


def holding(client, znodes: dict[str, bytes]):
    for path, data in znodes.items():
        client.create(path, data, makepath=True)
    return client


def data_of(client, path: str) -> bytes | None:
    return client.get(path)[0] if client.exists(path) else None


def notifications(client) -> list[bytes]:
    return [client.get(f"/kafka-acl-changes/{n}")[0] for n in sorted(client.get_children("/kafka-acl-changes"))]


# Kafka's writer never repeats an entry; a hand-written znode may, in any order
KAFKA_WRITTEN = (b'{"version":1,"acls":[{"principal":"User:carol","permissionType":"Allow","operation":"Read",'
                 b'"host":"*"},{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
                 b'{"principal":"User:carol","permissionType":"Allow","operation":"Read","host":"*"}]}')


def test_a_creation_adds_to_what_zookeeper_holds(client):
    holding(client, {PATH: KAFKA_WRITTEN})
    new = (AclBinding.of(TOPIC, entry("User:bob")), AclBinding.of(TOPIC, entry("User:alice")))
    before, after = AclZnodes(client).update(TOPIC, lambda store: store.prepare_create(new, zookeeper=True)[1], 5)
    assert before == [entry("User:carol"), entry("User:alice"), entry("User:carol")]
    assert after == [entry("User:carol"), entry("User:alice"), entry("User:bob")]
    assert data_of(client, PATH) == fmt.encode_znode(after)
    assert client.get(PATH)[1].version == 1
    assert notifications(client) == [b"TOPIC:orders"]


def test_a_creation_of_what_exists_writes_nothing(client):
    holding(client, {PATH: KAFKA_WRITTEN})
    new = (AclBinding.of(TOPIC, entry("User:alice")),)
    before, after = AclZnodes(client).update(TOPIC, lambda store: store.prepare_create(new, zookeeper=True)[1], 5)
    assert after is before
    assert (data_of(client, PATH), client.get(PATH)[1].version, notifications(client)) == (KAFKA_WRITTEN, 0, [])


def test_a_new_pattern_is_created_and_an_emptied_one_deleted(client):
    new = (AclBinding.of(TOPIC, entry("User:bob")),)
    assert AclZnodes(client).update(TOPIC, lambda s: s.prepare_create(new)[1], 5) == ([], [entry("User:bob")])
    assert data_of(client, PATH) == fmt.encode_znode([entry("User:bob")])

    client.set(PATH, KAFKA_WRITTEN)
    everything = [AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL)]
    before, after = AclZnodes(client).update(TOPIC, lambda s: s.prepare_delete(everything)[1], 5)
    assert (len(before), after) == (3, [])
    assert data_of(client, PATH) is None and len(notifications(client)) == 2


def test_a_deletion_removes_only_the_matching_entries(client):
    holding(client, {PATH: KAFKA_WRITTEN})
    carol = [AclBindingFilter(ResourceType.ANY, None, PatternType.MATCH, principal="User:carol")]
    before, after = AclZnodes(client).update(TOPIC, lambda s: s.prepare_delete(carol)[1], 5)
    assert after == [entry("User:alice")]
    assert data_of(client, PATH) == fmt.encode_znode([entry("User:alice")])


def test_from_znodes_on_error_decides_for_an_unreadable_znode():
    good, bad = "/kafka-acl/Group/g", PATH
    kept = [entry("User:old")]
    seen = []

    def keep(path, pattern, exc):
        seen.append((path, pattern, type(exc)))
        return kept
    store = fmt.from_znodes({good: fmt.encode_znode([entry("User:a")]), bad: b"{"}, on_error=keep)
    assert seen == [(bad, TOPIC, fmt.AclFormatError)]
    assert sorted(store) == sorted([AclBinding.of(ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL),
                                                  entry("User:a")), AclBinding.of(TOPIC, kept[0])])
    with pytest.raises(fmt.AclFormatError):          # a path naming no pattern is never passed on
        fmt.from_znodes({"/kafka-acl/Planet/x": b""}, on_error=keep)

    def refuse(path, pattern, exc):
        raise ValueError(path)
    with pytest.raises(ValueError, match=bad):
        fmt.from_znodes({bad: b"[]"}, on_error=refuse)
