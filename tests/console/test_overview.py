"""The overview page in chromium, against three brokers."""
from __future__ import annotations

import re

from playwright.sync_api import expect


def test_the_overview_lists_every_broker_and_the_controller(console, console_cluster, page):
    page.goto(console.url + "/")
    expect(page.locator("#card-brokers .value")).to_have_text("3")
    rows = page.locator("main table").first.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("main table").first).to_contain_text("controller")
    for b in console_cluster.brokers.values():
        expect(page.locator("main table").first).to_contain_text(b.bootstrap)
    expect(page).to_have_title(re.compile("Overview"))
