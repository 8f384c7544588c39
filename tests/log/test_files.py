"""kwire.log.files: whole writes despite short ones, whole small files, quiet unlinks."""
import os

import pytest

from kwire.log import files


def test_writev_all_writes_every_buffer_in_order_across_calls(tmp_path, monkeypatch):
    real, calls = os.writev, []

    def short(fd, buffers):       # at most 5 bytes a call, as a signal or a full disk may cut it
        calls.append(len(buffers))
        return real(fd, [bytes(next(b for b in buffers if len(b)))[:5]])
    monkeypatch.setattr(os, "writev", short)
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        assert files.writev_all(fd, [b"abc", b"", bytearray(b"defghij"), memoryview(b"klm")]) == 13
        assert files.writev_all(fd, b"no list") == 7
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abcdefghijklmno list"
    assert len(calls) > 2


def test_write_file_replaces_and_read_file_reads_back(tmp_path):
    path = str(tmp_path / "snap")
    assert files.read_file(path) is None
    files.write_file(path, b"first, longer")
    files.write_file(path, memoryview(b"second"), sync=True)
    assert files.read_file(path) == b"second"


def test_a_failed_write_file_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "snap"

    def full(fd, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        files.write_file(str(path), b"data")
    assert not path.exists()


def test_unlink_quietly_and_fsync_file_accept_a_missing_file(tmp_path):
    path = tmp_path / "gone"
    files.unlink_quietly(str(path))
    files.fsync_file(str(path))
    path.write_bytes(b"x")
    files.fsync_file(str(path))
    files.unlink_quietly(str(path))
    assert not path.exists()
