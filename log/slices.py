"""Record bytes a read returns: runs of whole batches in segment files, not yet copied.

``PartitionLog.read_slices`` answers a fetch with a ``RecordSlices``: where the
bytes are (segment, file position, size), computed with no await so they are
consistent with the log at that instant.  The caller then chooses how to move
them: ``to_bytes()`` copies them (small responses), ``open_files()`` gives
``FileSlice``s with their own duplicated descriptors for sendfile (so
retention may delete a segment while it is being sent).  Either must be done
before the next await, while the segments are certainly still open.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .segment import LogSegment


class FileSlice(NamedTuple):
    """``size`` bytes at ``position`` of the open file ``fd`` (a duplicate the reader owns)."""
    fd: int
    position: int
    size: int

    def close(self) -> None:
        os.close(self.fd)


class RecordSlices:
    """Runs of whole batches, in log order; empty at the end of the log."""

    __slots__ = ("_runs", "size")

    def __init__(self, runs: list[tuple[LogSegment, int, int]] | None = None):
        self._runs = runs or []
        self.size = sum(size for _segment, _position, size in self._runs)

    def __bool__(self) -> bool:
        return self.size > 0

    def __repr__(self) -> str:
        return f"RecordSlices({len(self._runs)} run(s), {self.size} bytes)"

    def to_bytes(self) -> bytes:
        """The bytes, read with pread.  Raises OSError."""
        return b"".join(segment.read(position, size) for segment, position, size in self._runs)

    def open_files(self) -> list[FileSlice]:
        """One ``FileSlice`` per run, each with a duplicated descriptor; close them after use.

        Raises OSError (nothing is left open then)."""
        opened: list[FileSlice] = []
        try:
            for segment, position, size in self._runs:
                opened.append(FileSlice(os.dup(segment.fileno()), position, size))
        except OSError:
            for piece in opened:
                piece.close()
            raise
        return opened
