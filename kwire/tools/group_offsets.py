"""The arithmetic of ``kwire groups reset-offsets``: no I/O, so every rule is tested without a broker.

Kafka's rules (kafka-consumer-groups.sh, GroupOffsetsResetter):

- ``--to-offset N`` and ``--shift-by N`` are clamped into [log start, log end], with a
  warning; ``--shift-by`` needs a committed offset on every partition it moves.
- ``--to-earliest`` / ``--to-latest`` are the log start / log end (ListOffsets -2 / -1).
- ``--to-current`` keeps the committed offset; a partition without one goes to the log end.
- ``--to-datetime`` / ``--by-duration`` take the first offset whose record timestamp is at or
  after the time (ListOffsets by timestamp); a partition with no such record goes to the
  log end, with Kafka's warning.
- ``--to-datetime`` reads ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``, ``+08``,
  ``+0800``, ``+08:00``); without a zone the time is UTC, as Kafka's Utils.getDateTime reads it.
- ``--by-duration`` reads Java's Duration format ``PnDTnHnMn.nS`` and goes back that far from now.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from kafka.structs import TopicPartition

SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "to_datetime", "by_duration", "shift_by")

_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?", re.ASCII)
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.ASCII | re.IGNORECASE)


def tp_name(tp: TopicPartition) -> str:
    """Kafka's spelling of a partition in messages: ``orders-3``."""
    return f"{tp.topic}-{tp.partition}"


def parse_datetime(text: str) -> int:
    """``--to-datetime`` -> epoch milliseconds.  Raises ValueError with the accepted formats.

    Kafka's formats plus what it should accept: seconds and the fraction may be left out
    (``2024-05-01T10:00``), and the fraction is a decimal fraction of a second."""
    m = _DATETIME.fullmatch(text.strip())
    if not m:
        raise ValueError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss with an optional "
                         "zone (Z, +08, +0800, +08:00); without a zone the time is UTC")
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    try:
        when = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0),
                           tzinfo=_zone(zone))
    except ValueError as exc:
        raise ValueError(f"--to-datetime {text!r}: {exc}") from None
    millis = int((fraction or "0").ljust(9, "0")[:3])
    return int(when.timestamp()) * 1000 + millis


def _zone(zone: str | None) -> dt.timezone:
    if zone in (None, "Z"):
        return dt.timezone.utc
    digits = zone[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:] or 0)
    if minutes >= 24 * 60:
        raise ValueError(f"zone {zone} is out of range")
    return dt.timezone(dt.timedelta(minutes=-minutes if zone[0] == "-" else minutes))


def parse_duration(text: str) -> int:
    """``--by-duration`` in Java's Duration format (``P1DT2H30M``, ``PT45.5S``) -> milliseconds.
    Raises ValueError."""
    m = _DURATION.fullmatch(text.strip())
    if not m or not any(m.group(i) for i in (2, 3, 4, 5)) or text.strip().upper().endswith("T"):
        raise ValueError(f"--by-duration {text!r}: expected an ISO-8601 duration such as P1DT2H30M or PT15M")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    millis = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
    whole = int(seconds or 0)
    part = int((fraction or "0").ljust(9, "0")[:3])
    millis += whole * 1000 + (-part if (seconds or "").startswith("-") else part)
    return -millis if sign == "-" else millis


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """``--topic`` as Kafka reads it: ``orders`` (every partition) or ``orders:0,2``.
    Raises ValueError with Kafka's messages."""
    if ":" not in arg:
        return arg, None
    parts = arg.split(":")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise ValueError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    partitions = []
    for p in parts[1].split(","):
        try:
            partitions.append(int(p))
        except ValueError:
            raise ValueError(f"Invalid partition '{p}' specified in topic arg '{arg}'") from None
    return parts[0], partitions


@dataclass(frozen=True)
class Scenario:
    """One reset specification: ``kind`` in SCENARIOS; ``value`` the offset, shift or time (ms)."""
    kind: str
    value: int | None = None

    @property
    def timestamp_lookup(self) -> bool:
        """True when the targets come from ListOffsets by timestamp (``value`` is that time)."""
        return self.kind in ("to_datetime", "by_duration")


@dataclass
class Plan:
    """New offsets per partition, and the warnings Kafka prints on the way."""
    offsets: dict[TopicPartition, int]
    warnings: list[str]


def plan_offsets(scenario: Scenario, partitions: Sequence[TopicPartition], *,
                 committed: Mapping[TopicPartition, int], log_start: Mapping[TopicPartition, int],
                 log_end: Mapping[TopicPartition, int],
                 by_timestamp: Mapping[TopicPartition, int] | None = None) -> Plan:
    """The new committed offset of each partition under ``scenario``.

    ``by_timestamp`` holds ListOffsets' answer for a timestamp scenario (-1: no record at or
    after the time).  Raises ValueError for ``shift_by`` on a partition with no committed offset.
    """
    warnings: list[str] = []
    out: dict[TopicPartition, int] = {}
    for tp in partitions:
        kind = scenario.kind
        if kind == "to_earliest":
            out[tp] = log_start[tp]
        elif kind == "to_latest":
            out[tp] = log_end[tp]
        elif kind == "to_current":
            out[tp] = committed.get(tp, log_end[tp])
        elif scenario.timestamp_lookup:
            found = (by_timestamp or {}).get(tp, -1)
            if found < 0:
                warnings.append(f"Warn: Partition {tp.partition} from topic {tp.topic} is empty. "
                                "Falling back to latest known offset.")
                found = log_end[tp]
            out[tp] = found
        else:
            if kind == "shift_by":
                if tp not in committed:
                    raise ValueError(f"Cannot shift offset for partition {tp_name(tp)} since there is "
                                     "no current committed offset")
                wanted = committed[tp] + scenario.value
            else:
                wanted = scenario.value
            out[tp] = _clamp(tp, wanted, log_start[tp], log_end[tp], warnings)
    return Plan(out, warnings)


def _clamp(tp: TopicPartition, wanted: int, start: int, end: int, warnings: list[str]) -> int:
    if wanted > end:
        warnings.append(f"New offset ({wanted}) is higher than latest offset for topic partition "
                        f"{tp_name(tp)}. Value will be set to {end}.")
        return end
    if wanted < start:
        warnings.append(f"New offset ({wanted}) is lower than earliest offset for topic partition "
                        f"{tp_name(tp)}. Value will be set to {start}.")
        return start
    return wanted
