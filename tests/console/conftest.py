"""Fixtures for the console's browser tests: one 3-broker cluster and consoles on it for the
whole session, and Debian's chromium driven by Playwright.

``console_cluster``  a ClusterProcess of three brokers (skips where ZooKeeper cannot run)
``console``          ``kwire console`` on it, sampling every second (a ConsoleProcess)
``browser``          a headless chromium per module (skips with the reason where chromium or Playwright is missing)
``page``             a fresh page (own cookies) per test; ``console_url`` is prefixed by ``goto``

Tests share the cluster (package-scoped: it stops after the last console test): each uses topic
and group names of its own.
"""
from __future__ import annotations

import shutil

import pytest

from kwire.testing.cluster import ClusterProcess
from kwire.testing.zookeeper import zookeeper_available
from tests.support.console import ConsoleProcess

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="package")
def console_cluster():
    available, why = zookeeper_available()
    if not available:
        pytest.skip(f"ZooKeeper cannot run here: {why}")
    with ClusterProcess(3, properties={"zookeeper.session.timeout.ms": 6000}) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def console(console_cluster, tmp_path_factory):
    c = ConsoleProcess(console_cluster.bootstrap, str(tmp_path_factory.mktemp("console") / "console.log"))
    c.start()
    yield c
    c.close()


@pytest.fixture(scope="module")
def browser():
    """Module-scoped, not session-scoped: Playwright's sync API keeps an asyncio loop running on
    the main thread while it is open, and asyncio.run() (aiokafka's tests, the embedded broker's)
    then fails in every later module."""
    chromium = shutil.which("chromium") or (CHROMIUM if shutil.os.path.exists(CHROMIUM) else None)
    if chromium is None:
        pytest.skip("the browser tests need Debian's chromium (scripts/test installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the browser tests need Playwright (pip install -e '.[test]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15000)
    pg = context.new_page()
    yield pg
    context.close()
