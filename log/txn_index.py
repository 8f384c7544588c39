"""The aborted-transaction index of one segment: Kafka's ``.txnindex`` file.

File ``<base offset, 20 digits>.txnindex`` beside the segment's ``.log``, a
sequence of 34-byte entries (big-endian), one per transaction aborted by an
ABORT marker stored in that segment, in marker order::

    offset  size  field
         0     2  version             int16  0
         2     8  producer_id         int64
        10     8  first_offset        int64  the transaction's first batch
        18     8  last_offset         int64  the ABORT marker's offset
        26     8  last_stable_offset  int64  the LSO right after the marker

The file is created on the first entry (a segment without aborted
transactions has none, as in Kafka).  Invariants: last offsets ascend; the
file is a whole number of entries.  Entries are read once and kept in
memory (aborted transactions are few).

Durability: ``append`` only writes to the page cache; ``flush`` (with the
segment's) fsyncs the file, and the directory once after creating it, so
the recovery point never lies past an entry that could be lost.  After a
crash the partition rebuilds the index of every segment recovery checked
(kwire.log.partition).
"""
from __future__ import annotations

import dataclasses
import os
import struct
import threading

from .checkpoints import fsync_directory
from .files import unlink_quietly, write_all

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size
assert ENTRY_SIZE == 34
VERSION = 0


class TxnIndexCorrupt(Exception):
    """The file is not a whole number of version-0 entries with ascending last offsets."""


@dataclasses.dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry: Kafka's AbortedTxn."""
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The ``.txnindex`` file of one segment.  Appends on the owner thread; ``flush`` may
    run in a worker thread."""

    def __init__(self, path: str):
        self.path = path
        self._entries: list[AbortedTxn] | None = None    # None: not read yet
        self._fd: int | None = None
        self._new_file = False      # created since the last flush: the directory needs a sync
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.entries())

    def is_sane(self) -> bool:
        """True if the file is missing or a whole number of entries (a cheap trust check)."""
        try:
            return os.stat(self.path).st_size % ENTRY_SIZE == 0
        except FileNotFoundError:
            return True

    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (read from the file once).  Raises TxnIndexCorrupt, OSError."""
        if self._entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            self._entries = _decode(data, self.path)
        return self._entries

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries with last_offset >= ``fetch_offset`` and first_offset < ``upper_bound``, and
        whether the search is complete (an entry's last stable offset reached ``upper_bound``,
        so no later segment can hold a match): Kafka's collectAbortedTxns.  Raises as
        ``entries``."""
        found = []
        for txn in self.entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def append(self, txns: list[AbortedTxn]) -> None:
        """Write ``txns`` at the end (one write; page cache only).  All-or-nothing: raises
        OSError with the file cut back (or TxnIndexCorrupt, ValueError for last offsets
        that do not ascend: nothing written)."""
        if not txns:
            return
        entries = self.entries()
        last = entries[-1].last_offset if entries else -1
        for txn in txns:
            if txn.last_offset <= last:
                raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} "
                                 f"appended after one ending at {last}")
            last = txn.last_offset
        fd = self._file()
        size = len(entries) * ENTRY_SIZE
        try:
            write_all(fd, b"".join(_encode(txn) for txn in txns))
        except OSError:
            os.ftruncate(fd, size)     # raises OSError itself if it cannot: the caller's undo
            raise
        entries.extend(txns)

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries (undo of a failed append).  Raises OSError."""
        entries = self.entries()
        if count < len(entries):
            os.ftruncate(self._file(), count * ENTRY_SIZE)
            del entries[count:]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset`` (Kafka's TransactionIndex.truncateTo).
        Nothing fsynced.  Raises OSError, TxnIndexCorrupt."""
        entries = self.entries()
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        self.truncate_entries(keep)

    def reset(self, txns: list[AbortedTxn] = ()) -> None:
        """Replace the whole file with ``txns`` (a rebuild); no file if there are none.
        Nothing fsynced.  Raises OSError."""
        self.close()
        unlink_quietly(self.path)
        self._entries = []
        self.append(list(txns))

    def flush(self) -> None:
        """fsync the file (and the directory after creating it).  Safe in a worker thread."""
        with self._lock:
            if self._fd is None:
                return
            os.fsync(self._fd)
            if self._new_file:
                fsync_directory(os.path.dirname(self.path) or ".")
                self._new_file = False

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def delete(self) -> None:
        """Close and unlink the file."""
        self.close()
        unlink_quietly(self.path)
        self._entries = []

    def _file(self) -> int:
        fd = self._fd
        if fd is not None:      # no lock: an append must not wait for a flush's fsync
            return fd
        with self._lock:
            if self._fd is None:
                self._new_file = self._new_file or not os.path.exists(self.path)
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            return self._fd


def _encode(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                      txn.last_stable_offset)


def _decode(data: bytes, path: str) -> list[AbortedTxn]:
    if len(data) % ENTRY_SIZE:
        raise TxnIndexCorrupt(f"{path}: {len(data)} bytes is not a whole number of "
                              f"{ENTRY_SIZE}-byte entries")
    entries, last = [], -1
    for position in range(0, len(data), ENTRY_SIZE):
        version, *fields = ENTRY.unpack_from(data, position)
        txn = AbortedTxn(*fields)
        if version != VERSION or txn.last_offset <= last:
            raise TxnIndexCorrupt(f"{path}: bad entry at file position {position} (version "
                                  f"{version}, last offset {txn.last_offset} after {last})")
        entries.append(txn)
        last = txn.last_offset
    return entries
