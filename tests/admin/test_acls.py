"""Kafka's ACL authorizer: matching rules, filters, validation, persistence formats, the API table."""
from __future__ import annotations

import importlib
import json

import pytest
from hypothesis import given, settings, strategies as st

from kwire.admin import acl_formats as f
from kwire.admin.acl_operations import API_ACLS, AUTHORIZATION_ERRORS, Denied, When, checks, cluster_gate
from kwire.admin.acls import (
    ANY_FILTER, CLUSTER_NAME, OK, SUPPORTED_OPERATIONS, AccessControlEntry, AclBinding, AclBindingFilter,
    AclChange, AclOperation as Op, AclPermissionType as Perm, AclStore, Authorizer, AuthorizerConfig,
    ConfigError, PatternType as PT, ResourcePattern, ResourceType as RT, check_creation, check_filter,
    group_by_pattern, host_address,
)
from kwire.codecs.errors import ErrorCode

LIT, PRE, ALLOW, DENY = PT.LITERAL, PT.PREFIXED, Perm.ALLOW, Perm.DENY
H1, H2 = "10.0.0.1", "10.0.0.2"


def acl(name, principal="User:alice", op=Op.READ, perm=ALLOW, *, rt=RT.TOPIC, pt=LIT, host="*"):
    return AclBinding(rt, name, pt, principal, host, op, perm)


