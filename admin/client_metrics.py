"""Client metrics subscriptions (KIP-714): the configs, the matching, each client's state.

Kafka's rules, followed here (its ``ClientMetricsManager``, ``ClientMetricsConfigs``):

- A subscription is a CLIENT_METRICS config resource (type 16) named by the operator, with
  three keys: ``metrics`` (comma-separated metric name prefixes; ``*`` every metric; empty
  none), ``interval.ms`` (how often a matching client pushes, 100..3600000, default 300000)
  and ``match`` (comma-separated ``selector=regex``; every selector must match its whole
  attribute; none matches every client).  Selectors: client_instance_id, client_id,
  client_software_name, client_software_version, client_source_address, client_source_port.
  Deleting every key deletes the subscription.
- GetTelemetrySubscriptions gives a client its instance id (when it sends the zero UUID), the
  union of the matching subscriptions' prefixes (``*`` alone when one asks for all), their
  lowest interval (300000 when none matches: then no metrics are requested and the client
  pushes nothing) and a subscription id: a CRC of those two XORed with the instance id, so it
  changes when the subscriptions that apply change.  A second Get within the push interval is
  THROTTLING_QUOTA_EXCEEDED unless the last push was refused for its subscription id or
  compression type.
- PushTelemetry is refused, in this order: INVALID_REQUEST after a ``terminating`` push;
  THROTTLING_QUOTA_EXCEEDED before the interval has passed since the last push (the first push
  after a Get is always taken: clients jitter it); UNKNOWN_SUBSCRIPTION_ID when the id is not
  the current one (the subscriptions changed: the client asks again); UNSUPPORTED_COMPRESSION_TYPE;
  TELEMETRY_TOO_LARGE when the compressed payload passes ``telemetry.max.bytes``.  Then the
  payload is decompressed with its own bound (a larger output is TELEMETRY_TOO_LARGE too) and a
  payload that does not decompress is INVALID_RECORD.
- A client's state is dropped after max(60 s, 3 push intervals) without a request, on a
  terminating push, or (oldest first) when ``max_instances`` are tracked.

Sans-I/O: time is passed in (``now_ms``), and so are fresh instance ids.
"""
from __future__ import annotations

import collections
import dataclasses
import re
import uuid
import zlib

from kwire.codecs import compression
from kwire.codecs.errors import ErrorCode, KafkaApiError

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS, MIN_INTERVAL_MS, MAX_INTERVAL_MS = 300_000, 100, 3_600_000
ALL_METRICS = "*"
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
# name -> (default as described, documentation); Kafka's ClientMetricsConfigs
CONFIGS = {
    METRICS: ("", "Comma-separated metric name prefixes the matching clients push; * for every metric."),
    INTERVAL_MS: (str(DEFAULT_INTERVAL_MS), f"How often the matching clients push, {MIN_INTERVAL_MS} to "
                                            f"{MAX_INTERVAL_MS} ms."),
    MATCH: ("", "Comma-separated selector=regex, all of which a client must match (none: every client); "
                "selectors: " + ", ".join(SELECTORS) + "."),
}
# what a push may be compressed with (codecs.compression), the broker's preference first, as Kafka
ACCEPTED_COMPRESSION = (compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY)
INSTANCE_EXPIRY_FLOOR_MS = 60_000
DECOMPRESSED_CAP = 64 << 20          # a push never decompresses past this, whatever telemetry.max.bytes
DECOMPRESSED_RATIO = 16              # ... nor past this many times telemetry.max.bytes (or 1 MiB)
DECOMPRESSED_FLOOR = 1 << 20


def split_list(value: str | None) -> list[str]:
    """A LIST config as Kafka parses it: comma-separated, trimmed; empty text is no item."""
    if value is None or not value.strip():
        return []
    return [item.strip() for item in value.split(",")]


@dataclasses.dataclass(frozen=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern], ...]

    def matches(self, attributes: dict[str, str | None]) -> bool:
        return all(attributes.get(selector) is not None and pattern.fullmatch(attributes[selector])
                   for selector, pattern in self.match)


def parse_match(patterns: list[str]) -> tuple[tuple[str, re.Pattern], ...]:
    """``selector=regex`` items; raises KafkaApiError(INVALID_CONFIG) naming a bad one."""
    out = {}
    for item in patterns:
        pair = item.split("=")
        selector = pair[0].strip()
        if len(pair) != 2 or selector not in SELECTORS:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}")
        try:
            out[selector] = re.compile(pair[1].strip())
        except re.error:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}") from None
    return tuple(out.items())


