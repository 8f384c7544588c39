"""Messages: browse a partition (from an offset, a time, the beginning or the end), filter it,
decode its records, follow it live, and produce to it.

    GET  /messages?topic=T&partition=P&start=end|beginning|offset|timestamp&offset=N
                  &timestamp=ISO-or-epoch-ms&limit=50&key=K&text=S&path=$.a.b==1&tail=1
    GET  /messages/tail?...&after=N     the live tail's poll: rows after offset N (htmx fragment)
    POST /messages/produce              topic, partition (optional), key, value, headers ``k: v`` lines

``start`` defaults to ``offset`` when an offset is given, ``timestamp`` when a time is, else
``end`` (the newest ``limit`` records), so the topics page links ``/messages?topic=T&partition=P``.
The reads and the produce are blocking Kafka calls (``kwire.console.browse``), run in worker
threads and bounded in time; any failure is shown on the page with Kafka's error name.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from kwire.console import browse
from kwire.console.access import error_text
from kwire.console.browse import DEFAULT_LIMIT, MAX_LIMIT, TAIL_KEEP, Query
from kwire.console.decode import RegistryDecoder
from kwire.console.jsonpath import FilterSyntaxError, parse as parse_filter
from kwire.console.reader import SCAN_RECORDS, ReadError

NAV = [("Messages", "/messages")]
STARTS = ("end", "beginning", "offset", "timestamp")
TAIL_INTERVAL_MS = 1500
MAX_FIELD = 1_000_000               # characters of a produced key, value or headers field
logger = logging.getLogger("kwire.console")


def parse_time(text: str) -> int:
    """Epoch milliseconds of ``text``: digits are epoch ms; otherwise ISO 8601 (a time without
    a zone is UTC).  Raises ValueError."""
    text = text.strip()
    if re.fullmatch(r"\d{1,16}", text):
        return int(text)
    at = dt.datetime.fromisoformat(text.replace(" ", "T", 1) if "T" not in text else text)
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.timezone.utc)
    return int(at.timestamp() * 1000)


INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


def _whole(text: str, what: str, errors: list[str], low: int = 0, high: int = INT64_MAX) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        errors.append(f"{what} must be a whole number, not {text[:40]!r}.")
        return None
    if not low <= value <= high:
        errors.append(f"{what} must be between {low} and {high}.")
        return None
    return value


def parse_query(params) -> Query:
    """The Query of the page's parameters; mistakes are in ``query.errors``."""
    q = Query(topic=params.get("topic", "").strip(), key=params.get("key", ""), text=params.get("text", ""),
              path=params.get("path", "").strip(), timestamp=params.get("timestamp", "").strip())
    q.partition = _whole(params.get("partition", ""), "The partition", q.errors, high=INT32_MAX) or 0
    q.offset = _whole(params.get("offset", ""), "The offset", q.errors)
    start = params.get("start", "").strip().lower()
    q.start = start or ("offset" if q.offset is not None else "timestamp" if q.timestamp else "end")
    if q.start not in STARTS:
        q.errors.append(f"Start at one of {', '.join(STARTS)}.")
        q.start = "end"
    if q.start == "offset" and q.offset is None:
        q.errors.append("Give the offset to start at.")
    if q.start == "timestamp":
        if not q.timestamp:
            q.errors.append("Give the time to start at (ISO 8601 such as 2024-05-01T12:00:00Z, or epoch milliseconds).")
        else:
            try:
                q.timestamp_ms = parse_time(q.timestamp)
                if q.timestamp_ms < 0:
                    raise ValueError("before 1970")
            except (ValueError, OverflowError, OSError):
                q.timestamp_ms = None
                q.errors.append(f"{q.timestamp[:60]!r} is not a time: use ISO 8601 (2024-05-01T12:00:00Z) "
                                "or epoch milliseconds.")
    limit = _whole(params.get("limit", ""), "The number of records", q.errors, low=1, high=INT32_MAX)
    q.limit = min(limit or DEFAULT_LIMIT, MAX_LIMIT)
    if q.path:
        try:
            q.path_filter = parse_filter(q.path)
        except FilterSyntaxError as exc:
            q.errors.append(f"JSON path: {exc}")
    q.tail = params.get("tail", "") in ("1", "on", "true")
    return q


def link(q: Query, **changes: Any) -> str:
    """/messages with ``q``'s parameters, ``changes`` applied (None removes one)."""
    params = {"topic": q.topic, "partition": q.partition, "start": q.start, "offset": q.offset,
              "timestamp": q.timestamp if q.start == "timestamp" else None, "limit": q.limit,
              "key": q.key, "text": q.text, "path": q.path, "tail": "1" if q.tail else None}
    if q.start != "offset":
        params["offset"] = None
    params.update(changes)
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return "/messages?" + urllib.parse.urlencode(kept)


def tail_link(q: Query, after: int) -> str:
    """The live tail's poll of ``q``'s partition and filters, for records from ``after``."""
    return link(q, tail="1", start="end", offset=None, after=after).replace("/messages?", "/messages/tail?", 1)


def _pager(q: Query, result: browse.Browse) -> dict[str, str | None]:
    found = result.scan
    step = SCAN_RECORDS if q.filtered else q.limit
    older = newer = None
    if result.start_offset > result.log_start_offset:
        older = link(q, start="offset", offset=max(result.log_start_offset, result.start_offset - step), tail=None)
    if found.next_offset < max(found.high_watermark, result.end_offset):
        newer = link(q, start="offset", offset=found.next_offset, tail=None)
    return {"older": older, "newer": newer, "first": link(q, start="beginning", offset=None, tail=None),
            "last": link(q, start="end", offset=None, tail=None)}


