"""The security pages in chromium against a kwire broker with SASL (PLAIN and SCRAM) and Kafka's
ACL authorizer: the console logs in as the super user ``admin`` (``--command-config``); an ACL,
a SCRAM user and a quota made on the pages are seen by stock clients (confluent-kafka, and
kafka-python's protocol classes for quotas, which confluent-kafka lacks), then deleted from the
pages.  A console logged in as ``alice`` (no cluster rights) shows a readable note instead of
an error (a cluster without an authorizer: tests/console/test_access.py)."""
from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)
from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
from kafka.admin import ResourceType as KafkaResourceType
from playwright.sync_api import expect

from tests.support.acl_broker import AclBroker
from tests.support.console import ConsoleProcess


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with AclBroker(tmp_path_factory.mktemp("security-broker"),
                   **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"}) as b:
        yield b


def _console(broker, tmp_path_factory, principal: str) -> ConsoleProcess:
    directory = tmp_path_factory.mktemp(f"console-{principal}")
    return ConsoleProcess(broker.bootstrap, str(directory / "console.log"),
                          "--command-config", broker.command_config(principal, directory)).start()


@pytest.fixture(scope="module")
def admin_console(secured, tmp_path_factory):
    c = _console(secured, tmp_path_factory, "admin")
    yield c
    c.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acls_of_topic(broker, name: str) -> list:
    admin = broker.admin()
    flt = AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    return admin.describe_acls(flt, request_timeout=10).result()


def logs_in(broker, user: str, password: str, mechanism: str, timeout: float = 15) -> bool:
    """Whether librdkafka gets through SASL/SCRAM as ``user`` (and then lists the topics); a
    refusal is seen on its error callback, without waiting out the timeout."""
    errors: list = []
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                         "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return True
        except KafkaException:
            admin.poll(0)
            if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
                return False
    return False


def quotas_of(broker) -> dict:
    """{entity: {key: value}} of every client quota, through kafka-python's admin client."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest
    admin = KafkaAdminClient(**broker.kafka_python("admin"), request_timeout_ms=10000)
    try:
        async def call():
            return await admin._manager.send(DescribeClientQuotasRequest(components=[], strict=False))
        response = admin._manager.run(call)
    finally:
        admin.close()
    assert response.error_code == 0, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_an_acl_created_on_the_page_is_seen_by_a_stock_client_filtered_and_deleted(admin_console, secured, page):
    topic = unique("orders")
    page.goto(admin_console.url + "/security/acls")
    expect(page).to_have_title(re.compile("ACLs"))
    form = page.get_by_role("form", name="Create an ACL")
    form.get_by_label("Resource type").select_option("TOPIC")
    form.get_by_label("Resource name").fill(topic)
    form.get_by_label("Pattern type").select_option("PREFIXED")
    form.get_by_label("Principal").fill("User:alice")
    form.get_by_label("Operation").select_option("READ")
    form.get_by_label("Permission").select_option("DENY")
    form.get_by_role("button", name="Create the ACL").click()
    expect(page.locator("p.flash.ok")).to_contain_text(
        f"Created the ACL: DENY User:alice from host * to READ TOPIC '{topic}'")

    [binding] = acls_of_topic(secured, topic)
    assert (binding.principal, binding.host, binding.operation, binding.permission_type,
            binding.resource_pattern_type) == ("User:alice", "*", AclOperation.READ, AclPermissionType.DENY,
                                               ResourcePatternType.PREFIXED)

    # the filter: by name and principal, then one that matches nothing
    filters = page.get_by_role("form", name="Filter the ACLs")
    filters.get_by_label("Resource name").fill(topic)
    filters.get_by_label("Principal").fill("User:alice")
    filters.get_by_role("button", name="Filter").click()
    rows = page.locator("#acl-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("PREFIXED")
    page.get_by_role("form", name="Filter the ACLs").get_by_label("Principal").fill("User:bob")
    page.get_by_role("form", name="Filter the ACLs").get_by_role("button", name="Filter").click()
    expect(page.locator("#acl-table tbody")).to_contain_text("No ACL matches the filter.")

    # delete, with a confirmation page on the way (reached with the keyboard)
    page.goto(admin_console.url + f"/security/acls?name={topic}")
    link = page.get_by_role("link", name=f"Delete: DENY User:alice READ on TOPIC {topic}")
    link.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Delete an ACL")).to_be_visible()
    expect(page.locator("dl.facts")).to_contain_text(topic)
    page.get_by_role("button", name="Delete the ACL").click()
    expect(page.locator("p.flash.ok")).to_contain_text("Deleted the ACL")
    assert acls_of_topic(secured, topic) == []
    assert f"action=acl-delete target=TOPIC:{topic}" in admin_console.log_text()


def test_bad_acl_forms_are_refused_with_a_readable_reason(admin_console, page):
    page.goto(admin_console.url + "/security/acls")
    form = page.get_by_role("form", name="Create an ACL")
    form.get_by_label("Resource type").select_option("GROUP")
    form.get_by_label("Resource name").fill("billing")
    form.get_by_label("Principal").fill("alice")                  # no type
    form.get_by_role("button", name="Create the ACL").click()
    expect(page.get_by_role("alert")).to_contain_text("is not in principalType:name format")
    form = page.get_by_role("form", name="Create an ACL")
    expect(form.get_by_label("Resource name")).to_have_value("billing")      # what was typed is kept
    form.get_by_label("Principal").fill("User:alice")
    form.get_by_label("Operation").select_option("WRITE")                   # groups have no Write
    form.get_by_role("button", name="Create the ACL").click()
    expect(page.get_by_role("alert")).to_contain_text("ResourceType GROUP only supports operations")
    assert "Traceback" not in page.content()


def test_a_scram_user_made_on_the_page_logs_in_with_a_stock_client_until_deleted(admin_console, secured, page):
    user, password = unique("carol"), "carol-" + uuid.uuid4().hex
    page.goto(admin_console.url + "/security/users")
    form = page.get_by_role("form", name="Create or update a user")
    form.get_by_label("User").fill(user)
    form.get_by_label("Mechanism").select_option("SCRAM-SHA-512")
    form.get_by_label("Password").fill(password)
    form.get_by_label("Iterations").fill("8192")
    form.get_by_role("button", name="Set the credential").click()
    expect(page.locator("p.flash.ok")).to_contain_text(f"Set the SCRAM-SHA-512 credential of {user}")
    row = page.locator("#user-table tbody tr", has_text=user)
    expect(row).to_contain_text("SCRAM-SHA-512")
    expect(row).to_contain_text("8,192")
    expect(page.get_by_role("form", name="Create or update a user").get_by_label("Password")).to_have_value("")

    assert logs_in(secured, user, password, "SCRAM-SHA-512")
    assert not logs_in(secured, user, "wrong", "SCRAM-SHA-512")
    log = admin_console.log_text()
    assert f"action=scram-set target={user}" in log and password not in log

    page.get_by_role("link", name=f"Delete the SCRAM-SHA-512 credential of {user}").click()
    page.get_by_role("button", name="Delete the credential").click()
    expect(page.locator("p.flash.ok")).to_contain_text(f"Deleted the SCRAM-SHA-512 credential of {user}")
    expect(page.locator("#user-table")).not_to_contain_text(user)
    assert not logs_in(secured, user, password, "SCRAM-SHA-512")

    # the broker's refusal, with Kafka's error name: too few iterations
    form = page.get_by_role("form", name="Create or update a user")
    form.get_by_label("User").fill(user)
    form.get_by_label("Password").fill(password)
    form.get_by_label("Iterations").evaluate("e => e.removeAttribute('min')")
    form.get_by_label("Iterations").fill("10")
    form.get_by_role("button", name="Set the credential").click()
    expect(page.get_by_role("alert")).to_contain_text(re.compile(r"was not set: [A-Z_]+"))
    assert password not in admin_console.log_text()


def test_a_quota_set_on_the_page_is_seen_by_a_stock_admin_client_and_removed(admin_console, secured, page):
    user = unique("quota-user")
    page.goto(admin_console.url + "/security/quotas")
    form = page.get_by_role("form", name="Set a quota")
    form.get_by_label("User", exact=True).fill(user)
    form.get_by_label("the default client id").check()
    form.get_by_label("Quota").select_option("producer_byte_rate")
    form.get_by_label("Value").fill("1048576")
    form.get_by_role("button", name="Set the quota").click()
    expect(page.locator("p.flash.ok")).to_contain_text(f"Set producer_byte_rate=1048576 for user-principal '{user}'")
    row = page.locator("#quota-table tbody tr", has_text=user)
    expect(row).to_contain_text("1,048,576")
    expect(row.locator("td").nth(1)).to_have_text("default")
    assert quotas_of(secured)[(("client-id", None), ("user", user))] == {"producer_byte_rate": 1048576.0}

    # a quota the broker refuses for this entity: Kafka's error name, no traceback
    form = page.get_by_role("form", name="Set a quota")
    form.get_by_label("User", exact=True).fill(user)
    form.get_by_label("Quota").select_option("connection_creation_rate")
    form.get_by_label("Value").fill("10")
    form.get_by_role("button", name="Set the quota").click()
    expect(page.get_by_role("alert")).to_contain_text("The quota was not set: INVALID_REQUEST")

    who = f"user-principal '{user}', the default client-id"
    page.get_by_role("link", name=f"Remove the producer_byte_rate quota of {who}").click()
    page.get_by_role("button", name="Remove the quota").click()
    expect(page.locator("p.flash.ok")).to_contain_text("Removed the producer_byte_rate quota")
    assert (("client-id", None), ("user", user)) not in quotas_of(secured)


@pytest.fixture
def some_of_everything(secured):
    """An ACL, a SCRAM user and a quota, made with stock clients, so that every table has rows."""
    from kafka.admin import KafkaAdminClient, UserScramCredentialDeletion, UserScramCredentialUpsertion
    from kwire.tools.quotas import alter_quotas
    name = unique("a11y")
    secured.allow("bob", ResourceType.TOPIC, name, AclOperation.READ)
    admin = KafkaAdminClient(**secured.kafka_python("admin"), request_timeout_ms=10000)
    try:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(name, "SCRAM-SHA-256", "pw")])
        assert alter_quotas(admin, [("user", name)], {"request_percentage": 50.0}, []) == (0, None)
        yield name
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(name, "SCRAM-SHA-256")])
        alter_quotas(admin, [("user", name)], {}, ["request_percentage"])
        admin.delete_acls([ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                     ResourcePatternFilter(KafkaResourceType.TOPIC, name,
                                                           ACLResourcePatternType.LITERAL))])
    finally:
        admin.close()


def test_the_pages_and_confirmations_are_labelled_and_pass_axe(admin_console, some_of_everything, page):
    from tests.support.axe import ensure_axe, violations
    script, why = ensure_axe()
    for path in ("/security/acls", "/security/users", "/security/quotas"):
        page.goto(admin_console.url + path)
        expect(page.locator("main table tbody")).to_contain_text(some_of_everything)
        unlabelled = page.evaluate("""() => [...document.querySelectorAll(
            'main input:not([type=hidden]), main select')].filter(e => e.labels.length === 0).map(e => e.name)""")
        assert unlabelled == [], path
        assert page.locator("main th:not([scope])").count() == 0, path
        expect(page.get_by_role("navigation", name="Security").get_by_role("link")).to_have_count(3)
        expect(page.locator("nav.tabs a[aria-current=page]")).to_have_attribute("href", path)
        if script is not None:
            found = violations(page, script)
            assert not found, "\n".join([path, *found])
        page.locator("main table tbody tr", has_text=some_of_everything).get_by_role("link").click()
        expect(page.get_by_role("button", name=re.compile("^(Delete|Remove) the"))).to_be_visible()
        if script is not None:
            found = violations(page, script)
            assert not found, "\n".join([page.url, *found])
    if script is None:
        pytest.skip(f"checked labels and header scopes; axe-core unavailable: {why}")


def test_a_principal_without_cluster_rights_gets_a_note_not_an_error(secured, tmp_path_factory, page):
    alice = _console(secured, tmp_path_factory, "alice")
    try:
        for path, what in (("/security/acls", "describe ACLs"), ("/security/users", "describe SCRAM users"),
                           ("/security/quotas", "describe client quotas")):
            response = page.goto(alice.url + path)
            assert response.status == 200
            expect(page.get_by_role("note")).to_contain_text(f"may not {what} (CLUSTER_AUTHORIZATION_FAILED)")
            expect(page.locator("main form[method=post]")).to_have_count(0)
    finally:
        alice.close()
