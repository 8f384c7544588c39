"""Per-partition log settings, already resolved from broker defaults and topic overrides."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824          # segment.bytes / log.segment.bytes
    segment_ms: int = 604800000              # segment.ms / log.roll.ms (7 days)
    retention_ms: int = 604800000            # retention.ms / log.retention.*; -1 = forever
    retention_bytes: int = -1                # retention.bytes / log.retention.bytes; -1 = no limit
    flush_interval_messages: int = 9223372036854775807  # flush.messages; Long.MAX = leave it to the OS
    flush_interval_ms: int = 9223372036854775807        # flush.ms
    index_interval_bytes: int = 4096         # index.interval.bytes
    max_message_bytes: int = 1048588         # max.message.bytes / message.max.bytes
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    cleanup_policy: str = "delete"           # "delete", "compact" or "compact,delete"
    message_timestamp_before_max_ms: int = 9223372036854775807  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 9223372036854775807   # message.timestamp.after.max.ms
    min_insync_replicas: int = 1             # min.insync.replicas (acks=all in a cluster)
    writeback_interval_bytes: int = 8388608  # log.writeback.interval.bytes (broker only, kwire)
    page_cache_keep_bytes: int = 67108864    # log.page.cache.keep.bytes (broker only, kwire)
    delete_retention_ms: int = 86400000      # delete.retention.ms: how long tombstones stay
    min_cleanable_dirty_ratio: float = 0.5   # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0           # min.compaction.lag.ms
    max_compaction_lag_ms: int = 9223372036854775807  # max.compaction.lag.ms
    producer_id_expiration_ms: int = 86400000  # producer.id.expiration.ms (broker only)

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def roll_ms(self) -> int:
        """segment.ms, or max.compaction.lag.ms when smaller on a compacted topic (Kafka's
        LogConfig.maxSegmentMs): the active segment is never cleaned, so it must roll."""
        if self.compacted and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms
