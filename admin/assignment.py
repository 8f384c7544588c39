"""Replica assignment for new topics and partitions, as Kafka's AdminUtils.assignReplicasToBrokers.

Kafka's rules, which this module follows:

* Brokers are taken in id order.  No broker has a rack: partition ``p``'s first
  replica (its preferred leader) is broker ``(p + start_index) % n``; its j-th
  follower is ``first + 1 + (shift + j) % (n - 1)``, where ``shift`` starts at
  the start index and grows by one every ``n`` partitions, so later rounds do
  not repeat the first round's follower sequences.  Leaders spread evenly.
* Every broker has a rack: the same round-robin over a rack-alternated list
  (racks sorted by name, each rack's brokers by id, one from each rack in
  turn), and a follower candidate is skipped while its rack already holds a
  replica and some rack holds none, or it already holds a replica and some
  broker holds none.  With at least as many racks as replicas, a partition's
  replicas are on distinct racks.
* Some brokers with a rack and some without: refused (Kafka's
  AdminOperationException, which its API reports as UNKNOWN_SERVER_ERROR).
* The start index is random unless fixed, so topics do not all put partition 0
  on the same broker.  Randomness is passed in (``rng``); without one it comes
  from ``os.urandom`` because this layer imports no ``random`` module state.
"""
from __future__ import annotations

import os
from typing import Mapping, Protocol

from kwire.codecs.errors import ErrorCode, KafkaApiError


class RandomSource(Protocol):
    """What assignment needs of ``random.Random``."""

    def randrange(self, stop: int) -> int: ...


def assign_replicas(brokers: Mapping[int, str | None], num_partitions: int, replication_factor: int, *,
                    start_index: int | None = None, start_partition: int | None = None,
                    existing: Mapping[int, tuple[int, ...]] | None = None,
                    rng: RandomSource | None = None) -> dict[int, tuple[int, ...]]:
    """Replicas for partitions ``start_partition .. start_partition + num_partitions - 1``.

    ``brokers`` maps live broker id -> rack (None: no rack).  ``start_index``
    None draws one from ``rng``.  For CreatePartitions pass ``existing`` (the
    topic's current assignment): new partitions are numbered after it and, as in
    Kafka, start at the broker leading the existing partition 0 unless
    ``start_index`` is given.

    Raises KafkaApiError: INVALID_PARTITIONS (num_partitions <= 0),
    INVALID_REPLICATION_FACTOR (rf <= 0 or more than the brokers), and
    UNKNOWN_SERVER_ERROR when only some brokers have a rack.
    """
    if num_partitions <= 0:
        raise KafkaApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"Replication factor: {replication_factor} larger than available brokers: "
                            f"{len(brokers)}.")
    ids = sorted(brokers)
    racked = [b for b in ids if brokers[b] is not None]
    if racked and len(racked) < len(ids):
        raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR,
                            "Not all brokers have rack information for replica rack aware assignment.")
    if existing:
        if start_partition is None:
            start_partition = len(existing)
        if start_index is None and existing.get(0):
            first_leader = existing[0][0]
            start_index = next((i for i, b in enumerate(ids) if b >= first_leader), 0)
    start_partition = max(0, start_partition or 0)
    if start_index is not None:
        shift = start_index
    else:
        start_index, shift = _random_index(len(ids), rng), _random_index(len(ids), rng)
    if racked:
        return _rack_aware(dict(brokers), num_partitions, replication_factor, start_index, shift, start_partition)
    return _rack_unaware(ids, num_partitions, replication_factor, start_index, shift, start_partition)


def _random_index(n: int, rng: RandomSource | None) -> int:
    if rng is not None:
        return rng.randrange(n)
    return int.from_bytes(os.urandom(8), "big") % n


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    """Follower ``j`` of a partition led by list index ``first``: never ``first`` itself."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_unaware(ids: list[int], num_partitions: int, rf: int, start_index: int, shift: int,
                  start_partition: int) -> dict[int, tuple[int, ...]]:
    n = len(ids)
    out = {}
    for partition in range(start_partition, start_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        out[partition] = (ids[first], *(ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)))
    return out


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered one per rack in turn (racks by name, brokers by id):
    {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"} -> [0, 3, 1, 5, 4, 2]."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def _rack_aware(racks: dict[int, str], num_partitions: int, rf: int, start_index: int, shift: int,
                start_partition: int) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated(racks)
    n, num_racks = len(arranged), len(set(racks.values()))
    out = {}
    for partition in range(start_partition, start_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [arranged[first]]
        racks_used, k = {racks[arranged[first]]}, 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = racks[broker]
                # prefer a rack without a replica, then a broker without one; only when every
                # rack (broker) has one may a second replica go to the same rack (broker)
                if (rack not in racks_used or len(racks_used) == num_racks) and \
                        (broker not in replicas or len(replicas) == n):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        out[partition] = tuple(replicas)
    return out
