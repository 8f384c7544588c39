"""log/ may import only the stdlib, kwire.codecs and crc32c; codecs/records.py no kwire layer."""
from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALLOWED = {
    "log": {"kwire.codecs", "crc32c"},
    "codecs": {"kafka", "crc32c", "cramjam"},
}


def imported_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


def allowed(name: str, layer: str) -> bool:
    if name.split(".")[0] in sys.stdlib_module_names or name == "__future__":
        return True
    return any(name == ok or name.startswith(ok + ".") for ok in ALLOWED[layer])


@pytest.mark.parametrize("path", sorted((ROOT / "log").glob("*.py"))
                         + [ROOT / "codecs" / "records.py"], ids=lambda p: p.name)
def test_imports_respect_layering(path):
    layer = path.parent.name
    bad = sorted(n for n in imported_modules(path) if not allowed(n, layer))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
