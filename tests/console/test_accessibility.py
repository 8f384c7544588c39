"""Accessibility basics of the console's pages: axe-core's WCAG 2.1 A/AA rules (labels, names,
contrast, landmarks), and the keyboard: a skip link first, every menu entry reachable by Tab."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.axe import ensure_axe, violations

PAGES = ["/", "/topics", "/topics/console-a11y", "/messages?topic=console-a11y&partition=0",
         "/groups", "/security"]


@pytest.fixture(scope="module")
def axe_script():
    script, why = ensure_axe()
    if script is None:
        pytest.skip(f"axe-core unavailable: {why}")
    return script


@pytest.fixture(scope="module")
def a11y_topic(console_cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    admin.create_topics([NewTopic("console-a11y", 1, 1)])["console-a11y"].result(15)
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap})
    producer.produce("console-a11y", key=b"k", value=b'{"a": 1}', headers=[("h", b"v")])
    assert producer.flush(10) == 0
    return "console-a11y"


@pytest.mark.parametrize("path", PAGES)
def test_a_page_has_no_wcag_a_or_aa_violations(console, page, axe_script, a11y_topic, path):
    response = page.goto(console.url + path)
    assert response.status == 200, path
    for details in page.locator("details").all():      # the forms inside collapsed panels count too
        details.evaluate("d => d.open = true")
    found = violations(page, axe_script)
    assert not found, "\n".join(found)


def test_the_keyboard_reaches_the_skip_link_then_every_menu_entry(console, page):
    page.goto(console.url + "/topics")
    page.keyboard.press("Tab")
    expect(page.locator("a.skip")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.goto(console.url + "/topics")
    entries = page.locator("header nav a")
    seen = []
    for _ in range(entries.count() + 3):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("() => document.activeElement.textContent.trim()"))
    for label in entries.all_inner_texts():
        assert label in seen, f"{label!r} not reached by Tab: {seen}"
