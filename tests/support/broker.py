"""Run a kwire broker as a real process for client tests (no in-process shortcuts).

The launcher is the public ``kwire.testing.BrokerProcess``; re-exported here for the tests.
"""
from __future__ import annotations

from kwire.testing import BrokerProcess, BrokerStartError
from kwire.testing.process import free_port, wait_port

__all__ = ["BrokerProcess", "BrokerStartError", "free_port", "wait_port"]
