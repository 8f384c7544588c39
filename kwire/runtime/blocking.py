"""Blocking file work, run off the Trio thread: the one module that uses ``trio.to_thread``.

What goes through ``run_blocking``: file work that can block the event loop
(fsync, creating or replacing files, writing checkpoints, recovery, scrubs).
The function run must not change state the Trio thread reads meanwhile,
except state its owner documents as safe from a worker thread (a partition's
``flush``).  Shared structures -- the topic table, a partition's offsets and
segment list -- change on the Trio thread only, before or after the call:
the blocking part writes, then the caller publishes, so no coroutine sees a
half-created topic or a log start offset that is not on disk yet.  That is
why ``LogManager.create_topic`` runs as ``pick_dir`` (Trio thread),
``write_topic`` (here) and ``publish_topic`` (Trio thread).

Cancel safety: a file operation is never abandoned half-way.  A cancelled
caller waits until the work is done (``abandon_on_cancel=False``) and the
wait is shielded, so the caller's publish step right after the call runs as
well; the cancellation is delivered at the caller's next checkpoint.

``tests/test_blocking_calls.py`` keeps every ``trio.to_thread`` use in this
module and the known blocking calls out of async functions elsewhere.
"""
from __future__ import annotations

import weakref
from typing import Callable, TypeVar

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError

T = TypeVar("T")

_admin_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def run_blocking(fn: Callable[..., T], *args, abandon_on_cancel: bool = False) -> T:
    """Run ``fn(*args)`` in a worker thread and return its result (or raise its exception).

    Cancel-safe as described above.  ``abandon_on_cancel=True`` is only for
    read-only work on descriptors of its own (the scrub of closed segments):
    a cancelled caller then returns at once and the thread finishes unobserved.
    """
    if abandon_on_cancel:
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
    with trio.CancelScope(shield=True):
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=False)


async def run_stoppable(fn: Callable[..., T], *args, stop) -> T:
    """Run long file work (the log cleaner's clean) in a worker thread; a cancelled caller
    sets ``stop`` (a ``threading.Event`` the work polls) and returns at once.  Only for
    work on files of its own whose every intermediate state is one a crash could leave and
    the next start repairs (kwire.log.cleaner)."""
    try:
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
    except trio.Cancelled:
        stop.set()
        raise


async def run_detached(fn: Callable[..., T], *args) -> T:
    """Run a call to an external service (ZooKeeper through kazoo) in a worker thread.

    Such a call changes no state of this process, so a cancelled caller returns at once
    and the thread finishes unobserved (a shutdown never waits on an unreachable service).
    """
    return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)


async def run_abandonable(fn: Callable[..., T], *args, limiter: trio.CapacityLimiter) -> T:
    """Run code the broker does not trust to finish (a topic's record validator,
    kwire.schemas.validators) in a worker thread of ``limiter``'s own.  Such code changes no
    state of the broker, so a cancelled caller (its time box ran out) returns at once; the
    thread finishes unobserved and holds its ``limiter`` token until then, so a stuck function
    uses up that limiter, never the threads of the file work above (trio's default limiter)."""
    return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True, limiter=limiter)


async def delete_topic(logs, name: str):
    """``LogManager.delete_topic`` (its files removed off the Trio thread); the topic disappears
    from the table first, so no request reads it while its files go.  Raises KafkaApiError
    (UNKNOWN_TOPIC_OR_PARTITION)."""
    async with admin_lock(logs):
        topic = logs.detach_topic(name)
        await run_blocking(logs.remove_topic_files, topic)
        return topic


def admin_lock(logs) -> trio.Lock:
    """The lock serializing blocking writes of shared log metadata for ``logs`` (a LogManager):
    topic creation, growth and deletion, producer-id blocks, log-start-offset checkpoints.
    These are rare admin operations; one lock keeps two of them from writing the same files
    at once (a topic deleted while its partitions are being added would come back)."""
    lock = _admin_locks.get(logs)
    if lock is None:
        lock = _admin_locks[logs] = trio.Lock()
    return lock


async def create_topic(logs, name: str, num_partitions: int, configs: dict[str, str], *,
                       now_ms: int, internal: bool = False, exist_ok: bool = False, topic_id=None,
                       held=None):
    """``LogManager.create_topic`` with its files written off the Trio thread; the topic becomes
    visible only once whole.  Raises KafkaApiError(KAFKA_STORAGE_ERROR, or TOPIC_ALREADY_EXISTS
    unless ``exist_ok``: then the existing topic is returned).  Cancel-safe: a creation that
    started completes and is published.  ``held``: the partitions this broker replicates
    (None: all; kwire.log.manager)."""
    async with admin_lock(logs):
        if exist_ok and logs.get(name) is not None:
            return logs.get(name)
        log_dir = logs.pick_dir(name)
        topic = await run_blocking(lambda: logs.write_topic(name, num_partitions, configs, log_dir,
                                                            now_ms=now_ms, internal=internal,
                                                            topic_id=topic_id, held=held))
        return logs.publish_topic(topic)


async def next_producer_id(logs) -> int:
    """``LogManager.next_producer_id`` off the Trio thread (it persists a block of ids now and then).
    Only this call touches the producer-id counter, so it runs whole in the worker, one at a time."""
    async with admin_lock(logs):
        return await run_blocking(logs.next_producer_id)


async def add_partitions(logs, name: str, total: int, *, now_ms: int, held=None):
    """``LogManager.add_partitions`` with the new logs opened and the count persisted off the
    Trio thread; they become visible together.  Raises KafkaApiError(INVALID_PARTITIONS |
    UNKNOWN_TOPIC_OR_PARTITION).  Cancel-safe like ``create_topic``."""
    async with admin_lock(logs):
        topic = logs.get(name)
        if topic is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        new = await run_blocking(lambda: logs.write_partitions(topic, total, now_ms=now_ms, held=held))
        topic.partitions.extend(new)
        return topic
