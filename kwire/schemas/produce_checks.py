"""Record validation on the produce path, Kafka's LogValidator shape: before a partition's
append, its records are decoded and each is checked; one bad record refuses the whole append
(nothing of the partition's data is written) with INVALID_RECORD, ``record_errors`` naming
each bad record by its index, and an ``error_message`` naming the first and its reason.

What a topic checks comes from its configs (``TopicChecks``): Confluent's schema ID
validation of keys and/or values (``kwire.schemas.validation``, against the broker's Schema
Registry), and a Python validator (``kwire.schemas.validators``).  The schema checks are
synchronous and run on the Trio thread (records read by ``record_reader.field_runs``: a
check by schema id alone reads runs of records that share their prefix as one); before a
refusal they wait once for the registry to catch up (``refresh``: a schema registered a
moment ago may not have reached this broker's copy of ``_schemas`` yet); the Python validator runs in a worker thread under
its time box.  Both happen before ``partitions.append``, which itself never awaits, so the
append stays atomic.  A topic with no configs of its own costs the produce path one
attribute read; one with other overrides, one dict lookup (the plan is cached by the
identity of the topic's config dict, which every config change replaces).
"""
from __future__ import annotations

import dataclasses
import logging
import time
import weakref

from kwire.admin.topic_config import topic_value
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.validation import RecordError, RecordValidationError

from kwire.schemas.record_reader import crc_errors, field_runs, produced_records
from kwire.schemas.validation import PREFIX_SIZE, FieldChecker, FieldRule, Strategy
from kwire.schemas.validators import (
    ALLOWED_MODULES_KEY, VALIDATOR_KEY, Validator, ValidatorError, ValidatorThreads, resolve,
)

logger = logging.getLogger("kwire.schemas")
_WARN_INTERVAL_S = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class TopicChecks:
    """The record checks of one topic; ``broken`` says why they cannot run (then every
    produce to the topic is refused: validation that was asked for is never skipped)."""

    key: FieldRule | None = None
    value: FieldRule | None = None
    validator: Validator | None = None
    validator_spec: str = ""
    timeout_ms: int = 1000
    broken: str | None = None


def plan_topic(broker_config, overrides) -> TopicChecks | None:
    """The checks a topic's ``overrides`` ask for, None when none.  Loads the Python validator
    (under the broker's allow-list); never raises: a config that cannot be used gives a
    ``broken`` plan."""
    def get(name: str):
        return topic_value(broker_config, overrides, name)
    try:
        decode = get("kwire.schema.validation.decode")
        rules = {field: FieldRule(field, Strategy.named(get(f"confluent.{field}.subject.name.strategy")), decode)
                 for field in ("key", "value") if get(f"confluent.{field}.schema.validation")}
        spec = get(VALIDATOR_KEY)
        timeout_ms = get("kwire.record.validator.timeout.ms")
    except (KafkaApiError, ValueError) as exc:
        return TopicChecks(broken=f"its validation configs are invalid ({getattr(exc, 'message', exc)})")
    if not rules and not spec:
        return None
    validator, broken = None, None
    if spec:
        try:
            validator = resolve(spec, broker_config.value_of(ALLOWED_MODULES_KEY))
        except ValidatorError as exc:
            broken = f"its {VALIDATOR_KEY} cannot run: {exc}"
    return TopicChecks(rules.get("key"), rules.get("value"), validator, spec, timeout_ms, broken)


def rejected(topic: str, partition: int, errors: dict[int, str]) -> RecordValidationError:
    """INVALID_RECORD for ``errors`` ({index: reason}): record_errors, and a message naming the
    first bad record."""
    ordered = sorted(errors.items())
    index, reason = ordered[0]
    more = f" (and {len(ordered) - 1} more records rejected)" if len(ordered) > 1 else ""
    return RecordValidationError(ErrorCode.INVALID_RECORD,
                                 f"record {index} of topic {topic} partition {partition}: {reason}{more}",
                                 [RecordError(i, r) for i, r in ordered])


def schema_errors(topic: str, checks: TopicChecks, runs, source) -> dict[int, str]:
    """{index: reason} of the records failing the topic's schema rules; ``runs`` are
    record_reader's FieldRuns (index, count, key, value): a run's verdict is its records'."""
    checkers = [(position, FieldChecker(topic, rule, source))
                for position, rule in ((2, checks.key), (3, checks.value)) if rule is not None]
    errors = {}
    for run in runs:
        for position, checker in checkers:
            reason = checker(run[position])
            if reason is not None:
                errors.update(dict.fromkeys(range(run[0], run[0] + run[1]), reason))
                break
    return errors


