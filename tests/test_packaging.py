"""A wheel (``pip install .``, not only ``-e``) must hold every package of the import root:
pyproject.toml lists them by hand, and kwire.handlers was once missing from the list."""
from __future__ import annotations

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, folders = set(setuptools["packages"]), setuptools["package-dir"]
    found = set()
    for name, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            if not any(part.startswith(".") or part == "__pycache__" for part in relative):
                found.add(".".join((name, *relative)))
    assert found - listed == set(), "add these to [tool.setuptools] packages"
