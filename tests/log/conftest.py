"""Fixtures for log tests."""
from __future__ import annotations

import pytest

from kwire.log.config import LogConfig
from kwire.log.partition import PartitionLog


@pytest.fixture
def open_log(tmp_path):
    """open_log(recover=False, now_ms=0, **config) -> PartitionLog in tmp_path/t-0."""
    opened = []

    def _open(*, recover=False, now_ms=0, config=None, **overrides):
        log = PartitionLog.open(str(tmp_path / "t-0"), config or LogConfig(**overrides),
                                now_ms=now_ms, recover=recover)
        opened.append(log)
        return log
    yield _open
    for log in opened:
        for segment in log.segments:
            segment.close()


@pytest.fixture
def open_named(tmp_path):
    """open_named(name="t-0", recover=False, now_ms=0, **config) -> PartitionLog in tmp_path/name,
    asserted online."""
    opened = []

    def _open(name="t-0", *, recover=False, now_ms=0, **overrides):
        log = PartitionLog.open(str(tmp_path / name), LogConfig(**overrides), now_ms=now_ms,
                                recover=recover)
        assert not log.offline, log.health.offline_reason
        opened.append(log)
        return log
    yield _open
    for log in opened:
        for segment in log.segments:
            segment.close()
