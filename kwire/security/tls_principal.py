"""The principal of a TLS client, as Kafka's ``DefaultKafkaPrincipalBuilder`` names it.

No client certificate (``ssl.client.auth=none``, or ``requested`` and the
client sent none) is ``User:ANONYMOUS``.  Otherwise the peer certificate's
subject DN is printed the way Java's ``X500Principal.getName()`` prints it
(RFC 2253) and passed through ``ssl.principal.mapping.rules``; the result is
``User:<name>``.

The subject is read from its DER bytes (X.501), not from a library's string::

    Name                 ::= SEQUENCE (0x30) OF RelativeDistinguishedName
    RDN                  ::= SET (0x31) OF AttributeTypeAndValue
    AttributeTypeAndValue ::= SEQUENCE (0x30) { type OID (0x06), value ANY }

Java's RFC 2253 form, which rules are written against:

* RDNs most specific first (the reverse of the DER order), joined by ``,``
  with no spaces; the values of a multi-valued RDN joined by ``+`` in DER order;
* only CN, C, L, ST, O, OU, STREET, DC and UID have keywords; any other
  attribute is its dotted OID and ``#`` + the hex of its DER value, so an
  e-mail address prints as ``1.2.840.113549.1.9.1=#16...``;
* in values ``, = + < > # ; " \\`` are backslash-escaped (``=`` and any ``#``
  too, beyond what RFC 2253 requires), NUL is ``\\00``, and leading and
  trailing spaces are escaped.

``ssl.principal.mapping.rules`` (default ``DEFAULT``) is a comma-separated
list; each entry is ``DEFAULT`` (the DN unchanged) or
``RULE:pattern/replacement/`` optionally followed by ``L`` or ``U`` (lower- or
upper-case the result).  ``/`` and ``\\`` inside pattern or replacement are
escaped with ``\\``; the pattern may contain commas.  A rule applies when its
pattern matches the whole DN; the result is the DN with every match replaced
(Java's ``replaceAll``: ``$n`` is group n, ``${name}`` a named group, ``\\x``
a literal x, and a ``$n`` beyond the pattern's groups is kept literally).  The
first rule that applies wins; when none does, the client is refused
(``NoMatchingRule``).  Empty entries (a trailing comma) are ignored.

Differences from Kafka: patterns are Python ``re`` (Java-only syntax such as
``\\p{Lu}`` is a ConfigError), and a replacement that Java would reject while
mapping a client (``$`` followed by no group number, a ``$n`` when the
pattern has no groups, a trailing ``\\``) is a ConfigError when the rules are
parsed instead.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Protocol

from cryptography import x509

from kwire.admin.config_def import ConfigError

__all__ = ["ANONYMOUS", "NoMatchingRule", "PrincipalMapper", "subject_dn", "principal_of"]

ANONYMOUS = "User:ANONYMOUS"
RULES_KEY = "ssl.principal.mapping.rules"


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` entry applies to a client's DN: Kafka refuses the client."""


# -- subject DN, RFC 2253 as Java prints it ------------------------------------------------------

_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java prints as text (UTF8, Printable, T61, IA5, General, BMP); it decodes
# the bytes of every one of them as UTF-8, so a BMPString prints with NULs, and so do we
_STRING_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = frozenset(',=+<>#;"\\')


def subject_dn(certificate_der: bytes) -> str:
    """The subject DN of a DER certificate as Java's ``X500Principal.getName()`` prints it.

    Raises ValueError if the certificate cannot be parsed.
    """
    der = x509.load_der_x509_certificate(certificate_der).subject.public_bytes()
    rdns = [_children(der, *_content(der, rdn, 0x31)) for rdn in _children(der, *_content(der, 0, 0x30))]
    return ",".join("+".join(_ava(der, ava) for ava in rdn) for rdn in reversed(rdns))