def authorizer(*bindings, super_users=(), allow_everyone=False):
    config = AuthorizerConfig("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                              frozenset(super_users), allow_everyone)
    return Authorizer(config, AclStore(bindings))


# -- enums -----------------------------------------------------------------------------------------
def test_enum_numbers_are_kafkas_and_kafka_pythons():
    from kafka.protocol.admin import acl as kp
    assert {m.name: int(m) for m in RT} == {"UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4,
                                            "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6, "USER": 7}
    for ours, theirs in ((RT, kp.ACLResourceType), (PT, kp.ACLResourcePatternType), (Op, kp.ACLOperation),
                         (Perm, kp.ACLPermissionType)):
        assert {m.name: m.value for m in theirs}.items() <= {m.name: int(m) for m in ours}.items()
    assert len(Op) == 15 and Op.DESCRIBE_TOKENS == 14 and len(PT) == 5 and len(Perm) == 4


def test_enum_codes_and_names_parse_like_kafka():
    assert RT.from_code(99) is RT.UNKNOWN and Op.from_code(12) is Op.IDEMPOTENT_WRITE
    assert Op.from_name("ClusterAction") is Op.CLUSTER_ACTION is Op.from_name("CLUSTER_ACTION")
    assert Op.from_name("clusteraction") is Op.CLUSTER_ACTION and Op.from_name("Fly") is Op.UNKNOWN
    assert RT.TRANSACTIONAL_ID.pascal_name == "TransactionalId" and Perm.ALLOW.pascal_name == "Allow"
    assert Op.DESCRIBE_CONFIGS.pascal_name == "DescribeConfigs"


# -- the decision, rule by rule --------------------------------------------------------------------
RULES = [
    # (ACLs, (principal, host, operation, resource type, name), allowed)
    pytest.param([acl("orders")], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), True, id="literal"),
    pytest.param([acl("orders")], ("User:alice", H1, Op.READ, RT.TOPIC, "orders2"), False,
                 id="literal-is-exact"),
    pytest.param([acl("orders")], ("User:alice", H1, Op.READ, RT.GROUP, "orders"), False,
                 id="literal-is-per-resource-type"),
    pytest.param([acl("orders")], ("User:bob", H1, Op.READ, RT.TOPIC, "orders"), False, id="other-principal"),
    pytest.param([acl("*")], ("User:alice", H1, Op.READ, RT.TOPIC, "anything"), True, id="wildcard-resource"),
    pytest.param([acl("*", rt=RT.GROUP)], ("User:alice", H1, Op.READ, RT.TOPIC, "t"), False,
                 id="wildcard-resource-per-type"),
    pytest.param([acl("ord", pt=PRE)], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), True, id="prefixed"),
    pytest.param([acl("ord", pt=PRE)], ("User:alice", H1, Op.READ, RT.TOPIC, "ord"), True,
                 id="prefixed-equal-name"),
    pytest.param([acl("ord", pt=PRE)], ("User:alice", H1, Op.READ, RT.TOPIC, "or"), False,
                 id="prefixed-longer-than-name"),
    pytest.param([acl("ord", pt=LIT)], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), False,
                 id="literal-is-not-a-prefix"),
    pytest.param([acl("*", pt=PRE)], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), False,
                 id="prefixed-star-is-not-wildcard"),
    pytest.param([acl("orders", "User:*")], ("User:bob", H1, Op.READ, RT.TOPIC, "orders"), True,
                 id="wildcard-principal"),
    pytest.param([acl("orders", "User:*")], ("Group:devs", H1, Op.READ, RT.TOPIC, "orders"), True,
                 id="wildcard-principal-matches-every-type"),
    pytest.param([acl("orders", "Group:*")], ("Group:devs", H1, Op.READ, RT.TOPIC, "orders"), False,
                 id="no-other-wildcard-principal"),
    pytest.param([acl("orders", host=H1)], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), True,
                 id="exact-host"),
    pytest.param([acl("orders", host=H1)], ("User:alice", H2, Op.READ, RT.TOPIC, "orders"), False,
                 id="other-host"),
    pytest.param([acl("orders"), acl("orders", perm=DENY, host=H2)], ("User:alice", H1, Op.READ, RT.TOPIC,
                                                                      "orders"), True, id="deny-other-host"),
    pytest.param([acl("orders"), acl("orders", perm=DENY)], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"),
                 False, id="deny-beats-allow"),
    pytest.param([acl("orders", op=Op.ALL), acl("ord", perm=DENY, pt=PRE)],
                 ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), False, id="prefixed-deny-beats-literal-allow"),
    pytest.param([acl("orders"), acl("*", "User:*", perm=DENY)], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"),
                 False, id="wildcard-deny-beats-specific-allow"),
    pytest.param([acl("orders"), acl("orders", op=Op.WRITE, perm=DENY)],
                 ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), True, id="deny-other-op"),
    pytest.param([acl("orders", op=Op.ALL)], ("User:alice", H1, Op.DELETE, RT.TOPIC, "orders"), True,
                 id="allow-all"),
    pytest.param([acl("orders", op=Op.ALL), acl("orders", op=Op.ALL, perm=DENY)],
                 ("User:alice", H1, Op.DESCRIBE, RT.TOPIC, "orders"), False, id="deny-all"),
    *(pytest.param([acl("orders", op=op)], ("User:alice", H1, Op.DESCRIBE, RT.TOPIC, "orders"), True,
                   id=f"{op.name.lower()}-implies-describe") for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)),
    *(pytest.param([acl("orders", op=op)], ("User:alice", H1, Op.DESCRIBE, RT.TOPIC, "orders"), False,
                   id=f"{op.name.lower()}-does-not-imply-describe")
      for op in (Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION)),
    pytest.param([acl("orders", op=Op.ALTER_CONFIGS)], ("User:alice", H1, Op.DESCRIBE_CONFIGS, RT.TOPIC, "orders"),
                 True, id="alter-configs-implies-describe-configs"),
    pytest.param([acl("orders", op=Op.ALTER)], ("User:alice", H1, Op.DESCRIBE_CONFIGS, RT.TOPIC, "orders"),
                 False, id="alter-does-not-imply-describe-configs"),
    pytest.param([acl("orders", op=Op.DESCRIBE)], ("User:alice", H1, Op.READ, RT.TOPIC, "orders"), False,
                 id="describe-implies-nothing"),
    pytest.param([acl("orders", op=Op.DESCRIBE), acl("orders", perm=DENY)],
                 ("User:alice", H1, Op.DESCRIBE, RT.TOPIC, "orders"), True, id="deny-read-does-not-deny-describe"),
    pytest.param([acl("orders", op=Op.READ), acl("orders", op=Op.DESCRIBE, perm=DENY)],
                 ("User:alice", H1, Op.DESCRIBE, RT.TOPIC, "orders"), False, id="deny-describe-beats-implied"),
    pytest.param([acl(CLUSTER_NAME, op=Op.IDEMPOTENT_WRITE, rt=RT.CLUSTER)],
                 ("User:alice", H1, Op.IDEMPOTENT_WRITE, RT.CLUSTER, CLUSTER_NAME), True, id="cluster"),
]


@pytest.mark.parametrize("acls, action, allowed", RULES)
def test_matching_rules(acls, action, allowed):
    assert authorizer(*acls).authorize(*action) is allowed


@pytest.mark.parametrize("acls, allow_everyone, allowed", [
    ([], False, False),
    ([], True, True),
    ([acl("other")], True, True),                                  # ACLs elsewhere do not count
    ([acl("orders", "User:bob")], True, False),                    # an ACL for someone else counts
    ([acl("orders", op=Op.WRITE)], True, False),                   # so does one for another operation
    ([acl("ord", "User:bob", pt=PRE)], True, False),               # a prefixed one applies too
    ([acl("*", "User:bob", host=H2)], True, False),                # and a wildcard one
])
def test_allow_everyone_if_no_acl_found(acls, allow_everyone, allowed):
    auth = authorizer(*acls, allow_everyone=allow_everyone)
    assert auth.authorize("User:alice", H1, Op.READ, RT.TOPIC, "orders") is allowed


