"""The messages page's value filter: a dotted path into a JSON value and an optional comparison.

    $.status                      the path exists (and is not null)
    $.status exists               the same, spelled out
    $.customer.id == 42           equal (a JSON literal: 42, 4.5, "text", 'text', true, false, null)
    $.status != "shipped"         present and not equal
    $.items[0].price >= 10        > >= < <= compare numbers with numbers and text with text
    $["odd key"].x == shipped     a bare word is text

A path is ``$`` then ``.name`` or ``[index]`` or ``["name"]`` steps.  Nothing is evaluated as
Python: the expression is parsed once into a ``Filter`` (a path and a comparison) and applied to
decoded values.  A path that does not resolve matches nothing, whatever the operator.

``parse(text)`` raises ``FilterSyntaxError`` (a ValueError) with the position of the mistake.
"""
from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

MAX_EXPRESSION = 1000          # characters; a filter is typed by hand
MAX_STEPS = 64

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_INDEX = re.compile(r"\[\s*(-?\d+)\s*\]")
_QUOTED_KEY = re.compile(r"""\[\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*\]""")
_OPERATOR = re.compile(r"\s*(==|!=|>=|<=|>|<|=|exists\b)\s*")
_MISSING = object()


class FilterSyntaxError(ValueError):
    """The filter cannot be parsed; ``str()`` says where and why."""


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):       # true is not 1 in JSON
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def check(a: Any, b: Any) -> bool:
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
        texts = isinstance(a, str) and isinstance(b, str)
        return (numbers or texts) and compare(a, b)
    return check


COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": _equal,
    "=": _equal,
    "!=": lambda a, b: not _equal(a, b),
    ">": _ordered(operator.gt),
    ">=": _ordered(operator.ge),
    "<": _ordered(operator.lt),
    "<=": _ordered(operator.le),
}


@dataclass(frozen=True)
class Filter:
    """A parsed filter: ``steps`` (names and indexes) and ``op``/``literal`` (op None: exists)."""
    text: str
    steps: tuple[str | int, ...]
    op: str | None = None
    literal: Any = None

    def resolve(self, value: Any) -> Any:
        """The value at the path, or ``_MISSING``."""
        for step in self.steps:
            if isinstance(step, int):
                if not isinstance(value, list) or not -len(value) <= step < len(value):
                    return _MISSING
                value = value[step]
            elif isinstance(value, dict) and step in value:
                value = value[step]
            else:
                return _MISSING
        return value

    def matches(self, value: Any) -> bool:
        found = self.resolve(value)
        if found is _MISSING:
            return False
        if self.op is None:
            return found is not None
        return COMPARISONS[self.op](found, self.literal)


def parse(text: str) -> Filter:
    """Parse ``$.a.b[0] == 42`` (see the module's doc).  Raises FilterSyntaxError."""
    source = text.strip()
    if not source:
        raise FilterSyntaxError("the filter is empty")
    if len(source) > MAX_EXPRESSION:
        raise FilterSyntaxError(f"the filter is longer than {MAX_EXPRESSION} characters")
    if not source.startswith("$"):
        raise FilterSyntaxError("a path starts with $ (for example $.status or $.customer.id == 42)")
    steps, at = _steps(source, 1)
    if at == len(source):
        return Filter(source, steps)
    found = _OPERATOR.match(source, at)
    if found is None:
        raise FilterSyntaxError(f"expected an operator (== != > >= < <= exists) at character {at + 1}: "
                                f"{source[at:at + 20]!r}")
    op, rest = found.group(1), source[found.end():].strip()
    if op == "exists":
        if rest:
            raise FilterSyntaxError(f"nothing may follow 'exists' (found {rest[:20]!r})")
        return Filter(source, steps)
    if not rest:
        raise FilterSyntaxError(f"'{op}' needs a value to compare with")
    return Filter(source, steps, op, _literal(rest))


def _steps(source: str, at: int) -> tuple[tuple[str | int, ...], int]:
    steps: list[str | int] = []
    while at < len(source) and source[at] in ".[":
        if len(steps) >= MAX_STEPS:
            raise FilterSyntaxError(f"a path has at most {MAX_STEPS} steps")
        if source[at] == ".":
            name = _NAME.match(source, at + 1)
            if name is None:
                raise FilterSyntaxError(f"expected a name after '.' at character {at + 2} "
                                        "(use [\"...\"] for other keys)")
            steps.append(name.group())
            at = name.end()
            continue
        index = _INDEX.match(source, at)
        if index is not None:
            steps.append(int(index.group(1)))
            at = index.end()
            continue
        key = _QUOTED_KEY.match(source, at)
        if key is None:
            raise FilterSyntaxError(f"expected [number] or [\"key\"] at character {at + 1}")
        steps.append(_unquote(key.group(1)))
        at = key.end()
    return tuple(steps), at


def _unquote(quoted: str) -> str:
    if quoted[0] == "'":
        quoted = '"' + quoted[1:-1].replace('\\\'', "'").replace('"', '\\"') + '"'
    try:
        return json.loads(quoted)
    except ValueError as exc:
        raise FilterSyntaxError(f"bad quoted text {quoted}: {exc}") from None


def _literal(text: str) -> Any:
    if text[0] in "'\"":
        if len(text) < 2 or text[-1] != text[0]:
            raise FilterSyntaxError(f"unterminated text {text[:20]}")
        return _unquote(text)
    try:
        value = json.loads(text)
    except ValueError:
        return text                    # a bare word: text
    if isinstance(value, (dict, list)):
        raise FilterSyntaxError("compare with a number, text, true, false or null, not an object or list")
    return value
