"""Python record validators without sockets: what may be loaded (kwire.schemas.validators), the
time box and the bound on stuck threads, and the shipped examples
(kwire.schemas.validator_examples).  Through real clients: test_validators_clients.py."""
from __future__ import annotations

import threading
import time

import pytest
import trio

from kwire.admin.broker_config import broker_config_from_text
from kwire.codecs.errors import ErrorCode as E, KafkaApiError
from kwire.schemas import validator_examples as examples
from kwire.schemas.record_reader import ProducedRecord
from kwire.schemas.validators import (
    ValidatorError, ValidatorThreads, check_topic_configs, module_allowed, resolve, validate_records,
)

DEFAULT_ALLOWED = ("kwire.schemas.validator_examples",)


def record(value: bytes | None, key: bytes | None = None, offset_delta: int = 0) -> ProducedRecord:
    return ProducedRecord("t", 0, offset_delta, 1_000, key, value, ())


# -- what may be loaded -------------------------------------------------------------------------------

def test_module_prefixes_match_at_dots():
    assert module_allowed("a.b", ["a.b"]) and module_allowed("a.b.c", ["a.b"])
    assert not module_allowed("a.bc", ["a.b"]) and not module_allowed("a", ["a.b"])
    assert not module_allowed("os", ["", "a"])


def test_the_default_allow_list_loads_the_examples_and_nothing_else():
    assert resolve("kwire.schemas.validator_examples:no_pii", DEFAULT_ALLOWED) is examples.no_pii
    for spec in ("os:system", "subprocess:run", "kwire.schemas.validator_examples_evil:x"):
        with pytest.raises(ValidatorError, match="is not allowed"):
            resolve(spec, DEFAULT_ALLOWED)


def test_loading_failures_are_named():
    with pytest.raises(ValidatorError, match="cannot be loaded: AttributeError"):
        resolve("kwire.schemas.validator_examples:nope", DEFAULT_ALLOWED)
    with pytest.raises(ValidatorError, match="is not callable"):
        resolve("kwire.schemas.validator_examples:EXAMPLE_ORDER_SCHEMA", DEFAULT_ALLOWED)
    with pytest.raises(ValidatorError, match="no entry point named nope"):
        resolve("nope", DEFAULT_ALLOWED)


def test_an_installed_entry_point_is_allowed_by_name_and_by_value(tmp_path, monkeypatch):
    dist = tmp_path / "acme_validators-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-validators\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kwire.record_validators]\nexits = tests.schemas.record_validators:exits\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from tests.schemas import record_validators
    assert resolve("exits", ()) is record_validators.exits
    assert resolve("tests.schemas.record_validators:exits", ()) is record_validators.exits
    with pytest.raises(ValidatorError):
        resolve("tests.schemas.record_validators:slow", ())          # the module, but not that entry


def test_topic_configs_outside_the_allow_list_are_invalid_config():
    broker = broker_config_from_text("")
    check_topic_configs(broker, {"kwire.record.validator": "kwire.schemas.validator_examples:json_object"})
    check_topic_configs(broker, {"retention.ms": "5"})
    with pytest.raises(KafkaApiError) as info:
        check_topic_configs(broker, {"kwire.record.validator": "os:system"})
    assert info.value.code == E.INVALID_CONFIG
    assert info.value.message.startswith("Invalid value os:system for configuration kwire.record.validator: "
                                         "module os is not allowed")
    with pytest.raises(KafkaApiError):
        check_topic_configs(broker_config_from_text("kwire.record.validator.allowed.modules="),
                            {"kwire.record.validator": "kwire.schemas.validator_examples:no_pii"})


def test_clients_cannot_widen_the_allow_list():
    """The allow-list is a static broker config: AlterConfigs on the broker refuses it."""
    from kwire.admin.dynamic_config import is_dynamic
    assert not is_dynamic("kwire.record.validator.allowed.modules")


# -- running validators -------------------------------------------------------------------------------

def test_every_exception_rejects_only_its_record():
    from tests.schemas.record_validators import exits
    records = [(i, record(b"v", offset_delta=i)) for i in range(3)]
    assert validate_records(exits, records) == [(0, "no thanks, record 0"), (1, "no thanks, record 1"),
                                                (2, "no thanks, record 2")]

    def empty(r):
        raise ValueError()
    assert validate_records(empty, records[:1]) == [(0, "ValueError")]


