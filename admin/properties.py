"""``java.util.Properties`` text and ``--override key=value`` items, parsed as Kafka does.

Pure functions over strings; errors are ``ConfigError``.
"""
from __future__ import annotations

import re
from typing import Iterable

from .config_def import ConfigError

_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``server.properties`` text the way ``java.util.Properties.load`` does.

    ``#``/``!`` comment lines, blank lines, ``key=value``, ``key: value`` and
    ``key value``, backslash line continuations (leading whitespace of the next
    line dropped), ``\\uXXXX`` and other escapes; a later duplicate key wins.
    Values keep trailing whitespace (typed parsing trims it, as Kafka does).
    Raises ConfigError on a malformed ``\\uXXXX`` escape.
    """
    props: dict[str, str] = {}
    lines = _NATURAL_LINES.split(text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_WHITESPACE)
                i += 1
        key, value = _split_key_value(line)
        props[_unescape(key, i)] = _unescape(value, i)
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    escaped = False
    end = len(line)
    value_start = len(line)
    has_separator = False
    for pos, ch in enumerate(line):
        if not escaped and ch in "=:":
            end, value_start, has_separator = pos, pos + 1, True
            break
        if not escaped and ch in _WHITESPACE:
            end, value_start = pos, pos + 1
            break
        escaped = (ch == "\\") and not escaped
    while value_start < len(line):
        ch = line[value_start]
        if ch not in _WHITESPACE:
            if has_separator or ch not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:end], line[value_start:]


def _unescape(text: str, line_no: int) -> str:
    if "\\" not in text:
        return text
    out = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        pos += 1
        if ch != "\\" or pos == len(text):
            out.append(ch if ch != "\\" else "")
            continue
        ch = text[pos]
        pos += 1
        if ch == "u":
            digits = text[pos:pos + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigError(f"Malformed \\uXXXX escape in properties near line {line_no}: \\u{digits}")
            out.append(chr(int(digits, 16)))
            pos += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    return "".join(out)


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """``["key=value", ...]`` (kafka-server-start's ``--override``) to a dict; later items win.

    Raises ConfigError for an item without ``=``.
    """
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override needs key=value, got {item!r}")
        result[key.strip()] = value
    return result