def _ava(der: bytes, pos: int) -> str:
    start, _ = _content(der, pos, 0x30)
    oid_start, oid_end = _content(der, start, 0x06)
    value_pos = oid_end
    value_start, value_end = _content(der, value_pos, None)
    oid = _oid(der[oid_start:oid_end])
    keyword = _KEYWORDS.get(oid)
    if keyword is None or der[value_pos] not in _STRING_TAGS:
        return f"{keyword or oid}=#{der[value_pos:value_end].hex()}"
    return f"{keyword}={_escape(der[value_start:value_end].decode('utf-8', 'replace'))}"


def _escape(value: str) -> str:
    chars = ["\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in value]
    lead = 0
    while lead < len(value) and value[lead] in " \r":
        lead += 1
    trail = len(value)
    while trail > lead and value[trail - 1] in " \r":
        trail -= 1
    for i in (*range(lead), *range(trail, len(value))):
        chars[i] = "\\" + chars[i]
    return "".join(chars)


def _content(der: bytes, pos: int, tag: int | None) -> tuple[int, int]:
    """(start, end) of the content of the DER element at ``pos``; checks its tag unless None."""
    if pos + 2 > len(der) or (tag is not None and der[pos] != tag):
        raise ValueError(f"malformed DER name at byte {pos}")
    length, pos = der[pos + 1], pos + 2
    if length & 0x80:
        size = length & 0x7F
        length, pos = int.from_bytes(der[pos:pos + size], "big"), pos + size
    if pos + length > len(der):
        raise ValueError(f"malformed DER name at byte {pos}")
    return pos, pos + length


def _children(der: bytes, start: int, end: int) -> list[int]:
    """Positions of the elements inside the content ``der[start:end]``."""
    positions = []
    while start < end:
        positions.append(start)
        start = _content(der, start, None)[1]
    return positions


def _oid(body: bytes) -> str:
    arcs, value = [], 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(map(str, [first, arcs[0] - 40 * first, *arcs[1:]]))


# -- ssl.principal.mapping.rules -----------------------------------------------------------------

_WS = "[ \t\n\x0b\f\r]"      # Java's \s, not Python's Unicode-wide one
_PART = r"(?:\\.|[^\\/])*"
# one entry of the list: DEFAULT, a RULE (with whatever trails it up to the next comma, so a
# malformed tail is reported), or anything else up to the next comma (reported as invalid)
_ENTRY = rf"DEFAULT|RULE:{_PART}/{_PART}/[LU]?.*?|.*?"
_SPLITTER = re.compile(rf"{_WS}*({_ENTRY}){_WS}*(?:,{_WS}*|$)")
_RULE = re.compile(rf"RULE:({_PART})/({_PART})/([LU]?)")
_GROUP_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9]*")
# Java's (?<name>...) is Python's (?P<name>...); an escaped "\(" is left alone
_JAVA_NAMED_GROUP = re.compile(r"((?:^|[^\\])(?:\\\\)*)\(\?<(?=[a-zA-Z])")


@dataclasses.dataclass(frozen=True)
class _Rule:
    text: str
    pattern: re.Pattern | None           # None: DEFAULT
    replacement: tuple = ()              # literal strings and _Group references
    case: str = ""                       # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self._replace_all(dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result

    def _replace_all(self, dn: str) -> str:
        # Java's replaceAll, not re.sub: after an empty match the next search starts one
        # character later, so no match may begin where an empty one was found
        out, copied, start = [], 0, 0
        while start <= len(dn) and (match := self.pattern.search(dn, start)) is not None:
            out += [dn[copied:match.start()], *(
                part if isinstance(part, str) else match.group(part.ref) or "" for part in self.replacement)]
            copied = match.end()
            start = match.end() + (match.end() == match.start())
        return "".join([*out, dn[copied:]])


@dataclasses.dataclass(frozen=True)
class _Group:
    """A group reference (number or name) inside a parsed replacement."""
    ref: int | str


