"""Whether a partition's storage can be trusted, and how its failures are reported.

Kafka takes a whole log dir offline on an I/O error; kwire does it per
partition (each partition is a directory of its own): an offline partition
answers KAFKA_STORAGE_ERROR to every produce, fetch and offset lookup, is
reported in Metadata, and stays offline until the broker restarts, while
every other partition keeps being served.  A partition goes offline when its
files no longer match what the broker believes (a failed append that could
not be cut back, a failed fsync), when stored bytes fail a check (corruption
at rest), or when a checkpoint it depends on is malformed.

A write failure that was undone (typically ENOSPC) leaves the partition
online: producers get KAFKA_STORAGE_ERROR and succeed again once space is
freed.  Such failures are logged at ERROR, the first at once and then one
line with a count at most every ``REPORT_INTERVAL_MS`` per partition, so a
full disk cannot flood the log.
"""
from __future__ import annotations

import logging

from kwire.codecs.errors import ErrorCode, KafkaApiError

logger = logging.getLogger("kwire.log.storage")

REPORT_INTERVAL_MS = 10_000


class StorageHealth:
    """Offline state and rate-limited failure reports of one partition (``name``)."""

    def __init__(self, name: str):
        self.name = name
        self.offline_reason: str | None = None
        self._unreported = 0            # failures since the last ERROR line
        self._since_success = 0         # failures since the last successful write
        self._last_report_ms: int | None = None

    @property
    def offline(self) -> bool:
        return self.offline_reason is not None

    def check_online(self) -> None:
        """Raises KafkaApiError(KAFKA_STORAGE_ERROR) if the partition is offline."""
        if self.offline_reason is not None:
            raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR,
                                f"{self.name} is offline: {self.offline_reason}")

    def take_offline(self, reason: str) -> None:
        """Mark offline (once) and say so at ERROR level."""
        if self.offline_reason is not None:
            return
        self.offline_reason = reason
        logger.error("%s: partition taken offline, answering KAFKA_STORAGE_ERROR until the "
                     "broker restarts: %s", self.name, reason)

    def write_failed(self, message: str, now_ms: int) -> None:
        """Report a failed (undone) write at ERROR, rate-limited."""
        self._unreported += 1
        self._since_success += 1
        if self._last_report_ms is not None and now_ms - self._last_report_ms < REPORT_INTERVAL_MS:
            return
        if self._unreported > 1:
            logger.error("%s: %d storage errors in the last %d ms, latest: %s", self.name,
                         self._unreported, now_ms - self._last_report_ms, message)
        else:
            logger.error("%s: storage error: %s", self.name, message)
        self._unreported, self._last_report_ms = 0, now_ms

    def write_succeeded(self) -> None:
        if self._since_success:
            logger.warning("%s: writes succeed again after %d storage error(s)",
                           self.name, self._since_success)
            self._since_success = self._unreported = 0
            self._last_report_ms = None