def subscription(name: str, configs: dict[str, str]) -> Subscription:
    """The subscription ``configs`` describe.  Raises KafkaApiError: INVALID_REQUEST for an
    empty name, an unknown key or an interval out of range, INVALID_CONFIG for a bad ``match``."""
    if not name:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIGS:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    interval = configs.get(INTERVAL_MS, str(DEFAULT_INTERVAL_MS))
    try:
        interval_ms = int(interval.strip())
    except (AttributeError, ValueError):
        raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Invalid value {interval} for configuration "
                                                      f"{INTERVAL_MS}: Not a number of type INT") from None
    if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Invalid value {interval_ms} for {INTERVAL_MS}, interval "
                                                       f"must be between 100 and 3600000 (1 hour)")
    return Subscription(name, frozenset(split_list(configs.get(METRICS))), interval_ms,
                        parse_match(split_list(configs.get(MATCH))))


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    """A signed int32 that changes with the requested metrics, the interval and the client."""
    crc = zlib.crc32((",".join(sorted(metrics)) + "|" + str(interval_ms)).encode())
    folded = (instance_id.int ^ (instance_id.int >> 64)) & 0xFFFFFFFF
    value = crc ^ folded
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclasses.dataclass
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    version: int                      # of the subscriptions this was evaluated against
    metrics: tuple[str, ...]          # requested prefixes ("*" alone: all)
    interval_ms: int
    subscription_id: int
    last_get_ms: int = -1
    last_push_ms: int = -1
    last_error: ErrorCode = ErrorCode.NONE
    terminating: bool = False
    seen_ms: int = 0

    def expires_at(self) -> int:
        return self.seen_ms + max(INSTANCE_EXPIRY_FLOOR_MS, 3 * self.interval_ms)


