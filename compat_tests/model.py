"""Shared types of the compatibility harness: records, client errors, outcomes, the setup admin.

Everything here talks to the broker through public client libraries only
(kafka-python for setup), so the harness runs against any Kafka-compatible
broker.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import threading
import time
import uuid

# Kafka error codes the scenarios expect, by Kafka's names.
ERROR_CODES = {
    "OFFSET_OUT_OF_RANGE": 1, "UNKNOWN_TOPIC_OR_PARTITION": 3, "MESSAGE_TOO_LARGE": 10,
    "INVALID_TOPIC_EXCEPTION": 17, "TOPIC_ALREADY_EXISTS": 36, "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38, "INVALID_CONFIG": 40,
}
# librdkafka and KafkaJS spell a few of them differently.
ERROR_ALIASES = {"MSG_SIZE_TOO_LARGE": 10, "TOPIC_EXCEPTION": 17, "UNKNOWN_TOPIC_OR_PART": 3,
                 "INVALID_TOPIC": 17}


def code_for_name(name: str | None) -> int | None:
    if not name:
        return None
    name = name.upper().lstrip("_")
    return ERROR_CODES.get(name, ERROR_ALIASES.get(name))


@dataclasses.dataclass
class Rec:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes]] = dataclasses.field(default_factory=list)
    timestamp: int | None = None
    partition: int | None = None
    offset: int | None = None


class Skip(Exception):
    """The scenario does not apply to this client; the message says why."""


class Fail(AssertionError):
    """The scenario failed; the message is the one-line reason."""


class ClientError(Exception):
    """A client reported an error: ``code`` is Kafka's error code when known.

    ``local`` marks errors the client raised without asking the broker
    (client-side validation), which bad-input checks treat as not applicable.
    """

    def __init__(self, code: int | None, text: str, local: bool = False):
        super().__init__(text)
        self.code = code
        self.local = local


def check(cond: bool, reason: str) -> None:
    if not cond:
        raise Fail(reason)


def unique(prefix: str) -> str:
    return f"compat-{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(cond, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return bool(cond())


SETUP_CLIENT_ID = "compat-setup"


class Setup:
    """Topic setup, plain produce and liveness checks through kafka-python."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def _admin(self):
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=SETUP_CLIENT_ID,
                                request_timeout_ms=10000)

    def create_topic(self, prefix: str, partitions: int = 1, configs: dict | None = None) -> str:
        from kafka.admin import NewTopic

        name = unique(prefix)
        admin = self._admin()
        try:
            admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        finally:
            admin.close()
        self.wait_topic(name, partitions)
        return name

    def wait_topic(self, name: str, partitions: int, timeout: float = 10) -> None:
        from kafka import KafkaConsumer

        c = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id=SETUP_CLIENT_ID)
        try:
            ok = wait_until(lambda: len(c.partitions_for_topic(name) or ()) == partitions, timeout, 0.1)
        finally:
            c.close()
        check(ok, f"setup: topic {name} not visible with {partitions} partitions")

    def produce(self, topic: str, recs: list[Rec]) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=self.bootstrap, client_id=SETUP_CLIENT_ID, linger_ms=5,
                          enable_idempotence=False, acks=1)
        try:
            futures = [p.send(topic, key=r.key, value=r.value, partition=r.partition,
                              headers=r.headers or None, timestamp_ms=r.timestamp) for r in recs]
            p.flush(15)
            for f in futures:
                f.get(timeout=5)
        finally:
            p.close(5)

    def still_serving(self) -> str | None:
        """None when a fresh connection gets Metadata; else the reason."""
        try:
            admin = self._admin()
            try:
                admin.list_topics()
            finally:
                admin.close()
        except Exception as exc:
            return f"broker stopped serving: {type(exc).__name__}: {exc}"[:200]
        return None


def records(n: int, *, prefix: str = "v", keys: int | None = None, headers: bool = False,
            t0: int | None = None, step_ms: int = 1000, partition: int | None = None) -> list[Rec]:
    """ASCII records (every client, kcat included, can carry them verbatim)."""
    out = []
    for i in range(n):
        out.append(Rec(value=f"{prefix}-{i:05d}".encode(),
                       key=None if keys is None else f"key-{i % keys}".encode(),
                       headers=[("h1", f"hv-{i}".encode()), ("h2", b"x")] if headers else [],
                       timestamp=None if t0 is None else t0 + i * step_ms, partition=partition))
    return out


# ----------------------------------------------------------------------------- client adapters
FETCH_TIMEOUT = 15.0   # seconds any one fetch may take, in every client adapter
CODECS = ("gzip", "snappy", "lz4", "zstd")


class Member:
    """A consumer-group member polling on a background thread."""

    def __init__(self):
        self.records: list[Rec] = []
        self.assigned: set[int] | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._guarded, daemon=True)

    def start(self) -> "Member":
        self._thread.start()
        return self

    def _guarded(self):
        try:
            self.run()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"[:200]

    def run(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def assignment(self) -> set[int] | None:
        return self.assigned

    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        self._thread.join(timeout)


NOT_INSTALLED = "not installed (pip install 'kwire[compat]')"


def missing_module(name: str) -> bool:
    """True when the Python module ``name`` cannot be imported here (an extra not installed)."""
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


class Client:
    name = "?"
    codecs: tuple[str, ...] = CODECS
    per_record_headers = True
    sets_timestamps = True
    has_admin = True
    requires: str | None = None     # the Python library the client is (from the [compat] extra)

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    @classmethod
    def library_version(cls) -> str | None:
        """The client library and its version, for the report; None when unknown or absent."""
        return None

    def unavailable(self) -> str | None:
        if self.requires is not None and missing_module(self.requires):
            return f"{self.requires}: {NOT_INSTALLED}"
        return None

    def close(self) -> None:
        pass
