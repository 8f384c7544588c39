"""Sparse per-segment indexes: offset -> file position, and timestamp -> offset.

File layouts (big-endian, no header, entries only, ascending)::

    <base>.index       8 bytes per entry:  relative offset int32 | position int32
    <base>.timeindex  12 bytes per entry:  timestamp int64       | relative offset int32

Relative offsets are ``offset - segment base offset``.  An offset entry points
at the first byte of a batch whose base offset is that offset; a time entry
says "the largest timestamp seen so far in this segment is T, first reached in
the batch whose last offset is O" (Kafka's shallow offset of the max timestamp).
Entries are written about every ``index.interval.bytes`` of log, so a lookup
lands before the target and the caller walks a few batch headers forward.

Files are appended with plain writes (no preallocation or mmap) and loaded
lazily into ``array`` columns for bisect.  An index is never trusted after a
crash: recovery rebuilds it from the log; a file whose size is not a multiple
of the entry size, or whose entries go backwards, counts as untrusted too.

Appends are all-or-nothing: a failed or short write (ENOSPC) is cut back off
the file before the OSError is raised, and memory is changed only after the
file.  ``truncate_entries`` lets a segment undo the entries of a failed append.
"""
from __future__ import annotations

import array
import bisect
import errno
import os
import struct
import sys


class IndexCorrupt(Exception):
    """The index file cannot be trusted; rebuild it from the log."""


class _SparseIndex:
    """Two ascending columns (key, value) backed by an append-only file."""

    ENTRY: struct.Struct
    KEY_TYPE: str
    VALUE_TYPE: str

    def __init__(self, path: str):
        self.path = path
        self._keys: array.array | None = None      # None until loaded
        self._values: array.array | None = None
        self._fd: int | None = None

    # -- loading --------------------------------------------------------

    def _load(self) -> None:
        """Read the whole file into memory.  Raises IndexCorrupt if it is torn or unordered."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise IndexCorrupt(f"{self.path}: missing") from None
        size = self.ENTRY.size
        if len(data) % size:
            raise IndexCorrupt(f"{self.path}: size {len(data)} is not a multiple of {size}")
        keys, values = array.array(self.KEY_TYPE), array.array(self.VALUE_TYPE)
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        if any(keys[i] > keys[i + 1] for i in range(len(keys) - 1)):
            raise IndexCorrupt(f"{self.path}: entries out of order")
        self._keys, self._values = keys, values

    def ensure_loaded(self) -> None:
        """Load on first use.  Raises IndexCorrupt (the caller rebuilds)."""
        if self._keys is None:
            self._load()

    def is_sane(self) -> bool:
        """Cheap check without loading: the file exists and holds whole entries."""
        try:
            return os.stat(self.path).st_size % self.ENTRY.size == 0
        except FileNotFoundError:
            return False

    def last_entry_on_disk(self) -> tuple[int, int] | None:
        """The last entry read straight from the file (no full load), or None if empty/torn."""
        if self._keys is not None:
            return (self._keys[-1], self._values[-1]) if self._keys else None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if size == 0 or size % self.ENTRY.size:
                return None
            return self.ENTRY.unpack(os.pread(fd, self.ENTRY.size, size - self.ENTRY.size))
        finally:
            os.close(fd)

    # -- queries --------------------------------------------------------

    def floor(self, key: int) -> tuple[int, int] | None:
        """The entry with the largest key <= ``key``, or None.  Raises IndexCorrupt."""
        self.ensure_loaded()
        i = bisect.bisect_right(self._keys, key)
        return (self._keys[i - 1], self._values[i - 1]) if i else None

    def last(self) -> tuple[int, int] | None:
        """The last entry (loading the index), or None if empty.  Raises IndexCorrupt."""
        self.ensure_loaded()
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def __len__(self) -> int:
        self.ensure_loaded()
        return len(self._keys)

    def entries(self) -> list[tuple[int, int]]:
        self.ensure_loaded()
        return list(zip(self._keys, self._values))

    # -- writing --------------------------------------------------------

    def append(self, key: int, value: int) -> None:
        """Add an entry at the end (file, then memory).

        Raises IndexCorrupt if the index is not loadable, OSError if the write
        fails (the file is cut back to its previous size first; if that cut
        fails too, the OSError of the cut is raised from the write's).
        """
        self.ensure_loaded()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        entry = self.ENTRY.pack(key, value)
        try:
            if os.write(self._fd, entry) != len(entry):
                raise OSError(errno.ENOSPC, f"short write to {self.path}")
        except OSError:
            os.ftruncate(self._fd, len(self._keys) * self.ENTRY.size)
            raise
        self._keys.append(key)
        self._values.append(value)

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries (file and memory).  Raises OSError."""
        if self._fd is not None:
            os.ftruncate(self._fd, count * self.ENTRY.size)
        elif os.path.exists(self.path):
            os.truncate(self.path, count * self.ENTRY.size)
        if self._keys is not None:
            del self._keys[count:]
            del self._values[count:]

    def reset(self, entries: list[tuple[int, int]] | None = None) -> None:
        """Replace the file and memory contents with ``entries`` (used by rebuilds)."""
        self.close()
        entries = entries or []
        with open(self.path, "wb") as f:
            f.write(b"".join(self.ENTRY.pack(k, v) for k, v in entries))
        self._keys = array.array(self.KEY_TYPE, (k for k, _ in entries))
        self._values = array.array(self.VALUE_TYPE, (v for _, v in entries))

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_SparseIndex):
    """relative offset int32 -> file position int32."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"
    VALUE_TYPE = "i"
    assert ENTRY.size == 8


class TimeIndex(_SparseIndex):
    """timestamp int64 -> relative offset int32; timestamps strictly increase."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"
    VALUE_TYPE = "i"
    assert ENTRY.size == 12


assert array.array("i").itemsize == 4 and array.array("q").itemsize == 8, sys.platform
