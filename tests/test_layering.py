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


# -- inside kwire/: the server's own packages ---------------------------------------------------
# Low to high: runtime -> transport -> security, metrics -> services -> cluster -> schemas -> handlers ->
# server -> testing, tools -> console (a Kafka client, like the tools), cli.  A package may import the ones on its left, never on its right.
SERVER_ROOT = ROOT / "kwire"
ORDER = ["runtime", "transport", "security", "metrics", "services", "cluster", "schemas", "handlers", "server",
         "testing", "tools", "console"]
# what each package must not import (besides everything to its right in ORDER)
NEVER = {
    "security": {"metrics"},
    "metrics": {"security"},
}
# third-party modules owned by one place: only these files import them
OWNED = {
    "kazoo": {"cluster/zk.py", "cluster/acl_store.py", "cluster/scram_store.py",   # the ZooKeeper stores
              "cluster/quota_store.py",
              "testing/zookeeper.py"},                                         # waits for a test ZooKeeper
    "ssl": {"security/", "testing/cluster.py"},               # testing/cluster.py makes test certificates
    "prometheus_client": {"metrics/"},
}


def package_of(path: pathlib.Path) -> str | None:
    parts = path.relative_to(SERVER_ROOT).parts
    return parts[0] if len(parts) > 1 else None


def forbidden_for(package: str) -> set[str]:
    right = set(ORDER[ORDER.index(package) + 1:]) if package in ORDER else set()
    return {f"kwire.{p}" for p in right | NEVER.get(package, set())} | {"kwire.cli"}


SERVER_MODULES = sorted(p for p in SERVER_ROOT.rglob("*.py") if package_of(p) in ORDER)


@pytest.mark.parametrize("path", SERVER_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_server_packages_import_only_to_their_left(path):
    package = package_of(path)
    bad = sorted(n for n in imported_modules(path) if under(n, forbidden_for(package))
                 and not under(n, {f"kwire.{package}"}))
    assert not bad, f"{path.relative_to(ROOT)} ({package}/) imports {bad}"


def test_every_kwire_subpackage_has_a_place_in_the_order():
    packages = {p.name for p in SERVER_ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(ORDER), f"add {packages - set(ORDER)} to ORDER (or remove {set(ORDER) - packages})"


@pytest.mark.parametrize("module", sorted(OWNED))
def test_third_party_modules_stay_with_their_owner(module):
    owners = OWNED[module]
    users = sorted(str(p.relative_to(SERVER_ROOT)) for p in SERVER_ROOT.rglob("*.py")
                   if module in {n.split(".")[0] for n in imported_modules(p)})
    strays = [u for u in users if not any(u == o or (o.endswith("/") and u.startswith(o)) for o in owners)]
    assert users and not strays, f"{module} imported outside {sorted(owners)}: {strays}"


def test_the_checks_catch_a_backward_import():
    assert "kwire.cluster" in forbidden_for("services") and "kwire.server" in forbidden_for("handlers")
    assert "kwire.services" not in forbidden_for("cluster")