class ClientMetricsManager:
    """The subscriptions and every tracked client instance.  ``on_drop(instance_id)`` is told
    when an instance's state goes (expired, evicted, terminating, matching nothing any more)."""

    def __init__(self, telemetry_max_bytes: int, max_instances: int, on_drop=lambda _id: None):
        self.telemetry_max_bytes = telemetry_max_bytes
        self.max_instances = max_instances
        self.on_drop = on_drop
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0
        self.instances: collections.OrderedDict[uuid.UUID, ClientInstance] = collections.OrderedDict()

    # -- subscriptions --------------------------------------------------------------------
    def set_subscriptions(self, configs: dict[str, dict[str, str]]) -> None:
        """Make ``configs`` ({name: {key: value}}, as stored) the subscriptions; one that no
        longer validates is skipped (it was validated when set)."""
        subs = {}
        for name, values in configs.items():
            try:
                subs[name] = subscription(name, values)
            except KafkaApiError:
                continue
        if subs != self.subscriptions:
            self.subscriptions = subs
            self.version += 1

    # -- client instances -----------------------------------------------------------------
    def instance(self, instance_id: uuid.UUID, attributes: dict, now_ms: int) -> ClientInstance:
        """The tracked instance, (re)evaluated against the current subscriptions."""
        self.expire(now_ms)
        found = self.instances.get(instance_id)
        if found is None or found.version != self.version:
            attrs = found.attributes if found is not None else dict(attributes, client_instance_id=str(instance_id))
            fresh = self._evaluate(instance_id, attrs)
            if found is not None and not fresh.metrics:
                self.on_drop(instance_id)            # it matches nothing now: its metrics go
            found = fresh
        found.seen_ms = now_ms
        self.instances[instance_id] = found
        self.instances.move_to_end(instance_id)
        while len(self.instances) > self.max_instances:
            self.on_drop(self.instances.popitem(last=False)[0])
        return found

    def _evaluate(self, instance_id: uuid.UUID, attributes: dict) -> ClientInstance:
        interval, metrics, every = DEFAULT_INTERVAL_MS, set(), False
        for sub in self.subscriptions.values():
            if sub.matches(attributes):
                every = every or ALL_METRICS in sub.metrics
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        requested = (ALL_METRICS,) if every else tuple(sorted(metrics))
        return ClientInstance(instance_id, attributes, self.version, requested, interval,
                              subscription_id(requested, interval, instance_id))

    def expire(self, now_ms: int) -> list[uuid.UUID]:
        gone = [i for i, inst in self.instances.items() if inst.expires_at() <= now_ms]
        for instance_id in gone:
            del self.instances[instance_id]
            self.on_drop(instance_id)
        return gone

    def drop(self, instance_id: uuid.UUID) -> None:
        if self.instances.pop(instance_id, None) is not None:
            self.on_drop(instance_id)

    # -- the two requests -------------------------------------------------------------------
    def get_subscriptions(self, requested_id: uuid.UUID | None, attributes: dict, now_ms: int,
                          fresh_id: uuid.UUID) -> dict:
        """GetTelemetrySubscriptions' response fields.  ``fresh_id``: the id to assign when the
        client sends none (the zero UUID).  Raises KafkaApiError(THROTTLING_QUOTA_EXCEEDED)."""
        assigned = requested_id is None or requested_id.int == 0
        instance_id = fresh_id if assigned else requested_id
        inst = self.instance(instance_id, attributes, now_ms)
        last = max(inst.last_get_ms, inst.last_push_ms)
        if last >= 0 and now_ms - last < inst.interval_ms and inst.last_error not in (
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            raise KafkaApiError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                f"Request from the client [{instance_id}] arrived before the next push interval time")
        inst.last_get_ms, inst.last_error = now_ms, ErrorCode.NONE
        return {"error_code": 0, "client_instance_id": instance_id if assigned else uuid.UUID(int=0),
                "subscription_id": inst.subscription_id, "accepted_compression_types": list(ACCEPTED_COMPRESSION),
                "push_interval_ms": inst.interval_ms, "telemetry_max_bytes": self.telemetry_max_bytes,
                "delta_temporality": True, "requested_metrics": list(inst.metrics)}

    def push(self, instance_id: uuid.UUID | None, subscription_id_: int, terminating: bool,
             compression_type: int, metrics, attributes: dict, now_ms: int) -> tuple[ClientInstance, bytes]:
        """Check a PushTelemetry and return the instance with its decompressed payload.
        Raises KafkaApiError with Kafka's code (module docstring); a terminating push drops
        the instance's state whatever the outcome."""
        if instance_id is None or instance_id.int in (0, 1):        # Kafka's reserved ids
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                f"Invalid request from the client [{instance_id}], invalid client instance id")
        inst = self.instance(instance_id, attributes, now_ms)
        try:
            payload = self._check_push(inst, subscription_id_, terminating, compression_type, metrics, now_ms)
        except KafkaApiError as exc:
            inst.last_error = exc.code
            raise
        finally:
            inst.terminating = inst.terminating or terminating
        inst.last_error = ErrorCode.NONE
        return inst, payload

    def _check_push(self, inst: ClientInstance, sub_id: int, terminating: bool, compression_type: int,
                    metrics, now_ms: int) -> bytes:
        if inst.terminating:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Client [{inst.instance_id}] sent a terminating "
                                                           "push before: no request is taken after that")
        if inst.last_get_ms <= inst.last_push_ms and now_ms - inst.last_push_ms < inst.interval_ms \
                and not terminating:
            raise KafkaApiError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                f"Request from the client [{inst.instance_id}] arrived before the next push interval time")
        inst.last_push_ms = now_ms
        if sub_id != inst.subscription_id:
            raise KafkaApiError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                f"Unknown client subscription id for the client [{inst.instance_id}]")
        if compression_type != compression.NONE and compression_type not in ACCEPTED_COMPRESSION:
            raise KafkaApiError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                f"Unknown compression type [{compression_type}] is received in telemetry request")
        return decompress_payload(compression_type, metrics, self.telemetry_max_bytes)


def decompress_payload(compression_type: int, data, max_bytes: int) -> bytes:
    """The pushed bytes, decompressed.  The compressed size is checked first; the output is
    bounded by min(DECOMPRESSED_CAP, max(1 MiB, DECOMPRESSED_RATIO x ``max_bytes``)).  Raises
    KafkaApiError: TELEMETRY_TOO_LARGE, or INVALID_RECORD for bytes that do not decompress."""
    data = data or b""
    if len(data) > max_bytes:
        raise KafkaApiError(ErrorCode.TELEMETRY_TOO_LARGE,
                            f"Telemetry request is larger than the maximum allowed size [{max_bytes}]")
    if compression_type == compression.NONE:
        return bytes(data)
    limit = min(DECOMPRESSED_CAP, max(DECOMPRESSED_FLOOR, DECOMPRESSED_RATIO * max_bytes))
    try:
        return compression.decompress(compression_type, data, limit)
    except KafkaApiError as exc:
        if exc.code == ErrorCode.MESSAGE_TOO_LARGE:
            raise KafkaApiError(ErrorCode.TELEMETRY_TOO_LARGE,
                                f"Telemetry payload decompresses to more than {limit} bytes") from None
        raise KafkaApiError(ErrorCode.INVALID_RECORD, f"Telemetry payload does not decompress: {exc.message}") \
            from None
