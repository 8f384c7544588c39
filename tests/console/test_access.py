"""The console's own login and read-only mode, in chromium, on the session cluster: a console
with ``--users-file`` sends every page to /login until alice logs in (a wrong password is
refused), and again after she logs out; her writes are audited with her name.  A
``--read-only`` console hides the security pages' write controls and refuses their writes
(403) even with the page's CSRF token; a normal console refuses a write without that token.
(The session cluster has no authorizer: the ACL page says so.)"""
from __future__ import annotations

import concurrent.futures
import re
import urllib.parse
import uuid

import pytest
from playwright.sync_api import expect

from kwire.console.auth import hash_password
from tests.support.console import ConsoleProcess

PAGES = ["/", "/topics", "/security/acls", "/security/users", "/security/quotas"]
WRITE_PAGES = ["/security/users", "/security/quotas"]     # no authorizer: the ACL page only has its note


@pytest.fixture(scope="module")
def consoles(console_cluster, tmp_path_factory):
    """(a console with a users file, a read-only console), started side by side."""
    directory = tmp_path_factory.mktemp("access-consoles")
    users = directory / "users"
    users.write_text(f"# console users\nalice:{hash_password('secret')}\n", encoding="utf-8")
    made = [ConsoleProcess(console_cluster.bootstrap, str(directory / "login.log"), "--users-file", str(users)),
            ConsoleProcess(console_cluster.bootstrap, str(directory / "read-only.log"), "--read-only")]
    try:
        with concurrent.futures.ThreadPoolExecutor(len(made)) as pool:
            list(pool.map(ConsoleProcess.start, made))
        yield made
    finally:
        for c in made:
            c.close()


@pytest.fixture
def users_console(consoles):
    return consoles[0]


@pytest.fixture
def read_only_console(consoles):
    return consoles[1]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def log_in(page, console, password: str = "secret", path: str = "/"):
    page.goto(console.url + path)
    page.get_by_label("User").fill("alice")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def csrf_token(page) -> str:
    """The session's CSRF token, as htmx sends it (the body's hx-headers)."""
    return page.evaluate("() => JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']")


def quota_form(user: str, token: str | None) -> dict:
    form = {"user": user, "key": "consumer_byte_rate", "value": "4096"}
    return form if token is None else {**form, "csrf": token}


def test_every_page_needs_a_login(users_console, page):
    for path in PAGES:
        page.goto(users_console.url + path)
        expect(page).to_have_url(f"{users_console.url}/login?next={urllib.parse.quote(path)}")
        expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    refused = page.request.post(users_console.url + "/security/quotas", form=quota_form(unique("q"), None),
                                max_redirects=0)
    assert refused.status == 303 and refused.headers["location"].startswith("/login")
    htmx = page.request.get(users_console.url + "/", headers={"HX-Request": "true"}, max_redirects=0)
    assert (htmx.status, htmx.headers.get("hx-redirect")) == (401, "/login")


def test_a_wrong_password_or_an_unknown_user_is_refused(users_console, page):
    log_in(page, users_console, password="not-the-secret")
    expect(page.get_by_role("alert")).to_have_text("Unknown user or wrong password.")
    page.get_by_label("User").fill("mallory")
    page.get_by_label("Password").fill("secret")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("Unknown user or wrong password.")
    assert [c for c in page.context.cookies() if c["name"] == "kwire_console"] == []
    page.goto(users_console.url + "/")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    assert "console login refused for 'mallory'" in users_console.log_text()