def test_super_users_pass_deny_acls_and_disabled_allows_everything():
    auth = authorizer(acl("*", "User:*", Op.ALL, DENY), super_users={"User:admin"})
    assert auth.authorize("User:admin", H1, Op.DELETE, RT.TOPIC, "orders")
    assert not auth.authorize("User:alice", H1, Op.DELETE, RT.TOPIC, "orders")
    off = Authorizer(AuthorizerConfig(), AclStore([acl("*", "User:*", Op.ALL, DENY)]))
    assert not off.enabled and off.authorize("User:alice", H1, Op.DELETE, RT.TOPIC, "orders")
    with pytest.raises(ValueError):
        auth.authorize("User:alice", H1, Op.ANY, RT.TOPIC, "orders")
    with pytest.raises(ValueError):
        auth.authorize("User:alice", H1, Op.READ, RT.ANY, "orders")


def test_filter_authorized_decides_each_name_once():
    auth = authorizer(acl("a"), acl("b", perm=DENY), acl("b"))
    assert auth.filter_authorized("User:alice", H1, Op.READ, RT.TOPIC, ["a", "b", "a", "c"]) == {"a"}


@pytest.mark.parametrize("acls, allowed", [
    ([], False),
    ([acl("t", op=Op.WRITE)], True),
    ([acl("t", op=Op.ALL)], True),
    ([acl("t", op=Op.READ)], False),                                        # no implied operations
    ([acl("t", "User:bob", op=Op.WRITE)], False),
    ([acl("t", op=Op.WRITE, host=H2)], False),
    ([acl("t", op=Op.WRITE), acl("t", op=Op.WRITE, perm=DENY)], False),     # literal deny dominates
    ([acl("t", op=Op.WRITE), acl("t", op=Op.WRITE, perm=DENY, pt=PRE)], False),
    ([acl("tt", op=Op.WRITE, pt=PRE), acl("t", op=Op.WRITE, perm=DENY, pt=PRE)], False),
    ([acl("t", op=Op.WRITE, pt=PRE), acl("t", op=Op.WRITE, perm=DENY)], True),  # only "t" itself denied
    ([acl("t", op=Op.WRITE), acl("u", op=Op.WRITE, perm=DENY)], True),
    ([acl("*", op=Op.WRITE)], True),
    ([acl("*", op=Op.WRITE), acl("*", "User:*", op=Op.WRITE, perm=DENY)], False),
    ([acl("t", op=Op.WRITE), acl("*", op=Op.ALL, perm=DENY)], False),
])
def test_authorize_by_resource_type(acls, allowed):
    assert authorizer(*acls).authorize_by_resource_type("User:alice", H1, Op.WRITE, RT.TOPIC) is allowed


def test_authorize_by_resource_type_passes_super_users_and_the_no_acl_default():
    assert authorizer(super_users={"User:alice"}).authorize_by_resource_type("User:alice", H1, Op.WRITE, RT.TOPIC)
    # Kafka asks about the made-up topic "hardcode" first: with no ACL on it, the default decides
    auth = authorizer(acl("t", "User:bob", op=Op.WRITE), allow_everyone=True)
    assert auth.authorize_by_resource_type("User:alice", H1, Op.WRITE, RT.TOPIC)


