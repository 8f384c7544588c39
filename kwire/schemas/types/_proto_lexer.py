"""Tokens of ``.proto`` text, and the cursor the parser reads them with.

Tokens: identifiers, numbers (decimal, octal, hex, floats), string literals (single or double
quotes, C-style escapes; adjacent literals concatenate), one-character symbols; whitespace and
``//`` / ``/* */`` comments are skipped.  Every error names its line.
"""
from __future__ import annotations

import re

from ._base import SchemaError

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)(?![A-Za-z_0-9]))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<symbol>[=;{}\[\]()<>,.:+\-/])
""", re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\",
            "'": "'", '"': '"', "?": "?"}


def tokenize(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, line) tokens; raises SchemaError on a character no token starts with."""
    tokens, pos, line = [], 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise SchemaError(f"Invalid schema: line {line}: unexpected character {text[pos]!r}")
        if match.lastgroup != "space":
            tokens.append((match.lastgroup, match.group(), line))
        line += match.group().count("\n")
        pos = match.end()
    tokens.append(("end", "", line))
    return tokens


def unquote(token: str) -> bytes:
    """A string literal's bytes: characters as UTF-8, escapes (C-style, octal, hex) as the byte
    they name."""
    body, out, i = token[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt].encode("ascii")
            i += 2
        elif nxt in "xX" and re.match(r"[0-9a-fA-F]", body[i + 2:i + 3]):
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:]).group()
            out.append(int(digits, 16))
            i += 2 + len(digits)
        elif nxt in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group()
            out.append(int(digits, 8) & 0xFF)
            i += 1 + len(digits)
        else:
            out += nxt.encode("utf-8")
            i += 2
    return bytes(out)


def camel_json_name(name: str) -> str:
    """protoc's default json_name: underscores dropped, the letter after each capitalised."""
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        else:
            out.append(ch.upper() if upper else ch)
            upper = False
    return "".join(out)


class Cursor:
    """A position in the token list, with the small reads the parser is made of; errors carry the line."""

    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.i = 0

    def peek(self, ahead: int = 0) -> tuple[str, str, int]:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def error(self, message: str) -> SchemaError:
        kind, text, line = self.peek()
        found = "the end of the schema" if kind == "end" else repr(text)
        return SchemaError(f"Invalid schema: line {line}: {message}, found {found}")

    def take(self, text: str | None = None, kind: str | None = None) -> str:
        tok_kind, tok_text, _ = self.peek()
        if (text is not None and tok_text != text) or (kind is not None and tok_kind != kind) \
                or tok_kind == "end" or (tok_kind == "string" and text is not None):
            raise self.error(f"expected {text!r}" if text else f"expected {kind}")
        self.i += 1
        return tok_text

    def accept(self, text: str) -> bool:
        kind, tok_text, _ = self.peek()
        if kind not in ("string", "end") and tok_text == text:
            self.i += 1
            return True
        return False

    def full_ident(self) -> str:
        parts = [self.take(kind="ident")]
        while self.accept("."):
            parts.append(self.take(kind="ident"))
        return ".".join(parts)

    def type_name(self) -> str:
        lead = "." if self.accept(".") else ""
        return lead + self.full_ident()

    def raw_string(self) -> bytes:
        value = unquote(self.take(kind="string"))
        while self.peek()[0] == "string":   # adjacent literals concatenate
            value += unquote(self.take(kind="string"))
        return value

    def string(self) -> str:
        line = self.peek()[2]
        try:
            return self.raw_string().decode("utf-8")
        except UnicodeDecodeError:
            raise SchemaError(f"Invalid schema: line {line}: a string that is not UTF-8") from None

    def integer(self) -> int:
        sign = -1 if self.accept("-") else 1
        text = self.take(kind="number")
        try:
            if text.lower().startswith("0x"):
                return sign * int(text, 16)
            if len(text) > 1 and text.startswith("0"):
                return sign * int(text, 8)
            return sign * int(text)
        except ValueError:
            self.i -= 1
            raise self.error("expected an integer") from None
