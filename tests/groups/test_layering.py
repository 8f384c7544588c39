"""groups/ imports only the stdlib (no clocks, sockets or threads) and kwire.codecs."""
import ast
import pathlib
import sys

GROUPS = pathlib.Path(__file__).resolve().parents[2] / "groups"
FORBIDDEN_STDLIB = {"socket", "time", "asyncio", "threading", "select", "selectors", "datetime", "random"}


def test_groups_imports():
    for path in sorted(GROUPS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                ok = (name == "kwire.codecs" or name.startswith("kwire.codecs.")
                      or (top in sys.stdlib_module_names and top not in FORBIDDEN_STDLIB) or top == "__future__")
                assert ok, f"{path.name} imports {name}"
