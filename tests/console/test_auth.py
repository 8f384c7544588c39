"""kwire.console.auth without a process: password hashes, the users file, session cookies,
CSRF tokens and the audit line (in tests/conftest.py's FAST_MODULES: it must start nothing)."""
from __future__ import annotations

import base64
import logging

import pytest

from kwire.console.auth import (SESSION_TTL_S, Auth, UsersFileError, audit, hash_password, read_users_file,
                                verify_password)

NOW = 1_700_000_000.0


@pytest.fixture(scope="module")
def stored() -> str:
    return hash_password("secret")


def test_a_hash_verifies_its_password_only(stored):
    assert stored.startswith("scrypt$16384$8$1$") and stored.count("$") == 5
    assert "secret" not in stored
    assert verify_password("secret", stored)
    assert not verify_password("Secret", stored)
    assert not verify_password("", stored)


def test_hashes_are_salted_and_a_given_salt_is_deterministic():
    assert hash_password("pw") != hash_password("pw")
    salt = b"0123456789abcdef"
    assert hash_password("pw", salt=salt) == hash_password("pw", salt=salt)
    assert base64.b64decode(hash_password("pw", salt=salt).split("$")[4]) == salt


@pytest.mark.parametrize("bad", ["", "scrypt", "plain$secret", "bcrypt$16384$8$1$c2FsdA==$aGFzaA==",
                                 "scrypt$x$8$1$c2FsdA==$aGFzaA==", "scrypt$16384$8$1$not base64!$aGFzaA==",
                                 "scrypt$16384$8$1$c2FsdA==$aGFzaA==$extra"])
def test_a_malformed_stored_hash_never_verifies_and_never_raises(bad):
    assert verify_password("secret", bad) is False


def test_the_users_file_skips_blanks_and_comments(tmp_path, stored):
    path = tmp_path / "users"
    path.write_text(f"# the console's users\n\nalice:{stored}\n  bob:{stored}  \n", encoding="utf-8")
    assert read_users_file(str(path)) == {"alice": stored, "bob": stored}


@pytest.mark.parametrize("line", ["alice", "alice:", ":scrypt$1$2$3$4$5", "alice:secret", "alice:scrypt$1$2$3$4",
                                  "alice:bcrypt$1$2$3$4$5"])
def test_a_malformed_users_file_line_is_named_by_its_number(tmp_path, stored, line):
    path = tmp_path / "users"
    path.write_text(f"# header\nbob:{stored}\n{line}\n", encoding="utf-8")
    with pytest.raises(UsersFileError, match=rf"^{path}:3: expected name:scrypt\$N\$r\$p\$salt\$hash"):
        read_users_file(str(path))


def test_an_unreadable_users_file_is_a_users_file_error(tmp_path):
    with pytest.raises(UsersFileError, match="cannot read the users file .*missing"):
        read_users_file(str(tmp_path / "missing"))


def test_login_is_required_only_with_users(stored):
    assert Auth({"alice": stored}).login_required
    assert not Auth(None).login_required
    auth = Auth({"alice": stored})
    assert auth.check_password("alice", "secret")
    assert not auth.check_password("alice", "wrong")
    assert not auth.check_password("mallory", "secret")
    assert not Auth(None).check_password("alice", "secret")


def test_a_session_cookie_names_its_user_until_it_expires(stored):
    auth = Auth({"alice": stored})
    cookie = auth.session_cookie("alice", now=NOW)
    assert auth.session_user(cookie, now=NOW) == "alice"
    assert auth.session_user(cookie, now=NOW + SESSION_TTL_S - 1) == "alice"
    assert auth.session_user(cookie, now=NOW + SESSION_TTL_S + 1) is None


def test_a_tampered_or_foreign_session_cookie_is_no_session(stored):
    auth = Auth({"alice": stored, "bob": stored})
    cookie = auth.session_cookie("alice", now=NOW)
    encoded, expiry, nonce, signature = cookie.split("|")
    bob = base64.urlsafe_b64encode(b"bob").decode()
    assert auth.session_user(f"{bob}|{expiry}|{nonce}|{signature}", now=NOW) is None            # another user
    assert auth.session_user(f"{encoded}|{int(expiry) + 3600}|{nonce}|{signature}", now=NOW) is None   # a later expiry
    flipped = signature[:-1] + ("1" if signature[-1] == "0" else "0")
    assert auth.session_user(f"{encoded}|{expiry}|{nonce}|{flipped}", now=NOW) is None
    assert auth.session_user(f"{encoded}|{expiry}|{nonce}|{'0' * len(signature)}", now=NOW) is None
    assert Auth({"alice": stored}).session_user(cookie, now=NOW) is None      # another console's secret (a restart)
    for garbage in (None, "", "alice", "a|b", "||", "|||", f"{encoded}|soon|{signature}", "\u00e9|1|2"):
        assert auth.session_user(garbage, now=NOW) is None


def test_a_logged_out_session_stays_out_while_other_sessions_of_the_user_work(stored):
    auth = Auth({"alice": stored})
    first, second = auth.session_cookie("alice", now=NOW), auth.session_cookie("alice", now=NOW)
    assert first != second                                   # a nonce: one logout ends one session
    auth.revoke(first, now=NOW)
    assert auth.session_user(first, now=NOW + 1) is None
    assert auth.session_user(second, now=NOW + 1) == "alice"
    auth.revoke("garbage", now=NOW)                          # nothing to revoke, nothing raised


def test_a_session_of_a_user_no_longer_in_the_file_is_refused(stored):
    secret = b"k" * 32
    cookie = Auth({"alice": stored}, secret=secret).session_cookie("alice", now=NOW)
    assert Auth({"bob": stored}, secret=secret).session_user(cookie, now=NOW) is None
    assert Auth(None, secret=secret).session_user(cookie, now=NOW) == "alice"      # no users file: anyone


def test_a_csrf_token_belongs_to_one_user_of_one_console():
    auth = Auth(None)
    token = auth.csrf_token("alice")
    assert token == auth.csrf_token("alice") and len(token) == 64
    assert auth.check_csrf("alice", token)
    assert not auth.check_csrf("bob", token)
    assert token != auth.csrf_token("anonymous")
    assert not Auth(None).check_csrf("alice", token)          # another secret
    for bad in (None, "", token[:-1], token.upper() if token.upper() != token else token + "0"):
        assert not auth.check_csrf("alice", bad)


def test_the_audit_line_names_user_action_target_and_details(caplog):
    with caplog.at_level(logging.INFO, logger="kwire.console.audit"):
        audit("alice", "quota-set", "user-principal 'bob'", key="producer_byte_rate", value=1024.0)
    [record] = caplog.records
    assert record.name == "kwire.console.audit"
    assert record.getMessage() == ("console write: user=alice action=quota-set target=user-principal 'bob' "
                                   "key='producer_byte_rate' value=1024.0")


def test_a_non_ascii_cookie_or_token_is_refused_not_raised():
    auth = Auth(None)
    for cookie in ("YWxpY2U=|9999999999|\u00e9", "x|\u00e9", "\u00e9|1|2", "YWxpY2U=|9999999999|\udcff"):
        assert auth.session_user(cookie, now=NOW) is None
    for token in ("\u00e9", "\u00e9" * 64, "\udcff"):
        assert not auth.check_csrf("alice", token)