def test_log_in_see_the_overview_then_log_out(users_console, page):
    log_in(page, users_console, path="/security/users")
    expect(page).to_have_url(users_console.url + "/security/users")          # back where she was going
    expect(page.locator("header .who")).to_contain_text("alice")
    page.goto(users_console.url + "/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator("#card-brokers .value")).to_have_text("3")
    cookie = next(c for c in page.context.cookies() if c["name"] == "kwire_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(users_console.url + "/login")
    page.context.add_cookies([cookie])                       # a copy of the cookie is logged out too
    for path in PAGES:
        page.goto(users_console.url + path)
        expect(page).to_have_url(re.compile(r"/login\?next="))


def test_a_write_is_audited_with_the_console_user(users_console, page):
    user, password = unique("audited"), "pw-" + uuid.uuid4().hex
    log_in(page, users_console, path="/security/users")
    form = page.get_by_role("form", name="Create or update a user")
    form.get_by_label("User").fill(user)
    form.get_by_label("Password").fill(password)
    form.get_by_role("button", name="Set the credential").click()
    expect(page.locator("p.flash.ok")).to_contain_text(f"Set the SCRAM-SHA-256 credential of {user}")
    page.get_by_role("link", name=f"Delete the SCRAM-SHA-256 credential of {user}").click()
    page.get_by_role("button", name="Delete the credential").click()
    expect(page.locator("p.flash.ok")).to_contain_text(f"Deleted the SCRAM-SHA-256 credential of {user}")
    log = users_console.log_text()
    assert f"console write: user=alice action=scram-set target={user} mechanism='SCRAM-SHA-256'" in log
    assert f"console write: user=alice action=scram-delete target={user}" in log
    assert password not in log


def test_read_only_hides_the_write_controls_and_refuses_writes(read_only_console, users_console, page):
    log_in(page, users_console)
    for path in WRITE_PAGES:
        page.goto(users_console.url + path)                   # a console that may write has them
        assert page.locator("main form[method=post]").count() == 1, path
        page.goto(read_only_console.url + path)
        expect(page.locator("header .badge")).to_have_text("read-only")
        expect(page.locator("main table")).to_be_visible()
        expect(page.locator("main form[method=post]")).to_have_count(0)
        expect(page.locator("main").get_by_role("button")).to_have_count(0)
        expect(page.locator("main").get_by_role("link", name=re.compile("^(Delete|Remove)"))).to_have_count(0)
    page.goto(read_only_console.url + "/security/acls")
    expect(page.get_by_role("note")).to_contain_text("no authorizer")

    token = csrf_token(page)
    user = unique("read-only")
    for path, form in (("/security/quotas", quota_form(user, token)),
                       ("/security/quotas/delete", {**quota_form(user, token), "value": ""}),
                       ("/security/users", {"user": user, "password": "pw", "csrf": token}),
                       ("/security/acls", {"resource_type": "TOPIC", "name": "t", "principal": "User:x",
                                           "operation": "READ", "permission": "ALLOW", "csrf": token})):
        refused = page.request.post(read_only_console.url + path, form=form)
        assert refused.status == 403, path
        assert "The console is read-only" in refused.text()
    confirm = page.request.get(read_only_console.url + f"/security/users/delete?user={user}&mechanism=SCRAM-SHA-256")
    assert confirm.status == 403
    page.goto(read_only_console.url + "/security/quotas")
    expect(page.locator("#quota-table")).not_to_contain_text(user)


def test_a_write_needs_the_session_csrf_token(users_console, page):
    log_in(page, users_console, path="/security/quotas")
    url, user = users_console.url, unique("csrf")
    for token in (None, "0" * 64):
        refused = page.request.post(url + "/security/quotas", form=quota_form(user, token))
        assert refused.status == 403
        assert "did not come from this console" in refused.text()
    token = csrf_token(page)
    done = page.request.post(url + "/security/quotas", form=quota_form(user, token))
    assert done.status == 200 and f"Set consumer_byte_rate=4096 for user-principal &#39;{user}&#39;" in done.text()
    done = page.request.post(url + "/security/quotas/delete", headers={"X-CSRF-Token": token},
                             form={"user": user, "key": "consumer_byte_rate"})
    assert done.status == 200 and "Removed the consumer_byte_rate quota" in done.text()
    assert f"console write: user=alice action=quota-remove target=user-principal '{user}'" in users_console.log_text()


def test_a_cluster_without_an_authorizer_shows_a_note_on_the_acl_page(users_console, page):
    log_in(page, users_console, path="/security")
    expect(page).to_have_url(users_console.url + "/security/acls")
    expect(page.get_by_role("note")).to_contain_text("This cluster has no authorizer (SECURITY_DISABLED)")
    expect(page.get_by_role("form", name="Create an ACL")).to_have_count(0)
    expect(page.get_by_role("link", name="Security")).to_have_attribute("aria-current", "page")
    response = page.goto(users_console.url + "/security/acls")
    assert response.status == 200
