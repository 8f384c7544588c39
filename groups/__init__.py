"""Consumer group coordinator: Kafka's classic group protocol, sans-I/O.

``GroupCoordinator`` takes requests as plain values with the time passed in
and returns an ``Outcome`` (records to append to ``__consumer_offsets``,
completed parked responses, the call's own result, the next timer);
``replay`` rebuilds it from those records.  Group states follow one table of
valid transitions (``VALID_PREVIOUS_STATES``).  Nothing here reads a clock or
touches a socket.
"""
from .coordinator import GroupCoordinator, partition_for
from .group import VALID_PREVIOUS_STATES, GroupState, InvalidTransition
from .records import GroupRecordError, parse_subscription
from .results import (
    GroupConfig, GroupDescription, JoinRequest, JoinResult, LeaveResult, OffsetCommit, Outcome, Record,
    SyncRequest, SyncResult,
)

__all__ = [
    "GroupConfig", "GroupCoordinator", "GroupDescription", "GroupRecordError", "GroupState", "InvalidTransition",
    "JoinRequest", "JoinResult", "LeaveResult", "OffsetCommit", "Outcome", "Record", "SyncRequest", "SyncResult",
    "VALID_PREVIOUS_STATES", "parse_subscription", "partition_for",
]
