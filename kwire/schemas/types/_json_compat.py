"""Can a JSON Schema reader accept every document a writer's schema accepts?

BACKWARD for JSON means "every document valid under the old schema is valid under the new one";
this module answers it structurally, keyword by keyword, in the spirit of Confluent's JSON Schema
rules (the names of its difference types head our messages).  The check is conservative: when it
cannot prove a writer's document passes the reader it says why, it never passes an incompatible
pair it understands.

Handled:

* boolean schemas, ``{}``, ``$ref`` (inside the schema and to references; recursion assumed fine);
* ``type`` narrowed or changed (``integer`` within ``number``), ``enum``/``const`` added or narrowed;
* numbers: minimum/maximum (draft 4's boolean and draft 6+'s numeric exclusive bounds), multipleOf;
* strings: minLength/maxLength, pattern and format added or changed;
* arrays: items (one schema or tuples: items/additionalItems, prefixItems), minItems/maxItems,
  uniqueItems, contains;
* objects: properties recursively, the open or closed content model (``additionalProperties``,
  and ``patternProperties``: a property added to an open model must accept what the writer's
  additionalProperties allowed, one removed from a closed model is rejected), required added,
  minProperties/maxProperties, propertyNames, dependencies;
* combinators: a writer's ``anyOf``/``oneOf`` branch by branch and its ``allOf`` merged; a
  reader's ``allOf`` (every part), ``anyOf``/``oneOf`` (some branch covers the writer: adding a
  branch is fine, removing one is not), ``not`` and ``if``/``then``/``else`` only when unchanged.

Not handled (reported as incompatible unless the keyword is identical on both sides): a reader's
``oneOf`` exclusivity (treated as ``anyOf``), ``not`` and ``if``/``then``/``else`` that changed,
``dependentSchemas``/``dependencies`` that changed, ``unevaluatedProperties``/``unevaluatedItems``,
``$dynamicRef``/``$recursiveRef``, ``contentSchema``; enum values are compared by their JSON text,
so ``1`` and ``1.0`` differ.
"""
from __future__ import annotations

import json
import re
from fractions import Fraction

import referencing.exceptions

_MAX_DEPTH = 64
_VALUE_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
                   "maxLength", "pattern")
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "string", "number", "integer"})
_ANNOTATIONS = {"title", "description", "$comment", "examples", "default", "deprecated", "readOnly",
                "writeOnly", "$schema", "$id", "id", "definitions", "$defs", "$anchor", "$vocabulary"}
_COMBINATORS = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")
_ONLY_IF_EQUAL = ("dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
                  "$recursiveRef", "contentSchema", "contains")
_BOUNDS = (  # keyword, the type it constrains, whether a bigger reader value is tighter, difference name
    ("minLength", "string", True, "MIN_LENGTH"), ("maxLength", "string", False, "MAX_LENGTH"),
    ("minItems", "array", True, "MIN_ITEMS"), ("maxItems", "array", False, "MAX_ITEMS"),
    ("minProperties", "object", True, "MIN_PROPERTIES"), ("maxProperties", "object", False, "MAX_PROPERTIES"),
)


def reader_errors(reader, writer) -> list[str]:
    """Why ``reader`` (a JsonSchema) rejects some document ``writer`` accepts; [] if none."""
    checker = _Checker(reader.validator_cls)
    checker.check(reader.contents, reader.resolver(), writer.contents, writer.resolver(), "#")
    return checker.errors


