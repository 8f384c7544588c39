"""Imports flow one way (STYLE.md's layering table); checked by reading every module's imports."""
from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# layer folder -> third-party/kwire packages it may import besides the stdlib
ALLOWED = {
    "codecs": {"kafka", "crc32c", "cramjam"},
    "log": {"kwire.codecs", "crc32c", "kafka"},
    "groups": {"kwire.codecs"},
    "admin": {"kwire.codecs", "kwire.log", "kwire.groups"},
}
# the sans-I/O layers read no clock and open no socket or thread: time is passed in
SANS_IO_FORBIDDEN = {"socket", "asyncio", "selectors", "select", "threading", "time", "datetime", "random"}
SANS_IO = {"codecs", "groups", "admin"}
# the client-side layers use the broker only as a process or fixture
CLIENT_LAYERS = {"compat_tests", "spark"}
CLIENT_MAY_IMPORT = {"kwire.compat_tests", "kwire.spark", "kwire.testing"}


def imported_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


def under(name: str, packages) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def violations(path: pathlib.Path) -> list[str]:
    layer = path.relative_to(ROOT).parts[0]
    bad = []
    for name in imported_modules(path):
        top = name.split(".")[0]
        if layer in CLIENT_LAYERS:
            if top == "kwire" and not under(name, CLIENT_MAY_IMPORT):
                bad.append(name)
            continue
        if top == "__future__" or (top in sys.stdlib_module_names and not (
                layer in SANS_IO and top in SANS_IO_FORBIDDEN)):
            continue
        if not under(name, ALLOWED[layer]):
            bad.append(name)
    return sorted(bad)


MODULES = sorted(p for layer in (*ALLOWED, *CLIENT_LAYERS) for p in (ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_respect_layering(path):
    assert not violations(path), f"{path.relative_to(ROOT)} imports {violations(path)}"


def test_no_layer_below_the_server_imports_trio():
    for layer in ALLOWED:
        for path in (ROOT / layer).rglob("*.py"):
            assert "trio" not in {n.split(".")[0] for n in imported_modules(path)}, path