def test_authorized_operations_bit_field():
    auth = authorizer(acl("t", op=Op.READ), acl("t", op=Op.ALTER_CONFIGS))
    bits = auth.authorized_operations("User:alice", H1, RT.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    off = Authorizer(AuthorizerConfig())
    assert off.authorized_operations("User:x", H1, RT.TRANSACTIONAL_ID, "x") == (1 << 8) | (1 << 4)
    assert set(SUPPORTED_OPERATIONS[RT.CLUSTER]) >= {Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE}
    with pytest.raises(ValueError):
        auth.authorized_operations("User:alice", H1, RT.ANY, "t")


# -- filters: DescribeAcls and DeleteAcls ------------------------------------------------------------
STORE_ACLS = [
    acl("orders"), acl("orders", "User:bob", Op.WRITE, host=H1), acl("orders", pt=PRE, perm=DENY),
    acl("ord", pt=PRE), acl("o", pt=PRE), acl("*"), acl("orders", rt=RT.GROUP), acl("x", pt=PRE),
    acl(CLUSTER_NAME, op=Op.ALTER, rt=RT.CLUSTER),
]


@pytest.mark.parametrize("acl_filter, expected", [
    (ANY_FILTER, STORE_ACLS),
    (AclBindingFilter(RT.TOPIC, "orders", PT.ANY), [STORE_ACLS[0], STORE_ACLS[1], STORE_ACLS[2]]),
    (AclBindingFilter(RT.TOPIC, "orders", LIT), [STORE_ACLS[0], STORE_ACLS[1]]),
    (AclBindingFilter(RT.TOPIC, "orders", PRE), [STORE_ACLS[2]]),
    (AclBindingFilter(RT.TOPIC, "orders", PT.MATCH), STORE_ACLS[:6]),
    (AclBindingFilter(RT.TOPIC, "ordinal", PT.MATCH), [STORE_ACLS[3], STORE_ACLS[4], STORE_ACLS[5]]),
    (AclBindingFilter(RT.TOPIC, "*", PT.MATCH), [STORE_ACLS[5]]),
    (AclBindingFilter(RT.TOPIC, "*", LIT), [STORE_ACLS[5]]),
    (AclBindingFilter(RT.TOPIC, None, PT.MATCH), STORE_ACLS[:6] + [STORE_ACLS[7]]),
    (AclBindingFilter(RT.ANY, "orders", PT.MATCH), STORE_ACLS[:7]),
    (AclBindingFilter(RT.ANY, None, PRE), [STORE_ACLS[i] for i in (2, 3, 4, 7)]),
    (AclBindingFilter(principal="User:bob"), [STORE_ACLS[1]]),
    (AclBindingFilter(principal="User:*"), []),
    (AclBindingFilter(host=H1), [STORE_ACLS[1]]),
    (AclBindingFilter(operation=Op.WRITE), [STORE_ACLS[1]]),
    (AclBindingFilter(permission_type=DENY), [STORE_ACLS[2]]),
    (AclBindingFilter(RT.CLUSTER, CLUSTER_NAME, PT.MATCH, operation=Op.ALTER), [STORE_ACLS[8]]),
    (AclBindingFilter(RT.UNKNOWN), []),
])
def test_describe_filters(acl_filter, expected):
    store = AclStore(STORE_ACLS)
    assert store.describe(acl_filter) == sorted(expected)
    assert sorted(b for b in STORE_ACLS if acl_filter.matches(b)) == sorted(expected)


def test_describe_response_groups_by_pattern():
    grouped = group_by_pattern(AclStore(STORE_ACLS).describe(AclBindingFilter(RT.TOPIC, "orders", LIT)))
    assert grouped == [(ResourcePattern(RT.TOPIC, "orders", LIT), [
        AccessControlEntry("User:alice", "*", Op.READ, ALLOW), AccessControlEntry("User:bob", H1, Op.WRITE, ALLOW)])]


def test_delete_reports_per_filter_and_deletes_once():
    store = AclStore(STORE_ACLS)
    filters = [AclBindingFilter(RT.TOPIC, "orders", LIT), AclBindingFilter(principal="User:bob"),
               AclBindingFilter(RT.TOPIC, "nothing", LIT), AclBindingFilter(RT.TOPIC, "orders", PT.UNKNOWN)]
    results, change = store.prepare_delete(filters)
    assert len(store) == len(STORE_ACLS)                       # prepare changes nothing
    assert [r.bindings for r in results] == [
        tuple(sorted(STORE_ACLS[:2])), (STORE_ACLS[1],), (), ()]
    assert [r.error.code for r in results] == [ErrorCode.NONE] * 3 + [ErrorCode.INVALID_REQUEST]
    assert sorted(change.removed) == sorted(STORE_ACLS[:2]) and not change.added
    store.apply(change)
    assert sorted(store) == sorted(STORE_ACLS[2:])
    assert store.entries(ResourcePattern(RT.TOPIC, "orders", LIT)) == ()
    assert ResourcePattern(RT.TOPIC, "orders", LIT) not in store.patterns()


def test_delete_everything_then_prefix_index_is_empty():
    store = AclStore(STORE_ACLS)
    store.apply(store.prepare_delete([ANY_FILTER])[1])
    assert len(store) == 0 and store.patterns() == [] and store.applicable(RT.TOPIC, "orders") == []


def test_create_is_idempotent_and_validated():
    store = AclStore([acl("orders")])
    new = acl("payments", op=Op.WRITE)
    results, change = store.prepare_create([acl("orders"), new, new, acl("", op=Op.READ)])
    assert results[:3] == [OK, OK, OK] and results[3].code == ErrorCode.INVALID_REQUEST
    assert change.added == (new,) and change.patterns() == {new.pattern}
    assert new not in store
    store.apply(change)
    assert new in store and len(store) == 2
    assert AclChange().is_empty and not change.is_empty


def test_set_entries_replaces_one_pattern():
    store = AclStore(STORE_ACLS)
    auth = Authorizer(authorizer().config, store)
    pattern = ResourcePattern(RT.TOPIC, "ord", PRE)
    entry = AccessControlEntry("User:alice", "*", Op.READ, DENY)
    store.set_entries(pattern, [entry])
    assert store.entries(pattern) == (entry,)
    assert not auth.authorize("User:alice", H1, Op.READ, RT.TOPIC, "ordX")
    store.set_entries(pattern, [])
    assert pattern not in store.patterns()
    assert auth.authorize("User:alice", H1, Op.READ, RT.TOPIC, "ordX")     # "*" and the prefix "o" allow


# -- validation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("binding, zookeeper, message", [
    (acl("t", rt=RT.ANY), False, "Invalid resourceType ANY"),
    (acl("t", rt=RT.UNKNOWN), False, "Invalid resourceType UNKNOWN"),
    (acl("t", pt=PT.MATCH), False, "Invalid patternType MATCH"),
    (acl("t", pt=PT.ANY), False, "Invalid patternType ANY"),
    (acl("t", pt=PT.UNKNOWN), False, "Invalid patternType UNKNOWN"),
    (acl("t", op=Op.ANY), False, "Invalid operation ANY"),
    (acl("t", op=Op.UNKNOWN), False, "Invalid operation UNKNOWN"),
    (acl("t", perm=Perm.ANY), False, "Invalid permissionType ANY"),
    (acl("t", perm=Perm.UNKNOWN), False, "Invalid permissionType UNKNOWN"),
    (acl("my-cluster", rt=RT.CLUSTER, op=Op.ALTER), False, "The only valid name for the CLUSTER resource"),
    (acl(""), False, "Invalid empty resource name"),
    (acl("t", "alice"), False, "Could not parse principal from `alice`"),
    (acl("a/b"), True, "invalid resource name: a/b"),
    (acl(".."), True, "invalid resource name: .."),
])
def test_creation_validation(binding, zookeeper, message):
    error = check_creation(binding, zookeeper=zookeeper)
    assert error.code == ErrorCode.INVALID_REQUEST and message in error.message


