"""The config modules stay below the server: stdlib, kwire.codecs and kwire.log.config only, never trio."""
from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ADMIN = pathlib.Path(__file__).resolve().parents[2] / "admin"
MODULES = ["broker_config.py", "topic_config.py", "describe.py"]
ALLOWED_KWIRE = ("kwire.codecs", "kwire.log.config")


def _imports(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level


@pytest.mark.parametrize("module", MODULES)
def test_config_modules_import_only_lower_layers(module):
    for name, level in _imports(ADMIN / module):
        if level:             # relative: another admin module
            continue
        top = name.split(".")[0]
        if top == "kwire":
            assert name.startswith(ALLOWED_KWIRE), f"{module} imports {name}"
        else:
            assert top in sys.stdlib_module_names or top == "__future__", f"{module} imports {name}"
