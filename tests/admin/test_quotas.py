"""kwire.admin.quotas: Kafka's quota precedence, validation, describe filters, rates and the
token bucket, with time passed in."""
from __future__ import annotations

import pytest

from kwire.admin import quotas as q
from kwire.admin.quotas import QuotaConfigs, QuotaEnforcer, QuotaError, SampledRate, TokenBucket, entity
from kwire.codecs.errors import ErrorCode

P = q.PRODUCER_BYTE_RATE

# Kafka's 8 levels, most specific first, with the metric tags each gives alice/app
LEVELS = [
    (entity(user="alice", client_id="app"), ("alice", "app")),
    (entity(user="alice", client_id=None), ("alice", "app")),
    (entity(user="alice"), ("alice", "")),
    (entity(user=None, client_id="app"), ("alice", "app")),
    (entity(user=None, client_id=None), ("alice", "app")),
    (entity(user=None), ("alice", "")),
    (entity(client_id="app"), ("", "app")),
    (entity(client_id=None), ("", "app")),
]


def test_precedence_follows_kafkas_eight_levels():
    configs = QuotaConfigs()
    for i, (e, _) in enumerate(LEVELS):
        configs.set(e, {P: 1000.0 + i})
    for i, (e, tags) in enumerate(LEVELS):
        assert configs.resolve(P, "alice", "app") == (1000.0 + i, tags)
        configs.set(e, {})           # drop the winner: the next level wins
    assert configs.resolve(P, "alice", "app") is None
    assert not configs.enabled(P)


def test_resolution_is_per_key_and_other_clients_do_not_match():
    configs = QuotaConfigs()
    configs.set(entity(user="alice"), {q.CONSUMER_BYTE_RATE: 5.0})
    configs.set(entity(client_id=None), {P: 7.0})
    assert configs.resolve(P, "alice", "app") == (7.0, ("", "app"))
    assert configs.resolve(q.CONSUMER_BYTE_RATE, "alice", "app") == (5.0, ("alice", ""))
    assert configs.resolve(q.CONSUMER_BYTE_RATE, "bob", "app") is None


