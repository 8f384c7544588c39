"""kwire serve's allocator tuning (kwire.runtime.allocator)."""
from __future__ import annotations

import platform

from kwire.runtime import allocator


def test_kwire_serve_raises_the_allocator_thresholds_unless_the_environment_set_them(monkeypatch):
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    assert allocator.tune_for_broker() is (platform.libc_ver()[0] == "glibc")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert allocator.tune_for_broker() is False
