"""Fetch (1): byte slices of the log, long-polled until min_bytes or max_wait_ms.

A client's max_wait_ms is capped by the broker's ``fetch.max.wait.ms``, and a
parked fetch ends early when its client closes the connection.

No fetch sessions: kwire answers session id 0, which every client accepts as
"full fetch requests only".  Every answer carries the last stable offset (the
high watermark, or the first offset of the oldest open transaction if lower).
A read_committed fetch (isolation_level 1) stops there and lists the aborted
transactions of the range it read, which the client uses to skip their
records; control batches are returned as they are (the clients drop them).
"""
from __future__ import annotations

import trio

from kwire.codecs.errors import CloseConnection, ErrorCode, KafkaApiError
from kwire.log.slices import RecordSlices

from ..registry import handles

# Record bytes below this size are copied into the response; larger runs are
# streamed from the segment files with sendfile.
SENDFILE_MIN_BYTES = 16 * 1024


class FileRecords:
    """Record bytes to stream from segment files; ``close`` releases the descriptors."""

    def __init__(self, slices):
        self.slices = slices
        self.size = sum(s.size for s in slices)

    def close(self) -> None:
        for s in self.slices:
            s.close()


def check_leader_epoch(plog, current_leader_epoch: int) -> None:
    """Raises KafkaApiError(FENCED_LEADER_EPOCH | UNKNOWN_LEADER_EPOCH) on a mismatch."""
    if current_leader_epoch is None or current_leader_epoch < 0:
        return
    if current_leader_epoch < plog.leader_epoch:
        raise KafkaApiError(ErrorCode.FENCED_LEADER_EPOCH)
    if current_leader_epoch > plog.leader_epoch:
        raise KafkaApiError(ErrorCode.UNKNOWN_LEADER_EPOCH)


def empty_partition(index: int, code: ErrorCode, plog=None) -> dict:
    return {"partition_index": index, "error_code": int(code),
            "high_watermark": plog.high_watermark if plog else -1,
            "last_stable_offset": plog.last_stable_offset if plog else -1,
            "log_start_offset": plog.log_start_offset if plog else -1,
            "aborted_transactions": None if plog is None else [], "preferred_read_replica": -1,
            "records": b""}


def check_serving(ctx, topic_name: str, partition: int, plog, current_leader_epoch: int | None,
                  replica_id: int = -1, fetch_offset: int = -1, log_start_offset: int = -1) -> int | None:
    """Whether this broker serves reads of the partition; raises KafkaApiError.

    Single node: the leader epoch check alone.  Cluster: leadership too
    (kwire.replication), and a follower's fetch records its log end offset;
    returns the offset a read may go up to (None = the high watermark; a
    follower reads up to the log end offset)."""
    cluster = ctx.broker.cluster
    if cluster is None:
        check_leader_epoch(plog, current_leader_epoch)
        return None
    tp = (topic_name, partition)
    leader = cluster.replicas.check_leader(tp, plog, current_leader_epoch)
    if replica_id < 0:
        return None
    cluster.replicas.on_follower_fetch(tp, leader, replica_id, fetch_offset, log_start_offset)
    return plog.log_end_offset


def read_partition(ctx, topic_name: str, p, budget: int, first: bool,
                   replica_id: int = -1, read_committed: bool = False) -> tuple[dict, int]:
    plog = ctx.broker.logs.partition(topic_name, p.partition)
    if plog is None:
        return empty_partition(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), 0
    try:
        max_offset = check_serving(ctx, topic_name, p.partition, plog, p.current_leader_epoch,
                                   replica_id, p.fetch_offset, getattr(p, "log_start_offset", -1))
        if read_committed and replica_id < 0:
            max_offset = plog.last_stable_offset
        if budget > 0 or first:
            slices = plog.read_slices(p.fetch_offset, min(p.partition_max_bytes, max(budget, 0)),
                                      min_one_batch=first, max_offset=max_offset)
        else:
            slices = RecordSlices()
            if not plog.log_start_offset <= p.fetch_offset <= plog.log_end_offset:
                raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE)
    except KafkaApiError as exc:
        return empty_partition(p.partition, exc.code, plog), 0
    entry = empty_partition(p.partition, ErrorCode.NONE, plog)
    entry["records"] = slices
    if read_committed and slices:
        entry["aborted_transactions"] = [
            {"producer_id": producer_id, "first_offset": first_offset}
            for producer_id, first_offset in plog.aborted_transactions(p.fetch_offset, max_offset)]
    return entry, slices.size


def materialize(responses: list[dict]) -> None:
    """Turn each partition's record slices into bytes or, when large, files for sendfile.

    Runs with no await after the slices were computed, so they are consistent."""
    for topic in responses:
        for entry in topic["partitions"]:
            slices = entry["records"]
            if not slices:
                entry["records"] = b""
            elif slices.size < SENDFILE_MIN_BYTES:
                entry["records"] = slices.to_bytes()
            else:
                entry["records"] = FileRecords(slices.open_files())


def build_response(ctx, request) -> tuple[list[dict], int, bool]:
    budget = request.max_bytes if ctx.api_version >= 3 else 0x7FFFFFFF
    replica_id = request.replica_id if ctx.api_version < 15 else -1
    read_committed = getattr(request, "isolation_level", 0) == 1
    total = 0
    errors = False
    responses = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            entry, size = read_partition(ctx, topic.topic, p, budget - total, total == 0, replica_id,
                                         read_committed)
            total += size
            errors = errors or entry["error_code"] != 0
            parts.append(entry)
        responses.append({"topic": topic.topic, "partitions": parts})
    return responses, total, errors


async def park(ctx, partitions, deadline: float) -> None:
    """Wait for an append to one of ``partitions`` or for ``deadline`` (trio clock).

    Raises CloseConnection when the client closes its end meanwhile, so an
    abandoned long poll releases its socket at once instead of at the
    deadline.  Cancel-safe: nothing is held while parked.
    """
    gone = False
    async with trio.open_nursery() as nursery:
        async def watch_peer() -> None:
            nonlocal gone
            await ctx.wait_peer_closed()
            gone = True
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_peer)
        await ctx.broker.wait_appended(partitions, deadline)
        nursery.cancel_scope.cancel()
    if gone:
        raise CloseConnection("the client left during a long-poll fetch", quiet=True)


@handles(1, 4, 12)
async def handle_fetch(ctx, request):
    if getattr(request, "session_id", 0) not in (0, None) and ctx.api_version >= 7:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                "session_id": 0, "responses": []}
    max_wait_ms = min(max(request.max_wait_ms, 0), ctx.broker.config.value_of("fetch.max.wait.ms"))
    deadline = trio.current_time() + max_wait_ms / 1000
    while True:
        responses, total, errors = build_response(ctx, request)
        if total >= max(request.min_bytes, 1) or errors or trio.current_time() >= deadline:
            break
        await park(ctx, [(t.topic, p.partition) for t in request.topics for p in t.partitions], deadline)
    materialize(responses)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
