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


def test_a_killed_brokers_partitions_show_as_under_replicated_within_the_session_timeout(console, console_cluster, page):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    admin.create_topics([NewTopic("console-health", 6, 3)])["console-health"].result(15)
    page.goto(console.url + "/")
    expect(page.locator("#card-under-replicated .value")).to_have_text("0", timeout=20000)
    victim = 3
    console_cluster.kill(victim)
    try:
        # zookeeper.session.timeout.ms is 6 s here; the overview refreshes every 5 s
        expect(page.locator("#card-under-replicated")).to_have_class(re.compile("bad"), timeout=6000 + 5000 + 8000)
        assert int(page.locator("#card-under-replicated .value").inner_text().replace(",", "")) >= 6
        expect(page.locator("main table").first.locator("tbody tr")).to_have_count(2)
        page.goto(console.url + "/topics/console-health")       # pages still work with a broker down
        expect(page.locator("#partitions-table tbody tr")).to_have_count(6)
        expect(page.locator("#partitions-table td.bad").first).to_be_visible()
    finally:
        console_cluster.start_broker(victim)
    page.goto(console.url + "/")
    expect(page.locator("#card-under-replicated .value")).to_have_text("0", timeout=60000)