@pytest.mark.parametrize("binding", [acl("a/b"), acl("t", "User:"), acl("t", op=Op.ALL, perm=DENY),
                                     acl(CLUSTER_NAME, rt=RT.CLUSTER, pt=PRE, op=Op.ALTER),
                                     acl("u", rt=RT.USER, op=Op.CREATE_TOKENS)])
def test_creation_accepted(binding):
    assert check_creation(binding) is OK


def test_wire_codes_become_unknown_and_are_rejected():
    binding = AclBinding.from_wire(2, "t", 9, "User:a", "*", 3, 3)
    assert binding.pattern_type is PT.UNKNOWN and check_creation(binding).code == ErrorCode.INVALID_REQUEST
    acl_filter = AclBindingFilter.from_wire(1, None, 1, None, None, 77, 1)
    assert acl_filter.operation is Op.UNKNOWN and check_filter(acl_filter).code == ErrorCode.INVALID_REQUEST
    assert check_filter(AclBindingFilter.from_wire(1, None, 2, None, None, 1, 1)) is OK


# -- configuration ---------------------------------------------------------------------------------
def test_config_defaults_and_parsing():
    assert AuthorizerConfig.from_values({}) == AuthorizerConfig() and not AuthorizerConfig().enabled
    config = AuthorizerConfig.from_values({
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": " User:admin ;User:CN=broker,O=kwire;; ", "allow.everyone.if.no.acl.found": "TRUE "})
    assert config.enabled and config.allow_everyone_if_no_acl_found
    assert config.super_users == {"User:admin", "User:CN=broker,O=kwire"}
    assert AuthorizerConfig.from_values({"allow.everyone.if.no.acl.found": False}).allow_everyone_if_no_acl_found \
        is False


@pytest.mark.parametrize("values", [
    {"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer"},
    {"super.users": "User:a;admin"},
    {"allow.everyone.if.no.acl.found": "yes"},
])
def test_config_errors(values):
    with pytest.raises(ConfigError):
        AuthorizerConfig.from_values(values)


@pytest.mark.parametrize("peer, host", [
    ("10.1.2.3", "10.1.2.3"), ("::1", "0:0:0:0:0:0:0:1"), ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
    ("::ffff:10.1.2.3", "10.1.2.3"), ("2001:db8::ab:0", "2001:db8:0:0:0:0:ab:0"), ("not-an-ip", "not-an-ip"),
])
def test_host_address_is_javas(peer, host):
    assert host_address(peer) == host


# -- persistence -----------------------------------------------------------------------------------
def test_file_round_trip():
    data = f.encode_file(STORE_ACLS)
    assert sorted(f.decode_file(data)) == sorted(STORE_ACLS)
    assert f.encode_file(reversed(STORE_ACLS)) == data
    assert json.loads(data)["acls"][0] == {
        "resourceType": "TOPIC", "resourceName": "*", "patternType": "LITERAL", "principal": "User:alice",
        "host": "*", "operation": "READ", "permissionType": "ALLOW"}
    assert f.decode_file(f.encode_file([])) == []


@pytest.mark.parametrize("data", [b"", b"{", b"\xff", b"[]", b'{"version":2,"acls":[]}',
                                  b'{"version":1,"acls":[{"resourceType":"TOPIC"}]}',
                                  b'{"version":1,"acls":[1]}'])
def test_file_errors(data):
    with pytest.raises(f.AclFormatError):
        f.decode_file(data)


def test_zk_layout_is_kafkas():
    store = AclStore([acl("orders", "User:alice", Op.READ), acl("ord", "User:bob", Op.CLUSTER_ACTION, DENY, pt=PRE,
                                                                host=H1),
                      acl("g", op=Op.DESCRIBE_CONFIGS, rt=RT.GROUP), acl("tx", op=Op.WRITE, rt=RT.TRANSACTIONAL_ID),
                      acl(CLUSTER_NAME, op=Op.IDEMPOTENT_WRITE, rt=RT.CLUSTER)])
    znodes = f.to_znodes(store)
    assert set(znodes) == {"/kafka-acl/Topic/orders", "/kafka-acl-extended/prefixed/Topic/ord",
                           "/kafka-acl/Group/g", "/kafka-acl/TransactionalId/tx", "/kafka-acl/Cluster/kafka-cluster"}
    assert znodes["/kafka-acl/Topic/orders"] == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}')
    assert json.loads(znodes["/kafka-acl-extended/prefixed/Topic/ord"]) == {"version": 1, "acls": [
        {"principal": "User:bob", "permissionType": "Deny", "operation": "ClusterAction", "host": H1}]}
    assert json.loads(znodes["/kafka-acl/Cluster/kafka-cluster"])["acls"][0]["operation"] == "IdempotentWrite"
    assert sorted(f.from_znodes(znodes)) == sorted(store)


def test_zk_decodes_json_as_kafka_writes_it():
    # the example in Kafka's ZkData, spacing and key order as there
    kafka = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow","operation": "Read",'
             b'"principal": "User:alice"}]}')
    store = f.from_znodes({"/kafka-acl/Topic/topic-1": kafka, "/kafka-acl/Group/empty": b""})
    assert list(store) == [acl("topic-1", host="host1")]
    assert f.decode_znode(b'{"version":1,"acls":[{"principal":"User:a","permissionType":"ALLOW",'
                          b'"operation":"DESCRIBECONFIGS","host":"*"}]}')[0].operation is Op.DESCRIBE_CONFIGS


