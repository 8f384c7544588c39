"""How ``kwire serve`` logs: one readable line per event, or one JSON object per line.

    kwire serve [--log-level INFO] [--log-format text|json]

text (default)  ``2026-11-24 06:40:01,123 INFO kwire.server.connection: listening on PLAINTEXT://127.0.0.1:9092``;
                a traceback follows its line, indented, so a log reader keeps it with its event
json            ``{"time":"2026-11-24T06:40:01.123Z","level":"INFO","logger":"kwire.server.connection",
                "message":"...","exception":"Traceback ..."}`` (``exception`` only when there is one),
                for log shippers (Loki, Elasticsearch, CloudWatch)

Both go to standard error.
"""
from __future__ import annotations

import json
import logging
import sys
import time

FORMATS = ("text", "json")


class TextFormatter(logging.Formatter):
    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatException(self, ei) -> str:
        return "    " + super().formatException(ei).replace("\n", "\n    ")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        seconds = int(record.created)
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{record.msecs:03.0f}Z",
                 "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str = "INFO", log_format: str = "text", stream=None) -> None:
    """Send every logger's records at ``level`` and above to ``stream`` (stderr) in
    ``log_format``.  Raises ValueError for an unknown level or format."""
    if log_format not in FORMATS:
        raise ValueError(f"unknown log format {log_format!r}: one of {', '.join(FORMATS)}")
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
