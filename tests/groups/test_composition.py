"""The coordinators are composed, not mixed in: no component reaches into another's private
names, no class is a mixin; and the deadline queue they share keeps its promises."""
from __future__ import annotations

import ast
import pathlib

import pytest

from kwire.groups.deadlines import Deadlines

GROUPS = pathlib.Path(__file__).resolve().parents[2] / "groups"
# Attributes of the standard library, not of a kwire component.
ALLOWED = {"_value2member_map_"}


def _modules():
    return sorted(GROUPS.glob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_component_uses_another_ones_private_names(path):
    tree = ast.parse(path.read_text())
    offenders = [f"{path.name}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and node.attr.startswith("_")
                 and not node.attr.startswith("__") and node.attr not in ALLOWED
                 and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]
    assert offenders == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_mixins(path):
    tree = ast.parse(path.read_text())
    names = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
             and (node.name.endswith("Mixin") or any(ast.unparse(b).endswith("Mixin") for b in node.bases))]
    assert names == []


def test_deadlines_pop_due_in_order_and_skip_stale_entries():
    d = Deadlines()
    d.set("a", 30)
    d.set("b", 10)
    d.set("a", 20)          # the entry at 30 is stale now
    d.set("c", 50)
    d.set("c", None)        # no deadline any more
    assert d.earliest() == 10
    assert list(d.pop_due(25)) == ["b", "a"]
    assert list(d.pop_due(100)) == []
    assert d.earliest() is None


def test_deadlines_discard_and_compaction_keep_the_live_entries():
    d = Deadlines()
    for i in range(200):
        d.set("k", i + 1)   # 199 stale entries
    d.set("other", 500)
    d.discard("other")
    d.compact()
    assert d.earliest() == 200
    assert list(d.pop_due(1000)) == ["k"]
