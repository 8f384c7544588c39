"""Typed configuration keys, Kafka's ``ConfigDef`` in small: types, parsing, validators.

A ``ConfigKey`` names a key, its ``ConfigType`` (DescribeConfigs numbers), its
typed default and an optional validator.  ``parse_value`` and ``format_value``
convert between text and typed values the way Kafka's ``ConfigDef`` does, so
values read from ``server.properties`` and reported by DescribeConfigs look
like Kafka's.  Errors are ``ConfigError`` with Kafka's wording.
"""
from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any, Callable

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_RANGES = {"INT": (-2**31, INT_MAX), "SHORT": (-2**15, 2**15 - 1), "LONG": (-2**63, LONG_MAX)}


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key, the value and what is allowed."""


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigs ``config_type`` numbers."""
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


Validator = Callable[[str, Any], None]


def invalid(name: str, value: Any, reason: str) -> ConfigError:
    """Kafka's wording: ``Invalid value V for configuration K: reason``."""
    return ConfigError(f"Invalid value {value} for configuration {name}: {reason}")


# -- validators (Kafka's ConfigDef.Range / ValidString / ValidList) -------------------------

def at_least(minimum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise invalid(name, value, f"Value must be at least {minimum}")
    return check


def between(low: int | float, high: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise invalid(name, value, f"Value must be no less than {low} and no more than {high}")
    return check


def one_of(*allowed: str, ignore_case: bool = False) -> Validator:
    """Kafka's ValidString (``ignore_case``: CaseInsensitiveValidString, whose users read the
    value lowercased)."""
    def check(name: str, value: Any) -> None:
        if value is not None and (value.lower() if ignore_case else value) not in allowed:
            raise invalid(name, value, f"String must be one of: {', '.join(allowed)}"
                          + (" (any case)" if ignore_case else ""))
    return check


def subset_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        if not value:
            raise invalid(name, "", f"Empty list is not allowed; use a subset of [{', '.join(allowed)}]")
        for item in value:
            if item not in allowed:
                raise invalid(name, ",".join(value),
                              f"Invalid value {item}; the list must be a subset of [{', '.join(allowed)}]")
    return check


_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]*):([0-9]{1,5})")


def split_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``; an empty host = all interfaces) as (host, port), the host
    without brackets.  Raises ValueError for anything else or a port above 65535."""
    m = _HOST_PORT.fullmatch(text.strip())
    if m is None or int(m.group(2)) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return m.group(1).strip("[]"), int(m.group(2))


def host_port() -> Validator:
    """A ``HOST:PORT`` address (``split_host_port``); null passes."""
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        try:
            split_host_port(value)
        except ValueError:
            raise invalid(name, value, "Expected HOST:PORT, e.g. 127.0.0.1:9404") from None
    return check


def split_http_url(text: str) -> tuple[str, str, int]:
    """``http://HOST:PORT`` or ``https://HOST:PORT`` (a trailing ``/`` allowed) as (scheme,
    host, port).  Raises ValueError for anything else."""
    scheme, sep, rest = text.strip().partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ValueError(f"{text!r} is not http://HOST:PORT or https://HOST:PORT")
    host, port = split_host_port(rest.rstrip("/"))
    return scheme.lower(), host, port


def http_url() -> Validator:
    """An ``http(s)://HOST:PORT`` address (``split_http_url``); null passes."""
    def check(name: str, value: Any) -> None:
        if value is None:
            return
        try:
            split_http_url(value)
        except ValueError:
            raise invalid(name, value, "Expected http://HOST:PORT or https://HOST:PORT, e.g. "
                                       "http://127.0.0.1:8081") from None
    return check


# -- types ---------------------------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIST_SEP = re.compile(r"\s*,\s*")


def parse_value(name: str, config_type: ConfigType, raw: Any) -> Any:
    """Convert a string to the key's type like Kafka's ``ConfigDef.parseType``.

    Raises ConfigError naming the key when the text is not of that type.
    """
    if raw is None or not isinstance(raw, str):
        return raw
    text = raw.strip()
    kind = config_type.name
    if config_type is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise invalid(name, raw, "Expected value to be either true or false")
    if kind in _RANGES:
        low, high = _RANGES[kind]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise invalid(name, raw, f"Not a number of type {kind} (between {low} and {high})")
        return int(text)
    if config_type is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise invalid(name, raw, "Not a number of type DOUBLE") from None
    if config_type is ConfigType.LIST:
        return split_list(text)
    return text


def split_list(text: str) -> tuple[str, ...]:
    """A comma-separated LIST value as Kafka splits it (spaces around commas dropped)."""
    text = text.strip()
    return tuple(_LIST_SEP.split(text)) if text else ()


def format_value(config_type: ConfigType, value: Any) -> str | None:
    """Render a typed value the way Kafka prints it (``ConfigDef.convertToString``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if config_type is ConfigType.LIST:
        return ",".join(value)
    if config_type is ConfigType.DOUBLE:
        return repr(float(value))
    return str(value)


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any                       # already typed; None = Kafka's null default
    doc: str
    validator: Validator | None = None
    ignored: str | None = None         # why kwire accepts this key but does nothing with it

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: Any) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value