def prefix_only(checks: TopicChecks) -> bool:
    """Whether the topic's schema rules read only the 5-byte prefix of keys and values (none
    decodes the payload): then record_reader.field_runs may merge records that share it."""
    return not any(rule is not None and rule.decode for rule in (checks.key, checks.value))


class RecordChecks:
    """One broker's record checks: the topics' plans and the validator threads."""

    def __init__(self, threads: int | None = None):
        self.threads = ValidatorThreads() if threads is None else ValidatorThreads(threads)
        self._plans: dict[str, tuple[dict, TopicChecks | None]] = {}
        self._warned: dict[str, float] = {}

    def for_topic(self, broker, topic) -> TopicChecks | None:
        """The checks of ``topic`` (a LogManager Topic), None when it has none."""
        configs = topic.configs
        cached = self._plans.get(topic.name)
        if cached is not None and cached[0] is configs:
            return cached[1]
        checks = plan_topic(broker.config, configs)
        for gone in [name for name in self._plans if broker.logs.get(name) is None]:
            del self._plans[gone]                   # deleted topics (plans are made rarely)
        self._plans[topic.name] = (configs, checks)
        return checks

    async def check(self, broker, checks: TopicChecks, topic: str, partition: int, blob,
                    max_message_bytes: int) -> None:
        """Check the records ``blob`` of one partition of a Produce.  Raises
        RecordValidationError(INVALID_RECORD) naming the bad records, KafkaApiError
        (INVALID_RECORD) when the checks cannot run or the validator's time box runs out, or
        what ``produced_records`` raises for bytes the append would refuse too.  Cancel-safe
        (nothing is changed; a validator thread is abandoned)."""
        if checks.broken:
            raise KafkaApiError(ErrorCode.INVALID_RECORD, f"topic {topic}: {checks.broken}")
        records = (produced_records(blob, topic, partition, max_message_bytes)
                   if checks.validator is not None else None)
        errors: dict[int, str] = {}
        if checks.key is not None or checks.value is not None:
            source = getattr(broker, "schema_registry", None)
            if source is None:
                on = " and ".join(f"confluent.{r.field}.schema.validation" for r in (checks.key, checks.value) if r)
                raise KafkaApiError(ErrorCode.INVALID_RECORD, f"topic {topic} has {on}=true but this broker has "
                                    "no Schema Registry (schema.registry.listeners is not set)")
            try:
                runs = (field_runs(blob, max_message_bytes, PREFIX_SIZE if prefix_only(checks) else None,
                                   keys=checks.key is not None, values=checks.value is not None)
                        if records is None else [(i, 1, r.key, r.value) for i, r in records])
            except KafkaApiError as exc:        # read before the CRC check: corruption comes first
                raise (crc_errors(blob) if records is None else None) or exc from None
            errors = schema_errors(topic, checks, runs, source)
            if errors and records is None and (corrupt := crc_errors(blob)) is not None:
                raise corrupt
            if errors:              # the registry may not have replayed a new schema yet
                await source.refresh()
                errors = schema_errors(topic, checks, runs, source)
        if checks.validator is not None and records and not errors:     # a refused batch is not run
            what = f"record validator {checks.validator_spec} on topic {topic} partition {partition}"
            try:
                errors = dict(await self.threads.run(checks.validator, records, checks.timeout_ms, what))
            except KafkaApiError as exc:
                self._warn(topic, exc.message)
                raise
        if errors:
            raise rejected(topic, partition, errors)

    def _warn(self, topic: str, message: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(topic, -_WARN_INTERVAL_S) >= _WARN_INTERVAL_S:
            self._warned[topic] = now
            logger.warning("%s (%s)", message, self.threads.statistics())


_BY_BROKER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record_checks(broker) -> RecordChecks:
    """The RecordChecks of ``broker`` (made on first use)."""
    checks = _BY_BROKER.get(broker)
    if checks is None:
        checks = _BY_BROKER[broker] = RecordChecks()
    return checks


def topic_checks(broker, name: str) -> TopicChecks | None:
    """The checks of topic ``name`` on ``broker``; None (at the cost of one dict lookup and one
    attribute read) for a topic without configs of its own, an internal or unknown topic."""
    topic = broker.logs.get(name)
    if topic is None or not topic.configs or topic.internal:
        return None
    return record_checks(broker).for_topic(broker, topic)