def _topics(console, current: str) -> list[str]:
    sample = console.sampler.latest
    names = sorted(sample.topics, key=lambda t: (t in sample.internal or t.startswith("_"), t))
    if current and current not in sample.topics:
        names.insert(0, current)
    return names


def _failure(exc: BaseException) -> str:
    from kafka.errors import KafkaError
    if not isinstance(exc, (KafkaError, ReadError, OSError)):
        logger.warning("console messages: %s", exc, exc_info=exc)
    return error_text(exc)


def _page(console, request: Request, q: Query, status_code: int = 200, **extra: Any):
    """The messages page for ``q``; ``extra`` adds to (or replaces) the template's context."""
    sample = console.sampler.latest
    context = dict(q=q, topics=_topics(console, q.topic), result=None, error=None, pager=None,
                   partitions=len(sample.topics.get(q.topic, {})) or None, starts=STARTS,
                   max_limit=MAX_LIMIT, scan_records=SCAN_RECORDS, tail_keep=TAIL_KEEP,
                   tail_interval_ms=TAIL_INTERVAL_MS, produce=None, produced=None, link=link,
                   tail_link=tail_link)
    context.update(extra)
    return console.render(request, "messages.html", status_code=status_code, **context)


def routes(console) -> list:
    registry = RegistryDecoder(console.settings.registry_url) if console.settings.registry_url else None

    async def messages(request: Request):
        q = parse_query(request.query_params)
        extra: dict[str, Any] = {}
        produced = request.query_params.get("produced", "")
        if produced.isdigit():
            extra.update(produced=int(produced), flash=f"Produced to {q.topic} partition {q.partition} "
                                                        f"at offset {int(produced):,}.")
        if q.topic and not q.errors:
            try:
                result = await console.access.run(browse.browse, console.access, q, registry)
            except Exception as exc:            # noqa: BLE001 - shown on the page, never a traceback
                extra["error"] = _failure(exc)
            else:
                extra.update(result=result, pager=_pager(q, result), partitions=result.partitions)
        return _page(console, request, q, **extra)

    async def tail(request: Request):
        q = parse_query(request.query_params)
        after = _offset_param(request.query_params.get("after", ""))
        error = rows = None
        next_after, skipped = after, 0
        if q.errors or not q.topic or after is None:
            error = "; ".join(q.errors) or "The live tail needs a topic and an offset to follow."
        else:
            try:
                found = await console.access.run(browse.tail, console.access, q, after, registry)
            except Exception as exc:            # noqa: BLE001 - shown in the fragment; the tail keeps polling
                error = _failure(exc)
            else:
                rows, next_after, skipped = found.rows, found.after, found.skipped
        return console.render(request, "messages_tail.html", q=q, rows=rows or [], after=next_after,
                              skipped=skipped, error=error, tail_link=tail_link, tail_keep=TAIL_KEEP,
                              tail_interval_ms=TAIL_INTERVAL_MS,
                              checked=dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S UTC"))

    async def produce(request: Request):
        user, form = await console.write_form(request)
        typed, record, errors = read_produce_form(form)
        q = Query(topic=record["topic"])
        if errors:
            return _page(console, request, q, 400, produce=dict(typed, errors=errors))
        try:
            sent = await console.access.run(browse.produce, console.access, **record)
        except Exception as exc:                # noqa: BLE001 - the broker's refusal is shown
            reason = _failure(exc)
            console.audit(user, "produce", q.topic, partition=record["partition"], outcome=f"failed: {reason}")
            return _page(console, request, q, 502, produce=dict(typed, errors=[reason]))
        value = record["value"]
        console.audit(user, "produce", f"{sent.topic}-{sent.partition}", offset=sent.offset,
                      key_bytes=len(record["key"] or b""), value_bytes=None if value is None else len(value),
                      headers=len(record["headers"]))
        target = Query(topic=sent.topic, partition=sent.partition)
        return RedirectResponse(link(target, start="end", produced=sent.offset), status_code=303)

    return [Route("/messages", messages), Route("/messages/tail", tail),
            Route("/messages/produce", produce, methods=["POST"])]


def read_produce_form(form) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(the fields as typed, to show again; the record: ``browse.produce``'s keywords; mistakes)."""
    names = ("topic", "partition", "key", "value", "headers")
    typed: dict[str, Any] = {name: str(form.get(name, "")) for name in names}
    typed["null_value"] = form.get("null_value") in ("1", "on", "true")
    errors: list[str] = []
    partition = _whole(typed["partition"], "The partition", errors, high=INT32_MAX)
    record = {"topic": typed["topic"].strip(), "partition": partition,
              "headers": parse_headers(typed["headers"], errors),
              "key": typed["key"].encode("utf-8") if typed["key"] else None,
              "value": None if typed["null_value"] else typed["value"].encode("utf-8")}
    if not record["topic"]:
        errors.append("Choose a topic to produce to.")
    if any(len(typed[name]) > MAX_FIELD for name in ("key", "value", "headers")):
        errors.append(f"A field is longer than {MAX_FIELD:,} characters.")
    return typed, record, errors


def _offset_param(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_headers(text: str, errors: list[str]) -> list[tuple[str, bytes]]:
    """``name: value`` lines (blank lines skipped) as record headers."""
    headers = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            errors.append(f"Header line {number} is not 'name: value': {line[:60]!r}.")
            continue
        headers.append((name.strip(), value.strip().encode("utf-8")))
    return headers
