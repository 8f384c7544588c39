"""The broker's log cleaner threads: which compacted log to clean next, and running each
clean off the Trio thread (kwire.log.cleaner does the work).

``log.cleaner.threads`` Trio tasks each loop: pick the log whose cleanable
range is due (dirty ratio at least ``min.cleanable.dirty.ratio``, or its
oldest dirty record older than ``max.compaction.lag.ms``), the dirtiest
first and never one another task is cleaning; run the clean in a worker
thread; swap the result in on the Trio thread; checkpoint in a worker
thread.  With nothing due a task sleeps ``log.cleaner.backoff.ms``.

Memory: the offset maps of all threads share ``log.cleaner.dedupe.buffer.
size`` (times ``log.cleaner.io.buffer.load.factor``), so each map holds at
most that / threads / MAP_ENTRY_BYTES keys.  I/O: every thread's reads and
writes share one ``log.cleaner.io.max.bytes.per.second`` throttle.

``reconfigure`` takes new values of all of these (dynamic broker configs, as Kafka's
LogCleaner): more threads start at once, fewer end as their current clean ends; the rest
apply from the next clean or wait.

A log whose clean fails (damaged batches, a full disk) is logged and left
alone for ten back-offs; its partition keeps serving.  At shutdown the
threads are told to stop and abandoned: whatever state their files are in is
one a crash could leave, which the next open completes or undoes.
"""
from __future__ import annotations

import logging
import time

import trio

from kwire.codecs.errors import KafkaApiError
from kwire.log import checkpoints, cleaner
from kwire.log.cleaner import CleanAborted, CleanerLimits, Throttler

from kwire.runtime.blocking import run_blocking, run_stoppable

logger = logging.getLogger("kwire.log.cleaner")

SWAP_RETRY_S = 0.05
FAILURE_BACKOFFS = 10


class CleanerService:
    def __init__(self, config, logs, clock):
        self.logs = logs
        self.clock = clock
        self.enabled = bool(config.value_of("log.cleaner.enable"))
        self.throttle = Throttler(config.value_of("log.cleaner.io.max.bytes.per.second"))
        self._limits(config)
        self._nursery: trio.Nursery | None = None
        self._running = 0                            # loop tasks started and not yet ended
        self._checkpoints: dict[str, int | None] = {}
        self._busy: set[str] = set()
        self._resting: dict[str, float] = {}       # path -> monotonic time it may be tried again
        self._wake = trio.Event()
        self.cleans = 0                              # completed cleans (tests and benches read it)

    def _limits(self, config) -> None:
        self.threads = int(config.value_of("log.cleaner.threads"))
        self.backoff_s = config.value_of("log.cleaner.backoff.ms") / 1000
        usable = config.value_of("log.cleaner.dedupe.buffer.size") * config.value_of(
            "log.cleaner.io.buffer.load.factor")
        self.max_entries = max(1, int(usable / max(1, self.threads) / cleaner.MAP_ENTRY_BYTES))
        self.throttle.set_rate(config.value_of("log.cleaner.io.max.bytes.per.second"))

    def reconfigure(self, config) -> None:
        """New ``log.cleaner.*`` values in force (``log.cleaner.enable`` needs a restart, as Kafka)."""
        self._limits(config)
        self._start_loops()
        self.wake()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if not self.enabled:
            return
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._start_loops()
            await trio.sleep_forever()

    def _start_loops(self) -> None:
        while self._nursery is not None and self._running < self.threads:
            self._nursery.start_soon(self._loop, self._running)
            self._running += 1

    def wake(self) -> None:
        """Look for work now (a topic's configuration changed, a test wants it)."""
        self._wake.set()

    async def _loop(self, index: int) -> None:
        try:
            await self._work(index)
        finally:
            self._running -= 1

    async def _work(self, index: int) -> None:
        while index < self.threads:       # fewer threads now: the highest-numbered ones end
            job = await self._pick()
            if job is None:
                with trio.move_on_after(self.backoff_s):
                    await self._wake.wait()
                self._wake = trio.Event() if self._wake.is_set() else self._wake
                continue
            topic, partition, plan = job
            if plan.log.path in self._busy:      # another thread took it while _pick awaited
                continue
            self._busy.add(plan.log.path)
            try:
                await self._clean(topic, partition, plan, index)
            finally:
                self._busy.discard(plan.log.path)

    async def _pick(self):
        """(topic, partition, plan) of the dirtiest due log, or None."""
        now, best = self.clock.now_ms(), None
        for topic, plog in list(self.logs.all_partitions()):
            if not plog.config.compacted or plog.path in self._busy or plog.offline:
                continue
            if self._resting.get(plog.path, 0) > time.monotonic():
                continue
            if plog.path not in self._checkpoints:
                await self._load_checkpoint(plog)
            plan = cleaner.plan(plog, self._checkpoints.get(plog.path), now)
            if plan is None or not plan.due:
                continue
            if best is None or plan.ratio > best[2].ratio:
                best = (topic.name, topic.partitions.index(plog), plan)
        return best

    async def _load_checkpoint(self, plog) -> None:
        try:
            self._checkpoints[plog.path] = await run_blocking(checkpoints.read_cleaner_offset, plog.path)
        except checkpoints.CheckpointError as exc:
            logger.warning("%s; cleaning from the log start", exc)
            self._checkpoints[plog.path] = None

    async def _clean(self, topic: str, partition: int, plan, index: int) -> None:
        limits = CleanerLimits(self.max_entries, self.throttle)
        name = f"{topic}-{partition}"
        try:
            result = await run_stoppable(cleaner.clean, plan, limits, stop=limits.stop)
            swapped = False
            while not swapped:
                if self.logs.get(topic) is None or plan.log.offline or plan.log not in self.logs.get(topic).partitions:
                    break
                swapped = plan.log.replace_segments(
                    result.groups, plan.truncations,
                    lambda: cleaner.pause_point(limits, plan.log.path, "replaced"))
                if not swapped and plan.log.truncations == plan.truncations and \
                        all(s in plan.log.segments for g, _n in result.groups for s in g):
                    await trio.sleep(SWAP_RETRY_S)            # a scrub or truncation holds the files
                    continue
                break
            if not swapped:
                await run_blocking(cleaner.discard, result)
                logger.info("cleaning %s abandoned: the log changed meanwhile", name)
                return
            await run_blocking(cleaner.finish, result)
            self._checkpoints[plan.log.path] = result.end_offset
            self.cleans += 1
            logger.info("cleaned %s: %s", name, result.summary())
        except CleanAborted:
            return
        except (OSError, KafkaApiError) as exc:
            why = exc.message if isinstance(exc, KafkaApiError) else str(exc)
            logger.warning("cleaning %s failed, trying again later: %s", name, why)
            self._resting[plan.log.path] = time.monotonic() + FAILURE_BACKOFFS * max(self.backoff_s, 1.0)
