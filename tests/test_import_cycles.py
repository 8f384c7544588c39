"""No import cycles between files: every module's imports, read from its source, form a DAG.

Imports anywhere in a file count (module level, inside functions, under
``if __name__ == "__main__"``): a cycle that only closes at run time still
ties the two files together.  ``kwire.X`` names are resolved to files with the
editable install's mapping (pyproject's package-dir), relative imports
included.  ``import a.b`` is an edge to ``a/b.py`` only, not to the parent
packages' ``__init__.py`` (importing a submodule runs them, but they are
not what the importer depends on).
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]

# folder -> import name (pyproject.toml's [tool.setuptools.package-dir])
PACKAGES = {"kwire": "kwire", "codecs": "kwire.codecs", "log": "kwire.log",
            "groups": "kwire.groups", "admin": "kwire.admin", "spark": "kwire.spark",
            "compat_tests": "kwire.compat_tests"}

def module_files(root: pathlib.Path, packages: dict[str, str]) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every .py file under the package folders."""
    out = {}
    for folder, name in packages.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([name, *parts])] = path
    return out


def _package_of(module: str, path: pathlib.Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imported_modules(module: str, path: pathlib.Path, files: dict[str, pathlib.Path]) -> set[str]:
    """The modules in ``files`` that ``path`` imports.

    ``from x import y`` is an edge to ``x.y`` when that is a module, else to ``x``.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(module, path)
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in files else base)
    return {name for name in found if name in files and name != module}


def import_graph(files: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    """Module -> the modules (files in ``files``) it imports."""
    return {module: imported_modules(module, path, files) for module, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a closed path of modules) per strongly connected component with 2+ modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:   # Tarjan; the graphs here are a few hundred nodes deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_closed_path(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _closed_path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path start -> ... -> start inside ``component`` (breadth-first, so a short one)."""
    start = min(component)
    parent: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w not in parent:
                parent[w] = v
                queue.append(w)
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def _as_files(cycle: list[str], files: dict[str, pathlib.Path], root: pathlib.Path) -> list[str]:
    return [str(files[m].relative_to(root)) for m in cycle]


def project_cycles() -> list[list[str]]:
    files = module_files(ROOT, PACKAGES)
    return [_as_files(c, files, ROOT) for c in cycles(import_graph(files))]


def test_no_import_cycles():
    found = project_cycles()
    assert not found, "import cycles between files:\n" + "\n".join(" -> ".join(c) for c in found)


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_cycle_through_a_function_level_relative_import_is_found(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "def f():\n    from .c import g\n",
        "pkg/c.py": "if __name__ == '__main__':\n    import kwire.pkg.a\n",
        "pkg/d.py": "from .a import x\n",          # imports into the cycle, is not part of it
    })
    files = module_files(tmp_path, {"pkg": "kwire.pkg"})
    assert cycles(import_graph(files)) == [["kwire.pkg.a", "kwire.pkg.b", "kwire.pkg.c", "kwire.pkg.a"]]


def test_imports_in_one_direction_are_no_cycle(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from .a import x\n",
        "pkg/a.py": "from .b import y\nimport kwire.pkg.c\n",
        "pkg/b.py": "from . import c\n",
        "pkg/c.py": "import os\n",
    })
    files = module_files(tmp_path, {"pkg": "kwire.pkg"})
    assert cycles(import_graph(files)) == []