def _parse_replacement(text: str, pattern: re.Pattern, rule: str) -> tuple:
    """Java's ``Matcher.appendReplacement`` syntax, after Kafka's literal-``$n`` escaping."""
    groups, parts, literal, i = pattern.groups, [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                raise _invalid(rule, "the replacement ends with an escape character")
            literal.append(text[i + 1])
            i += 2
        elif c != "$":
            literal.append(c)
            i += 1
        elif text.startswith("${", i):
            name = _GROUP_NAME.match(text, i + 2)
            if name is None or text[name.end():name.end() + 1] != "}" or name.group() not in pattern.groupindex:
                raise _invalid(rule, f"bad named group reference at {text[i:]!r}")
            parts, literal = [*parts, "".join(literal), _Group(name.group())], []
            i = name.end() + 1
        elif i + 1 < len(text) and text[i + 1].isdigit() and text[i + 1].isascii():
            ref, i = int(text[i + 1]), i + 2
            if groups and ref > groups:         # Kafka keeps $n beyond the groups literally
                literal.append(f"${ref}")
                continue
            if ref > groups:
                raise _invalid(rule, f"the replacement refers to group {ref}, the pattern has {groups}")
            while i < len(text) and text[i].isdigit() and text[i].isascii() and ref * 10 + int(text[i]) <= groups:
                ref, i = ref * 10 + int(text[i]), i + 1
            parts, literal = [*parts, "".join(literal), _Group(ref)], []
        else:
            raise _invalid(rule, "'$' in the replacement must be followed by a group number or {name}")
    return tuple(p for p in (*parts, "".join(literal)) if p)


def _invalid(rule: str, reason: str) -> ConfigError:
    return ConfigError(f"Invalid value {rule} for configuration {RULES_KEY}: {reason}")


def _parse_rule(entry: str, key: str) -> _Rule | None:
    if not entry:
        return None
    if entry == "DEFAULT":
        return _Rule(entry, None)
    match = _RULE.match(entry)
    if match is None or match.end() != len(entry):
        tail = f", unmatched text {entry[match.end():]!r}" if match else ""
        raise ConfigError(f"Invalid value {entry} for configuration {key}: not DEFAULT or "
                          f"RULE:pattern/replacement/[LU]{tail}")
    try:
        # re.ASCII: Java's \d \w \s \b and (?i) are ASCII-only by default
        pattern = re.compile(_JAVA_NAMED_GROUP.sub(r"\1(?P<", match.group(1)), re.ASCII)
    except re.error as exc:
        raise ConfigError(f"Invalid value {entry} for configuration {key}: bad pattern: {exc}") from None
    return _Rule(entry, pattern, _parse_replacement(match.group(2), pattern, entry), match.group(3))


class PrincipalMapper:
    """Parsed ``ssl.principal.mapping.rules``; ``name(dn)`` applies them."""

    def __init__(self, rules: str | None = "DEFAULT", key: str = RULES_KEY) -> None:
        """Raises ConfigError naming ``key`` if an entry is malformed.  None means DEFAULT."""
        text = "DEFAULT" if rules is None else rules
        trimmed = text.strip("".join(map(chr, range(33))))      # Java's String.trim()
        parsed = (_parse_rule(m.group(1), key) for m in _SPLITTER.finditer(trimmed))
        self.rules: tuple[_Rule, ...] = tuple(r for r in parsed if r is not None)

    def name(self, dn: str) -> str:
        """The short name for ``dn`` from the first rule that applies; raises NoMatchingRule."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(r.text for r in self.rules)}]")

    def __repr__(self) -> str:
        return f"PrincipalMapper([{', '.join(r.text for r in self.rules)}])"


class _PeerCertificate(Protocol):
    def getpeercert(self, binary_form: bool = ...): ...


def principal_of(tls: _PeerCertificate, mapper: PrincipalMapper) -> str:
    """``User:<name>`` for the peer of ``tls`` (an ``ssl.SSLObject``/``SSLSocket`` or a
    ``trio.SSLStream``, after the handshake), ``User:ANONYMOUS`` without a client certificate.

    Raises NoMatchingRule when no mapping rule applies (close the connection, as Kafka fails
    the authentication).  Pure computation: no I/O, cancel-safe.
    """
    der = tls.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return f"User:{mapper.name(subject_dn(der))}"