class _Checker:
    def __init__(self, validator_cls):
        self.validator_cls = validator_cls   # the reader's draft, for the few values checked directly
        self.errors: list[str] = []
        self._active: set[tuple[int, int]] = set()
        self._alive: list = []   # keeps every compared node alive so an id() is never reused mid-walk
        self._depth = 0

    def fail(self, kind: str, path: str, text: str) -> None:
        self.errors.append(f"{kind} at {path}: {text}")

    def collect(self, r, r_res, w, w_res, path: str) -> list[str]:
        """The problems of one comparison, not yet reported (the caller may word them its way)."""
        before = self.errors
        self.errors = []
        try:
            self.check(r, r_res, w, w_res, path)
            return self.errors
        finally:
            self.errors = before

    def covers(self, r, r_res, w, w_res, path: str) -> bool:
        """Whether the reader accepts the writer here, without reporting why not."""
        return not self.collect(r, r_res, w, w_res, path)

    def check(self, r, r_res, w, w_res, path: str) -> None:
        r, r_res = self._deref(r, r_res, path)
        w, w_res = self._deref(w, w_res, path)
        if r is None or w is None or w is False or r is True:
            return
        if r is False:
            return self.fail("TYPE_NARROWED", path, "the reader accepts nothing")
        w = {} if w is True else w
        key = (id(r), id(w))
        if key in self._active:
            return   # a recursive schema met again: assume the rest of the walk decides
        if r == w and '"$ref"' not in json.dumps(r):
            return
        if self._depth >= _MAX_DEPTH:
            return self.fail("TOO_DEEP", path, f"schemas nest deeper than {_MAX_DEPTH} levels; not compared")
        self._active.add(key)
        self._alive.append((r, w))
        self._depth += 1
        try:
            self._check_dicts(r, r_res, w, w_res, path)
        finally:
            self._depth -= 1
            self._active.discard(key)

    def _deref(self, node, resolver, path: str):
        for _ in range(32):
            if not isinstance(node, dict) or not isinstance(node.get("$ref"), str):
                return node, resolver
            siblings = {k: v for k, v in node.items() if k != "$ref" and k not in _ANNOTATIONS}
            if siblings:   # draft 2019+ applies both: the ref as one more allOf part
                return {**siblings, "allOf": [{"$ref": node["$ref"]}, *siblings.get("allOf", [])]}, resolver
            try:
                resolved = resolver.lookup(node["$ref"])
            except referencing.exceptions.Unresolvable:
                self.fail("REFERENCE_UNRESOLVED", path, f"$ref {node['$ref']!r} does not resolve")
                return None, resolver
            node, resolver = resolved.contents, resolved.resolver
        self.fail("REFERENCE_UNRESOLVED", path, "$ref chain too long")
        return None, resolver

    def _check_dicts(self, r: dict, r_res, w: dict, w_res, path: str) -> None:
        if any(k in w for k in ("anyOf", "oneOf", "allOf")):
            return self._writer_combinators(r, r_res, w, w_res, path)
        if any(k in r for k in _COMBINATORS):
            return self._reader_combinators(r, r_res, w, w_res, path)
        types = self._check_types(r, w, path)
        self._check_enum(r, w, path)
        if _values(w) is not None:
            # the writer lists its values: try each on the reader's value keywords, nothing to infer
            self._check_values(r, _values(w), path)
            types -= {"number", "integer", "string"}
        if types & {"number", "integer"}:
            self._check_numbers(r, w, path)
        for keyword, kind, bigger_is_tighter, name in _BOUNDS:
            if kind in types:
                _check_bound(self, r, w, keyword, bigger_is_tighter, name, path)
        if "string" in types:
            self._check_same(r, w, "pattern", "PATTERN", path)
            self._check_same(r, w, "format", "FORMAT", path)
        if "array" in types:
            self._check_array(r, r_res, w, w_res, path)
        if "object" in types:
            self._check_object(r, r_res, w, w_res, path)
        for keyword in _ONLY_IF_EQUAL:
            self._check_same(r, w, keyword, keyword.upper(), path)

    # -- combinators -------------------------------------------------------------------------------

    def _writer_combinators(self, r, r_res, w, w_res, path: str) -> None:
        rest = {k: v for k, v in w.items() if k not in ("anyOf", "oneOf", "allOf")}
        if "allOf" in w:
            parts = [self._deref(p, w_res, path)[0] for p in w["allOf"]]
            merged = dict(rest)
            for part in parts:   # every key of the merge is some part's constraint: a looser writer
                merged.update(part if isinstance(part, dict) else {})
            if any(p is False for p in parts):
                return   # the writer allows nothing
            problems = self.collect(r, r_res, merged, w_res, path)
            if problems and not any(self.covers(r, r_res, p, w_res, path) for p in parts):
                self.errors.extend(problems)
            return
        if self.covers(r, r_res, rest, w_res, path):
            return
        branches = w.get("anyOf", w.get("oneOf", []))
        for i, branch in enumerate(branches):
            branch, _ = self._deref(branch, w_res, path)
            if branch is False or branch is None:
                continue
            merged = {**rest, **(branch if isinstance(branch, dict) else {})}
            self.check(r, r_res, merged, w_res, f"{path}/{'anyOf' if 'anyOf' in w else 'oneOf'}/{i}")

    def _reader_combinators(self, r, r_res, w, w_res, path: str) -> None:
        rest = {k: v for k, v in r.items() if k not in _COMBINATORS}
        self.check(rest, r_res, w, w_res, path)
        for i, part in enumerate(r.get("allOf", [])):
            self.check(part, r_res, w, w_res, f"{path}/allOf/{i}")
        for keyword in ("anyOf", "oneOf"):
            branches = r.get(keyword)
            if branches is not None and not any(self.covers(b, r_res, w, w_res, path) for b in branches):
                self.fail("SUM_TYPE_NARROWED", f"{path}/{keyword}",
                          f"no branch of the reader's {keyword} accepts every document the writer's schema allows")
        for keyword in ("not", "if", "then", "else"):
            self._check_same(r, w, keyword, f"{keyword.upper()}_CHANGED", path, exact_name=True)

    # -- scalars -----------------------------------------------------------------------------------

    def _check_types(self, r: dict, w: dict, path: str) -> set[str]:
        """Report types the writer allows and the reader does not; return the types both allow."""
        written = _types(w)
        accepted = _types(r, reader=True)
        lost = {t for t in written if t not in accepted}
        if lost == {"number"} and "integer" in accepted:
            self.fail("TYPE_NARROWED", path, "the writer allows any number, the reader only integers")
        elif lost and lost == written:
            self.fail("TYPE_CHANGED", path, f"the writer's type {_names(written)} is not the reader's {_names(accepted)}")
        elif lost:
            self.fail("TYPE_NARROWED", path, f"the reader no longer accepts {_names(lost)}")
        return written - lost

    def _check_enum(self, r: dict, w: dict, path: str) -> None:
        allowed = _values(r)
        if allowed is None:
            return
        written = _values(w)
        if written is None:
            self.fail("ENUM_ADDED", path, f"the reader only accepts {_show(allowed)}, the writer any value")
            return
        missing = [v for v in written if _key(v) not in {_key(a) for a in allowed}]
        if missing:
            self.fail("ENUM_ARRAY_NARROWED", path, f"the reader no longer accepts {_show(missing)}")

    def _check_values(self, r: dict, values: list, path: str) -> None:
        scalar = {k: r[k] for k in _VALUE_KEYWORDS if k in r}
        if not scalar:
            return
        validator = self.validator_cls(scalar)
        for value in values:
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                error = next(iter(validator.iter_errors(value)), None)
                if error is not None:
                    self.fail("ENUM_ARRAY_NARROWED", path, f"the writer's value {json.dumps(value)} fails the "
                              f"reader: {error.message}")

    def _check_numbers(self, r: dict, w: dict, path: str) -> None:
        for lower in (True, False):
            reader_bound, writer_bound = _bound(r, lower), _bound(w, lower)
            if reader_bound is None:
                continue
            name = "MINIMUM" if lower else "MAXIMUM"
            if writer_bound is None:
                self.fail(f"{name}_ADDED", path, f"the reader adds the bound {_show_bound(reader_bound, lower)}")
            elif _tighter(reader_bound, writer_bound, lower):
                self.fail(f"{name}_{'INCREASED' if lower else 'DECREASED'}", path,
                          f"the bound {_show_bound(writer_bound, lower)} became {_show_bound(reader_bound, lower)}")
        reader_step, writer_step = r.get("multipleOf"), w.get("multipleOf")
        if reader_step is not None:
            if writer_step is None:
                self.fail("MULTIPLE_OF_ADDED", path, f"the reader adds multipleOf {reader_step}")
            elif (Fraction(str(writer_step)) / Fraction(str(reader_step))).denominator != 1:
                self.fail("MULTIPLE_OF_CHANGED", path, f"multipleOf {writer_step} became {reader_step}")

    def _check_same(self, r: dict, w: dict, keyword: str, name: str, path: str, exact_name: bool = False) -> None:
        if keyword not in r or _key(r.get(keyword)) == _key(w.get(keyword)):
            return
        kind = name if exact_name else f"{name}_{'CHANGED' if keyword in w else 'ADDED'}"
        detail = f"{w[keyword]!r} became {r[keyword]!r}" if keyword in w else f"the reader adds {r[keyword]!r}"
        self.fail(kind, path, f"{keyword}: {detail}")

    # -- arrays and objects ------------------------------------------------------------------------

    def _check_array(self, r: dict, r_res, w: dict, w_res, path: str) -> None:
        r_prefix, r_rest, r_rest_key = _tuple_form(r)
        w_prefix, w_rest, _ = _tuple_form(w)
        for i in range(max(len(r_prefix), len(w_prefix))):
            reader_item = r_prefix[i] if i < len(r_prefix) else r_rest
            writer_item = w_prefix[i] if i < len(w_prefix) else w_rest
            self.check(reader_item, r_res, writer_item, w_res, f"{path}/items/{i}")
        self.check(r_rest, r_res, w_rest, w_res, f"{path}/{r_rest_key}")
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            self.fail("UNIQUE_ITEMS_ADDED", path, "the reader requires unique items")

    def _check_object(self, r: dict, r_res, w: dict, w_res, path: str) -> None:
        r_props, w_props = r.get("properties", {}), w.get("properties", {})
        r_extra, w_extra = r.get("additionalProperties", True), w.get("additionalProperties", True)
        for name in list(r_props) + [n for n in w_props if n not in r_props]:
            where = f"{path}/properties/{name}"
            writer_side = w_props.get(name, _pattern_or(w, name, w_extra))
            for reader_side in ([r_props[name]] if name in r_props else _patterns_for(r, name) or [r_extra]):
                problems = self.collect(reader_side, r_res, writer_side, w_res, where)
                if not problems:
                    continue
                if name not in w_props and name in r_props:
                    self.fail("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where, "the writer's open content model "
                              "allows this property with any value; the reader's schema for it is narrower")
                elif name in w_props and reader_side is False:
                    self.fail("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                              "the writer allows this property; the reader's closed content model rejects it")
                else:
                    self.errors.extend(problems)
        self._check_patterns_and_extra(r, r_res, w, w_res, path)
        added = [n for n in r.get("required", []) if n not in w.get("required", [])]
        if added:
            self.fail("REQUIRED_ATTRIBUTE_ADDED", path, f"the reader requires {_show(added)}")
        if "propertyNames" in r:
            self.check(r["propertyNames"], r_res, w.get("propertyNames", {"type": "string"}), w_res,
                       f"{path}/propertyNames")
        for keyword in ("dependencies", "dependentRequired"):
            self._check_same(r, w, keyword, "DEPENDENCY", path)

    def _check_patterns_and_extra(self, r: dict, r_res, w: dict, w_res, path: str) -> None:
        r_patterns, w_patterns = r.get("patternProperties", {}), w.get("patternProperties", {})
        r_extra, w_extra = r.get("additionalProperties", True), w.get("additionalProperties", True)
        for pattern, reader_side in r_patterns.items():
            # names matching the pattern fall under the writer's same pattern, or its other rules
            writers = [w_patterns[pattern]] if pattern in w_patterns else [w_extra, *w_patterns.values()]
            for writer_side in writers:
                self.check(reader_side, r_res, writer_side, w_res, f"{path}/patternProperties/{pattern}")
        for pattern, writer_side in w_patterns.items():
            if pattern not in r_patterns:
                self.check(r_extra, r_res, writer_side, w_res, f"{path}/patternProperties/{pattern}")
        problems = self.collect(r_extra, r_res, w_extra, w_res, f"{path}/additionalProperties")
        if problems and r_extra is False:
            self.fail("ADDITIONAL_PROPERTIES_REMOVED", path,
                      "the writer's open content model allows other properties; the reader's closed one does not")
        else:
            self.errors.extend(problems)


# -- helpers ----------------------------------------------------------------------------------------

def _types(node: dict, reader: bool = False) -> set[str]:
    declared = node.get("type")
    if declared is None:
        values = None if reader else _values(node)
        if values is None:
            return set(_ALL_TYPES)
        return {_type_of(v) for v in values}
    found = {declared} if isinstance(declared, str) else set(declared)
    if "number" in found:
        found.add("integer")   # every integer is a number, on either side
    return found


def _type_of(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def _values(node: dict) -> list | None:
    if "const" in node:
        return [node["const"]]
    return list(node["enum"]) if isinstance(node.get("enum"), list) else None


def _bound(node: dict, lower: bool):
    """The effective (value, exclusive) lower or upper bound of a number schema, or None."""
    inclusive, exclusive = ("minimum", "exclusiveMinimum") if lower else ("maximum", "exclusiveMaximum")
    candidates = []
    if isinstance(node.get(inclusive), (int, float)) and not isinstance(node.get(inclusive), bool):
        candidates.append((node[inclusive], node.get(exclusive) is True))   # draft 4's boolean form
    if isinstance(node.get(exclusive), (int, float)) and not isinstance(node.get(exclusive), bool):
        candidates.append((node[exclusive], True))
    if not candidates:
        return None
    tightest = candidates[0]
    for candidate in candidates[1:]:
        if _tighter(candidate, tightest, lower):
            tightest = candidate
    return tightest


def _tighter(a, b, lower: bool) -> bool:
    """Whether bound ``a`` excludes a number bound ``b`` allows."""
    if a[0] != b[0]:
        return a[0] > b[0] if lower else a[0] < b[0]
    return a[1] and not b[1]


def _show_bound(bound, lower: bool) -> str:
    return f"{'>' if lower else '<'}{'' if bound[1] else '='} {bound[0]}"


def _check_bound(checker: _Checker, r: dict, w: dict, keyword: str, bigger_is_tighter: bool, name: str,
                 path: str) -> None:
    reader_value, writer_value = r.get(keyword), w.get(keyword)
    if reader_value is None:
        return
    if writer_value is None:
        checker.fail(f"{name}_ADDED", path, f"the reader adds {keyword} {reader_value}")
    elif (reader_value > writer_value) if bigger_is_tighter else (reader_value < writer_value):
        direction = "INCREASED" if bigger_is_tighter else "DECREASED"
        checker.fail(f"{name}_{direction}", path, f"{keyword} {writer_value} became {reader_value}")


def _tuple_form(node: dict):
    """(per-position item schemas, the schema of the items after them, its keyword)."""
    if "prefixItems" in node:
        return list(node["prefixItems"]), node.get("items", True), "items"
    items = node.get("items", True)
    if isinstance(items, list):
        return items, node.get("additionalItems", True), "additionalItems"
    return [], items, "items"


def _patterns_for(node: dict, name: str) -> list:
    found = []
    for pattern, schema in node.get("patternProperties", {}).items():
        try:
            if re.search(pattern, name):
                found.append(schema)
        except re.error:
            found.append(schema)   # an ECMA pattern Python cannot read: assume it applies
    return found


def _pattern_or(node: dict, name: str, extra):
    matches = _patterns_for(node, name)
    return matches[0] if matches else extra


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def _names(types: set[str]) -> str:
    return "/".join(sorted(types - {"integer"} if "number" in types else types))


def _show(values: list) -> str:
    text = ", ".join(json.dumps(v) for v in values[:10])
    return text + (f" (and {len(values) - 10} more)" if len(values) > 10 else "")