@pytest.mark.parametrize("path, data", [
    ("/kafka-acl/Topic/t", b'{"version":2,"acls":[]}'),
    ("/kafka-acl/Topic/t", b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow",'
                           b'"operation":"Read","host":"*"}]}'),
    ("/kafka-acl/Topic/t", b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",'
                           b'"operation":"Fly","host":"*"}]}'),
    ("/kafka-acl/Planet/t", b""),
    ("/kafka-acl/Topic", b""),
    ("/kafka-acl-extended/literal/Topic/t", b""),
    ("/brokers/topics/t", b""),
])
def test_zk_errors(path, data):
    with pytest.raises(f.AclFormatError):
        f.from_znodes({path: data})


def test_zk_paths_and_writes_for_a_change():
    assert f.parse_znode_path("/kafka-acl-extended/prefixed/DelegationToken/x") == ResourcePattern(
        RT.DELEGATION_TOKEN, "x", PRE)
    assert "/kafka-acl/User" in f.ACL_ZK_PATHS and "/kafka-acl-extended/prefixed/Topic" in f.ACL_ZK_PATHS
    assert {"/kafka-acl-changes", "/kafka-acl-extended-changes"} <= set(f.ACL_ZK_PATHS)
    store = AclStore([acl("orders"), acl("gone", op=Op.WRITE)])
    _, created = store.prepare_create([acl("orders", "User:bob")])
    _, deleted = store.prepare_delete([AclBindingFilter(RT.TOPIC, "gone", LIT)])
    change = AclChange(created.added, deleted.removed)
    writes = f.zk_writes(store, change)
    assert writes["/kafka-acl/Topic/gone"] is None
    assert [e.principal for e in f.decode_znode(writes["/kafka-acl/Topic/orders"])] == ["User:alice", "User:bob"]
    store.apply(change)
    assert {p: d for p, d in writes.items() if d} == f.to_znodes(store)