def test_a_batch_past_its_time_box_is_refused_and_its_thread_stops_after_the_record_it_is_in():
    release, seen = threading.Event(), []

    def stuck(r):
        seen.append(r.offset_delta)
        release.wait(10)

    async def main():
        threads = ValidatorThreads(2)
        started = time.monotonic()
        with pytest.raises(KafkaApiError) as info:
            await threads.run(stuck, [(i, record(b"v", offset_delta=i)) for i in range(5)], 300, "validator v")
        assert info.value.code == E.INVALID_RECORD and info.value.message == "validator v timed out after 300 ms"
        assert time.monotonic() - started < 2          # the validator would block for 10 s
        assert threads.statistics()["stuck"] == 1
        release.set()
        while threads.statistics()["stuck"]:
            await trio.sleep(0.01)
        assert seen == [0]                   # abandoned: no record after the one it was in
    trio.run(main)


def test_when_every_validator_thread_is_stuck_produces_are_refused_at_once():
    release = threading.Event()

    async def main():
        threads = ValidatorThreads(2)
        for _ in range(2):      # a time box long enough for the thread to start, even on a loaded machine
            with pytest.raises(KafkaApiError, match="timed out"):
                await threads.run(lambda r: release.wait(10), [(0, record(b"v"))], 300, "v")
        assert threads.statistics()["stuck"] == 2
        started = time.monotonic()
        with pytest.raises(KafkaApiError) as info:
            await threads.run(lambda r: None, [(0, record(b"v"))], 5_000, "v on t-0")
        assert time.monotonic() - started < 1        # its time box is 5 s: refused without waiting
        assert info.value.message == ("v on t-0: all 2 validator threads are still running validators past "
                                      "their time box; refused without running it")
        release.set()
        while threads.statistics()["stuck"]:
            await trio.sleep(0.01)
        assert await threads.run(lambda r: None, [(0, record(b"v"))], 1_000, "v") == []
        assert threads.statistics() == {"threads": 2, "borrowed": 0, "stuck": 0}
    trio.run(main)


def test_a_call_cancelled_while_waiting_for_a_thread_is_not_counted_as_stuck():
    release = threading.Event()

    async def main():
        threads = ValidatorThreads(1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(threads.run, lambda r: release.wait(10), [(0, record(b"v"))], 5_000, "v")
            while threads.statistics()["borrowed"] < 1:
                await trio.sleep(0.01)
            with pytest.raises(KafkaApiError, match="timed out"):       # waited for the one thread
                await threads.run(lambda r: None, [(0, record(b"v"))], 50, "v")
            assert threads.statistics()["stuck"] == 0
            release.set()
    trio.run(main)


# -- the examples -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, found", [
    ("write to jane.doe+kafka@example.co.uk please", "an e-mail address at character 9"),
    ("ssn 123-45-6789", "a US social security number at character 4"),
    ("card 4111 1111 1111 1111 exp", "a payment card number at character 5"),
    ("card 4111-1111-1111-1111", "a payment card number"),
    ("amex 378282246310005", "a payment card number"),
])
def test_no_pii_finds_personal_data_without_echoing_it(text, found):
    with pytest.raises(ValueError) as info:
        examples.no_pii(record(text.encode()))
    assert str(info.value).startswith("value contains ") and found in str(info.value)
    assert "4111" not in str(info.value) and "@" not in str(info.value)


@pytest.mark.parametrize("text", [
    "order 1234567890123456 shipped",         # 16 digits failing the Luhn check
    "ssn 000-12-3456 and 666-12-3456",        # never issued
    "at 12:30, 2024-01-15, id 42", "", "\xff\xfe binary",
])
def test_no_pii_lets_ordinary_data_through(text):
    examples.no_pii(record(text.encode("utf-8", "surrogateescape") if text else None))


def test_no_pii_checks_keys_too():
    with pytest.raises(ValueError, match="^key contains an e-mail"):
        examples.no_pii(record(b"fine", key=b"bob@example.com"))


def test_luhn():
    assert examples.luhn_ok("79927398713") and not examples.luhn_ok("79927398710")


def test_the_json_schema_examples():
    examples.example_order(record(b'{"id": 1, "amount": 9.5, "currency": "EUR"}'))
    examples.example_order(record(None))                    # a tombstone passes
    with pytest.raises(ValueError, match=r"^value does not match the JSON schema: 'currency' is a required "
                                         r"property at \$$"):
        examples.example_order(record(b'{"id": 1, "amount": 9.5}'))
    with pytest.raises(ValueError, match=r"-1 is less than the minimum of 0 at \$.amount"):
        examples.example_order(record(b'{"id": 1, "amount": -1, "currency": "EUR"}'))
    with pytest.raises(ValueError, match="^value is not JSON: "):
        examples.json_object(record(b"not json"))
    with pytest.raises(ValueError, match="is not of type 'object'"):
        examples.json_object(record(b"[1, 2]"))


def test_the_json_schema_factory_checks_its_schema():
    import jsonschema
    with pytest.raises(jsonschema.SchemaError):
        examples.json_schema_validator({"type": "nonsense"})
