"""The coordinators behind Kafka's internal topics, sans-I/O, and those topics' record layouts.

* ``GroupCoordinator`` (``coordinator`` and the managers it holds): classic groups,
  KIP-848 consumer groups with their server-side assignors, mixed groups, committed
  offsets; records in ``__consumer_offsets`` (``records``, ``consumer_records``).
* ``ShareCoordinator`` (``share_coordinator``): KIP-932 share groups and the delivery state
  of their share-partitions; records in ``__consumer_offsets`` (``share_group_records``)
  and ``__share_group_state`` (``share_records``).
* ``TransactionCoordinator`` (``txn_coordinator``): KIP-98 transactions; records in
  ``__transaction_state`` (``txn_records``).
* ``internal_topics``: the one table of those topics and the broker keys that shape them.

Each coordinator takes requests as plain values with the time passed in (``now_ms``) and
returns its own result: the records to append and what the caller does next
(``GroupCoordinator``'s ``Outcome`` also carries completed parked responses and the next
timer); ``replay`` rebuilds it from its records.  States follow one table of valid
transitions per kind of group.  Nothing here reads a clock or touches a socket.  This
package exports the classic ``GroupCoordinator``'s API; import the others from their modules.
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
