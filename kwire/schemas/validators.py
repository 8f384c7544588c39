"""Python record validators: a topic's ``kwire.record.validator`` runs on each produced record
before the append, and an exception rejects the record (INVALID_RECORD, ``str(exc)``).

Which code may run.  A topic config is set by clients (CreateTopics, AlterConfigs), and
naming a module makes the broker import it: that is code execution on the broker's host.
So a validator is either ``package.module:function`` of a module under a prefix the operator
listed in the broker config ``kwire.record.validator.allowed.modules`` (comma-separated;
default ``kwire.schemas.validator_examples``; a prefix ``a.b`` allows ``a.b`` and ``a.b.c``,
not ``a.bc``), or the name (or value) of an entry point installed in group
``kwire.record_validators``: installing a package is the operator's act.  Anything else is
refused when the config is set, with INVALID_CONFIG (``check_topic_configs``), and again
when a stored config is loaded for a produce (the records are then refused: fail closed).

The time box.  A validator is arbitrary code, so it never runs on the Trio thread: the
records of one partition of a request go to one worker thread (``ValidatorThreads.run``),
and the whole batch must be done within the topic's ``kwire.record.validator.timeout.ms``,
else it is rejected ("... timed out after N ms") and the thread is abandoned: it stops
after the record it is in, whenever that returns.  The validator threads are a limiter of
their own (``VALIDATOR_THREADS``), so stuck validators never take the threads the broker's
file work needs; while every one of them is held by an abandoned call, produces to
validated topics are refused at once instead of queueing.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import threading
from typing import Callable, Iterable, Sequence

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.runtime.blocking import run_abandonable

ENTRY_POINT_GROUP = "kwire.record_validators"
VALIDATOR_KEY = "kwire.record.validator"
ALLOWED_MODULES_KEY = "kwire.record.validator.allowed.modules"
VALIDATOR_THREADS = 8

Validator = Callable[[object], object]


class ValidatorError(Exception):
    """A validator spec that may not, or cannot, be loaded; the message says why."""


def module_allowed(module: str, prefixes: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``prefixes`` or inside one of them (at a dot)."""
    return any(p and (module == p or module.startswith(p + ".")) for p in prefixes)


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def resolve(spec: str, allowed: Sequence[str]) -> Validator:
    """The function ``spec`` names (``package.module:function`` or an entry point's name).

    Raises ValidatorError when the module is neither allowed nor an entry point's, when no
    entry point has that name, or when it cannot be imported or is not callable.  Imports the
    module (the allow-list is checked first)."""
    entry_points = _entry_points()
    try:
        if ":" in spec:
            module_name, _, attribute = spec.partition(":")
            if not module_allowed(module_name, allowed) and \
                    all(ep.value.replace(" ", "") != spec for ep in entry_points.values()):
                raise ValidatorError(f"module {module_name} is not allowed: it is under no prefix of the broker's "
                                     f"{ALLOWED_MODULES_KEY} ({','.join(allowed) or 'empty'}) and no entry "
                                     f"point of group {ENTRY_POINT_GROUP} names it")
            found = importlib.import_module(module_name)
            for part in attribute.split("."):
                found = getattr(found, part)
        elif spec in entry_points:
            found = entry_points[spec].load()
        else:
            raise ValidatorError(f"no entry point named {spec} in group {ENTRY_POINT_GROUP}")
    except ValidatorError:
        raise
    except Exception as exc:          # ImportError, AttributeError, or the module's own failure
        raise ValidatorError(f"{spec} cannot be loaded: {type(exc).__name__}: {exc}") from None
    if not callable(found):
        raise ValidatorError(f"{spec} is not callable")
    return found


def check_topic_configs(broker_config, configs) -> None:
    """CreateTopics / AlterConfigs: a topic's ``kwire.record.validator`` must be loadable under
    the broker's allow-list (it is imported here).  Raises KafkaApiError(INVALID_CONFIG)."""
    spec = configs.get(VALIDATOR_KEY)
    if not spec:
        return
    try:
        resolve(spec, broker_config.value_of(ALLOWED_MODULES_KEY))
    except ValidatorError as exc:
        raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                            f"Invalid value {spec} for configuration {VALIDATOR_KEY}: {exc}") from None


def validate_records(fn: Validator, records: Sequence[tuple[int, object]], stop=None) -> list[tuple[int, str]]:
    """(index, reason) of each record ``fn`` raised on, in order.  Runs ``fn`` on each record
    until ``stop.stopped`` turns true.  Any exception of ``fn`` (even SystemExit) is a reason:
    a validator never ends the broker."""
    errors = []
    for index, record in records:
        if stop is not None and stop.stopped:
            break
        try:
            fn(record)
        except BaseException as exc:         # noqa: B036 -- user code: every failure rejects
            errors.append((index, str(exc) or type(exc).__name__))
    return errors


class _Call:
    """One batch handed to a worker thread; ``stopped`` and ``abandoned`` are set by the Trio
    thread, ``started`` and ``finished`` by the worker, all under the pool's lock.  Only a call
    whose thread started and has not finished counts as stuck when abandoned (one cancelled
    while it waited for a thread never starts)."""

    __slots__ = ("fn", "records", "stopped", "started", "finished", "abandoned")

    def __init__(self, fn: Validator, records):
        self.fn, self.records = fn, records
        self.stopped = self.started = self.finished = self.abandoned = False


class ValidatorThreads:
    """The worker threads validators run in, with a time box per batch (see the module)."""

    def __init__(self, threads: int = VALIDATOR_THREADS):
        self.threads = threads
        self.limiter = trio.CapacityLimiter(threads)
        self._lock = threading.Lock()
        self._stuck = 0

    def statistics(self) -> dict:
        """Threads in use and, of those, abandoned ones still inside a validator."""
        return {"threads": self.threads, "borrowed": self.limiter.borrowed_tokens, "stuck": self._stuck}

    async def run(self, fn: Validator, records: Sequence[tuple[int, object]], timeout_ms: int,
                  what: str) -> list[tuple[int, str]]:
        """``validate_records(fn, records)`` in a worker thread within ``timeout_ms``.

        Raises KafkaApiError(INVALID_RECORD) naming ``what`` when the time box runs out (the
        thread is abandoned) or when every validator thread is stuck (at once).  Cancel-safe:
        a cancelled caller abandons the thread the same way."""
        if self._stuck >= self.threads:
            raise KafkaApiError(ErrorCode.INVALID_RECORD,
                                f"{what}: all {self.threads} validator threads are still running validators "
                                "past their time box; refused without running it")
        call = _Call(fn, records)
        done = False
        try:
            with trio.move_on_after(timeout_ms / 1000):
                errors = await run_abandonable(self._work, call, limiter=self.limiter)
                done = True
        finally:
            if not done:
                self._abandon(call)
        if not done:
            raise KafkaApiError(ErrorCode.INVALID_RECORD, f"{what} timed out after {timeout_ms} ms")
        return errors

    def _work(self, call: _Call) -> list[tuple[int, str]]:
        with self._lock:
            call.started = True
        try:
            return validate_records(call.fn, call.records, call)
        finally:
            with self._lock:
                call.finished = True
                if call.abandoned:
                    self._stuck -= 1

    def _abandon(self, call: _Call) -> None:
        with self._lock:
            call.stopped = True
            if call.started and not call.finished and not call.abandoned:
                call.abandoned = True
                self._stuck += 1