def test_change_notifications_are_kafkas():
    literal = ResourcePattern(RT.TOPIC, "orders", LIT)
    prefixed = ResourcePattern(RT.GROUP, "app-", PRE)
    assert f.change_notification(literal) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders")
    path, data = f.change_notification(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}
    assert f.decode_change_notification("/kafka-acl-changes/acl_changes_0000000007", b"TOPIC:a:b") == \
        ResourcePattern(RT.TOPIC, "a:b", LIT)
    assert f.decode_change_notification(path + "0000000001", data) == prefixed
    for bad_path, bad in (("/kafka-acl-changes/x", b"TOPIC"), ("/kafka-acl-extended-changes/x", b'{"version":2}'),
                          ("/elsewhere/x", b"TOPIC:a")):
        with pytest.raises(f.AclFormatError):
            f.decode_change_notification(bad_path, bad)


# -- the indexed matcher agrees with a brute-force reading of Kafka's rules ---------------------------
NAMES = ["a", "ab", "abc", "b", "ba", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:g"]
IMPLIED = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}
CONCRETE_OPS = [op for op in Op if op > Op.ANY]

bindings_st = st.builds(
    AclBinding, st.sampled_from([RT.TOPIC, RT.GROUP]), st.sampled_from(NAMES), st.sampled_from([LIT, PRE]),
    st.sampled_from(PRINCIPALS), st.sampled_from(["*", H1, H2]), st.sampled_from(CONCRETE_OPS),
    st.sampled_from([ALLOW, DENY]))
actions_st = st.tuples(st.sampled_from(["User:alice", "User:bob", "Group:g"]), st.sampled_from([H1, H2]),
                       st.sampled_from(CONCRETE_OPS), st.sampled_from([RT.TOPIC, RT.GROUP]),
                       st.sampled_from(NAMES + ["abcd", "c", ""]))


def brute_force(bindings, allow_everyone, principal, host, operation, resource_type, name):
    applicable = [b for b in bindings if b.resource_type == resource_type and (
        (b.pattern_type == LIT and b.resource_name in (name, "*"))
        or (b.pattern_type == PRE and name.startswith(b.resource_name)))]
    if not applicable:
        return allow_everyone

    def matches(b, permission):
        return (b.permission_type == permission and b.principal in (principal, "User:*") and b.host in (host, "*")
                and (b.operation in (operation, Op.ALL)
                     or (permission == ALLOW and b.operation in IMPLIED.get(operation, ()))))
    return not any(matches(b, DENY) for b in applicable) and any(matches(b, ALLOW) for b in applicable)


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings_st, max_size=25), st.lists(bindings_st, max_size=5), st.booleans(),
       st.lists(actions_st, min_size=1, max_size=10))
def test_indexed_matcher_agrees_with_brute_force(bindings, deleted, allow_everyone, actions):
    auth = authorizer(*bindings, allow_everyone=allow_everyone)
    # deletions exercise the index upkeep (prefix lengths come and go)
    auth.store.apply(auth.store.prepare_delete([AclBindingFilter(*b) for b in deleted])[1])
    remaining = [b for b in bindings if b not in deleted]
    assert sorted(auth.store) == sorted(set(remaining))
    for action in actions:
        assert auth.authorize(*action) == brute_force(remaining, allow_everyone, *action), action


filters_st = st.builds(
    AclBindingFilter, st.sampled_from([RT.ANY, RT.TOPIC, RT.GROUP]), st.sampled_from([None, *NAMES, "abcd"]),
    st.sampled_from([PT.ANY, PT.MATCH, LIT, PRE]), st.sampled_from([None, *PRINCIPALS]),
    st.sampled_from([None, "*", H1]), st.sampled_from([Op.ANY, Op.READ, Op.ALL]),
    st.sampled_from([Perm.ANY, ALLOW, DENY]))


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings_st, max_size=25), filters_st)
def test_indexed_describe_agrees_with_the_filter(bindings, acl_filter):
    assert AclStore(bindings).describe(acl_filter) == sorted({b for b in bindings if acl_filter.matches(b)})


# -- the per-API table -----------------------------------------------------------------------------
def test_every_api_kwire_serves_is_mapped():
    importlib.import_module("kwire.handlers")   # registers the handlers
    from kwire.handlers.registry import HANDLERS
    assert set(HANDLERS) <= set(API_ACLS)


