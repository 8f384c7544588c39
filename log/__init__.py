"""The append-only log store: segments, indexes, recovery, retention.

The server uses ``PartitionLog`` (one per partition) and ``AppendResult``;
the other modules are the parts it is built from.
"""
from .config import LogConfig
from .partition import AppendResult, PartitionLog

__all__ = ["AppendResult", "LogConfig", "PartitionLog"]
