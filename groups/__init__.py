"""Consumer group coordinator: Kafka's classic group protocol, sans-I/O.

``GroupCoordinator`` takes requests as plain values with the time passed in
and returns an ``Outcome`` (completed parked responses, records to append to
``__consumer_offsets``, the call's own result); ``replay`` rebuilds it from
those records.  Nothing here reads a clock or touches a socket.
"""
from .coordinator import GroupCoordinator, partition_for
from .group import GroupState
from .records import GroupRecordError, parse_subscription
from .results import (
    GroupConfig, GroupDescription, JoinResult, LeaveResult, OffsetCommit, Outcome, Record, SyncResult,
)

__all__ = [
    "GroupConfig", "GroupCoordinator", "GroupDescription", "GroupRecordError", "GroupState", "JoinResult",
    "LeaveResult", "OffsetCommit", "Outcome", "Record", "SyncResult", "parse_subscription", "partition_for",
]