def test_table_errors_are_authorization_errors():
    for api_key, api_checks in API_ACLS.items():
        for check in api_checks:
            assert check.error in (None, *AUTHORIZATION_ERRORS.values()), (api_key, check)
            assert (check.error is None) == (check.denied in (Denied.HIDE, Denied.FALLBACK)), (api_key, check)
            assert check.operation in SUPPORTED_OPERATIONS[check.resource_type], (api_key, check)


@pytest.mark.parametrize("api_key, version, expected", [
    (0, 9, [(Op.WRITE, RT.TRANSACTIONAL_ID, When.TRANSACTIONAL), (Op.WRITE, RT.TOPIC, When.ALWAYS)]),
    (1, 12, [(Op.CLUSTER_ACTION, RT.CLUSTER, When.FOLLOWER), (Op.READ, RT.TOPIC, When.CONSUMER)]),
    (9, 8, [(Op.DESCRIBE, RT.GROUP, When.ALWAYS), (Op.DESCRIBE, RT.TOPIC, When.LISTED),
            (Op.DESCRIBE, RT.TOPIC, When.ALL_TOPICS)]),
    (22, 4, [(Op.WRITE, RT.TRANSACTIONAL_ID, When.HAS_TRANSACTIONAL_ID),
             (Op.IDEMPOTENT_WRITE, RT.CLUSTER, When.IDEMPOTENT), (Op.WRITE, RT.TOPIC, When.IDEMPOTENT)]),
    (24, 3, [(Op.WRITE, RT.TRANSACTIONAL_ID, When.ALWAYS), (Op.WRITE, RT.TOPIC, When.ALWAYS)]),
    (24, 4, [(Op.CLUSTER_ACTION, RT.CLUSTER, When.ALWAYS)]),
    (43, 2, [(Op.ALTER, RT.CLUSTER, When.ALWAYS)]),
    (32, 4, [(Op.DESCRIBE_CONFIGS, RT.CLUSTER, When.BROKER_CONFIG), (Op.DESCRIBE_CONFIGS, RT.TOPIC, When.TOPIC_CONFIG),
             (Op.DESCRIBE_CONFIGS, RT.GROUP, When.GROUP_CONFIG)]),
    (18, 4, []),
])
def test_checks_per_api(api_key, version, expected):
    assert [(c.operation, c.resource_type, c.when) for c in checks(api_key, version)] == expected


@pytest.mark.parametrize("acls, api_key, version, error", [
    ([], 30, 3, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),                    # CreateAcls: ALTER cluster
    ([acl(CLUSTER_NAME, op=Op.ALTER, rt=RT.CLUSTER)], 30, 3, None),
    ([acl(CLUSTER_NAME, op=Op.ALTER, rt=RT.CLUSTER)], 29, 3, None),          # ALTER implies DESCRIBE
    ([acl(CLUSTER_NAME, op=Op.ALTER, rt=RT.CLUSTER)], 27, 1, None),          # WriteTxnMarkers: ALTER suffices
    ([acl(CLUSTER_NAME, op=Op.CLUSTER_ACTION, rt=RT.CLUSTER)], 27, 1, None),
    ([], 27, 1, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ([], 24, 4, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ([], 24, 3, None),                                                      # client versions: per-id checks
    ([], 16, 4, None),                                                      # ListGroups never fails whole
    ([], 19, 7, None),                                                      # CreateTopics: per topic
    ([], 0, 9, None),
])
def test_cluster_gate(acls, api_key, version, error):
    assert cluster_gate(authorizer(*acls), api_key, version, "User:alice", H1) == error


@pytest.mark.parametrize("api_key, version, asked", [
    (19, 7, []),                        # CreateTopics: the handler asks CREATE on the cluster itself
    (23, 4, []),                        # OffsetForLeaderEpoch: the handler asks CLUSTER_ACTION
    (27, 1, [Op.ALTER, Op.CLUSTER_ACTION]),     # WriteTxnMarkers: the fallback decides the gate
    (30, 3, [Op.ALTER]),
])
def test_cluster_gate_asks_only_what_decides_the_gate(api_key, version, asked):
    """A cluster check that only lets the handler's own check pass is left to the handler, which
    makes it: asked in the gate as well, it was evaluated twice per request."""
    class Counting(Authorizer):
        def authorize(self, principal, host, operation, resource_type, name):
            calls.append(operation)
            return super().authorize(principal, host, operation, resource_type, name)
    calls = []
    base = authorizer()
    cluster_gate(Counting(base.config, base.store), api_key, version, "User:alice", H1)
    assert calls == asked