@pytest.mark.parametrize("components, message", [
    ([], "Invalid empty client quota entity"),
    ([("user", "a"), ("user", "b")], "Invalid client quota entity, duplicate entity entry user"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([("user", "")], "Empty user not supported"),
    ([("ip", "1.2.3.4"), ("user", "a")], "Invalid quota entity combination, IP entity should not be combined with User or ClientId"),
    ([("ip", "1.2.3.4")], "IP quotas (connection_creation_rate) are not supported by kwire"),
])
def test_entity_validation(components, message):
    with pytest.raises(QuotaError) as info:
        q.validate_entity(components)
    assert (info.value.code, info.value.message) == (ErrorCode.INVALID_REQUEST, message)


@pytest.mark.parametrize("key, value, message", [
    ("bogus", 1.0, "Invalid configuration key bogus"),
    (P, 0.0, "Quota producer_byte_rate must be greater than 0"),
    (P, -5.0, "Quota producer_byte_rate must be greater than 0"),
    (P, 1.5, "producer_byte_rate cannot be a fractional value."),
    (q.REQUEST_PERCENTAGE, float("nan"), "Quota request_percentage must be greater than 0"),
])
def test_value_validation(key, value, message):
    with pytest.raises(QuotaError) as info:
        q.validate_value(key, value)
    assert info.value.message == message


def test_ops_later_wins_and_removing_absent_key_is_fine():
    ops = [q.Op(P, 10.0, False), q.Op(P, 20.0, False), q.Op(q.REQUEST_PERCENTAGE, 0, True)]
    assert q.apply_ops({q.CONSUMER_BYTE_RATE: 1.0}, ops) == {q.CONSUMER_BYTE_RATE: 1.0, P: 20.0}
    assert q.apply_ops({P: 5.0}, [q.Op(P, 0.0, True)]) == {}
    assert q.validate_value(q.REQUEST_PERCENTAGE, 12.5) is None


def test_describe_filters():
    configs = QuotaConfigs()
    entities = [entity(user="alice"), entity(user=None), entity(user="alice", client_id="app"),
                entity(client_id="app"), entity(client_id=None)]
    for e in entities:
        configs.set(e, {P: 1.0})

    def found(components, strict=False):
        return [e for e, _ in configs.describe(q.parse_filter(components, strict))]
    assert len(found([])) == 5
    assert found([], strict=True) == []
    assert found([("user", 0, "alice")]) == [entity(user="alice", client_id="app"), entity(user="alice")]
    assert found([("user", 0, "alice")], strict=True) == [entity(user="alice")]
    assert found([("user", 1, None)]) == [entity(user=None)]
    assert set(found([("client-id", 2, None)])) == {entity(user="alice", client_id="app"), entity(client_id="app"),
                                                    entity(client_id=None)}
    for bad, code in [([("user", 0, None)], ErrorCode.INVALID_REQUEST), ([("user", 1, "x")], ErrorCode.INVALID_REQUEST),
                      ([("user", 2, None), ("user", 0, "a")], ErrorCode.INVALID_REQUEST),
                      ([("group", 0, "g")], ErrorCode.UNSUPPORTED_VERSION), ([("user", 7, None)], ErrorCode.INVALID_REQUEST),
                      ([("ip", 2, None), ("user", 2, None)], ErrorCode.INVALID_REQUEST)]:
        with pytest.raises(QuotaError) as info:
            q.parse_filter(bad, False)
        assert info.value.code == code


def test_paths_round_trip_with_sanitized_names():
    for e, path in [(entity(user="alice"), "users/alice"), (entity(user=None), "users/<default>"),
                    (entity(user="CN=a b,O=x", client_id=None), "users/CN%3Da%20b%2CO%3Dx/clients/<default>"),
                    (entity(client_id="app*1"), "clients/app%2A1")]:
        assert q.entity_path(e) == path
        assert q.entity_of_path(path) == e
    assert q.entity_of_path("topics/t") is None
    assert q.format_value(P, 1024.0) == "1024" and q.format_value(q.REQUEST_PERCENTAGE, 200) == "200.0"
    values, problems = q.parse_values({P: "1024", "SCRAM-SHA-256": "salt=..", q.REQUEST_PERCENTAGE: "x"})
    assert values == {P: 1024.0} and len(problems) == 1


def test_rate_window_is_at_least_num_minus_one_windows():
    rate = SampledRate(11, 1000)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000 and rate.measure(0) == 1000.0
    assert rate.window_size_ms(2500) == 10_500           # 2 full windows + 0.5, padded to 10
    rate.record(10_000, 10_500)
    assert rate.window_size_ms(10_500) == 10_500        # 10 full windows: the real elapsed time
    assert rate.window_size_ms(11_000) == 10_500        # the first sample expired: 0.5 s + 10 padded
    assert rate.measure(30_000) == 0.0                  # both expired


def test_throttle_time_is_kafkas_formula():
    configs = QuotaConfigs()
    configs.set(entity(client_id="app"), {P: 1000.0})
    enforcer = QuotaEnforcer(configs, 11, 1)
    assert enforcer.record(P, "u", "app", 10_000, 0) == 0       # 1000/s over 10 s: at the bound
    # 15000 bytes over 10 s = 1500/s: (1500 - 1000) / 1000 * 10000 ms
    assert enforcer.record(P, "u", "app", 5_000, 0) == 5000
    assert enforcer.record(P, "other", "other", 1e9, 0) == 0    # no quota for it
    enforcer.unrecord(P, "u", "app", 5_000, 0)
    assert enforcer.sensors[P][("", "app")].rate.measure(0) == 1000.0
    assert enforcer.max_value_in_window(P, "u", "app") == 10_000
    assert enforcer.max_value_in_window(q.CONSUMER_BYTE_RATE, "u", "app") is None


def test_steady_producer_is_held_to_its_quota():
    """A client sending 10x its quota, sleeping each throttle, averages the quota."""
    configs = QuotaConfigs()
    configs.set(entity(user="alice"), {P: 1000.0})
    enforcer = QuotaEnforcer(configs, 11, 1)
    now, sent = 0, 0
    while now < 120_000:
        sent += 500
        now += 50 + enforcer.record(P, "alice", "any", 500, now)
    # the quota over the run, give or take the burst of one window (num - 1 windows' worth)
    assert 120_000 * 0.95 <= sent <= 120_000 * 1.05 + 10_000


def test_request_percentage_throttle_is_capped_at_one_window():
    configs = QuotaConfigs()
    configs.set(entity(user=None), {q.REQUEST_PERCENTAGE: 1.0})
    enforcer = QuotaEnforcer(configs, 11, 1)
    assert enforcer.record(q.REQUEST_PERCENTAGE, "bob", "c", 1e6, 0) == 1000


def test_token_bucket_strict_and_permissive():
    configs = QuotaConfigs()
    configs.set(entity(client_id="admin"), {q.CONTROLLER_MUTATION_RATE: 2.0})
    enforcer = QuotaEnforcer(configs, 11, 1)
    strict = enforcer.mutation_quota("u", "admin", True, 0)
    assert strict.record(20) and strict.record(5)          # 22 tokens of burst: goes to -3
    assert not strict.record(1) and strict.throttle_ms == 1500
    later = enforcer.mutation_quota("u", "admin", True, 1500)
    assert later.record(1)                                  # refilled to 0 after 1.5 s
    permissive = enforcer.mutation_quota("u", "admin", False, 1500)
    assert permissive.record(10) and permissive.throttle_ms == 5500
    assert enforcer.mutation_quota("u", "other", True, 0) is None
    bucket = TokenBucket(11, 1)
    assert bucket.measure(1.0, 0) == 11.0


def test_idle_sensors_expire_after_an_hour():
    configs = QuotaConfigs()
    configs.set(entity(client_id=None), {P: 1000.0})
    enforcer = QuotaEnforcer(configs, 11, 1)
    enforcer.record(P, "u", "one-off", 10, 0)
    enforcer.record(P, "u", "steady", 10, 3_000_000)
    enforcer.record(P, "u", "new", 10, 3_700_000)          # a new sensor sweeps the idle ones
    assert set(enforcer.sensors[P]) == {("", "steady"), ("", "new")}
