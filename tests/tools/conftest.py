"""What the operator-command tests share: a module's embedded kwire broker (modules that need
other server properties define their own ``broker`` fixture)."""
from __future__ import annotations

import pytest

import kwire.testing


@pytest.fixture(scope="module")
def broker():
    """An embedded kwire broker (num.partitions=1) for one test module."""
    with kwire.testing.broker(partitions=1) as b:
        yield b
