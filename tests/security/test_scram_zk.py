"""The ZooKeeper form of SCRAM users (kwire.cluster.scram_store, kwire.security.scram): Kafka's user-name
sanitization, the credential string as Kafka writes and reads it, the user znode's other
configs kept on an update, and which change notifications name a user.  No ZooKeeper here:
tests/cluster/test_cluster_scram.py runs the same against a real one."""
from __future__ import annotations

import json
import re

import pytest

from kwire.admin import zk_layout
from kwire.security.scram import (format_kafka_credential, kafka_config_credentials, parse_kafka_credential,
                         scram_credential)
from kwire.cluster.scram_store import changed_user, desanitize, sanitize, updated_config, user_path

SHA256 = scram_credential("SCRAM-SHA-256", "pw", b"0123456789abcdef", 4096)
SHA512 = scram_credential("SCRAM-SHA-512", "pw", b"0123456789abcdef", 8192)


@pytest.mark.parametrize("name, node", [
    ("alice", "alice"),
    ("a.b-c_d", "a.b-c_d"),                      # URLEncoder keeps letters, digits and .-_
    ("alice smith", "alice%20smith"),            # URLEncoder's "+" for a space, made %20
    ("a*b", "a%2Ab"),                            # * is a pattern in JMX names
    ("a~b", "a%7Eb"),                            # kept by RFC 3986, encoded by URLEncoder
    ("a+b", "a%2Bb"),
    ("CN=Some characters !@#$%&*()_-+=';:,/~",  # Kafka's SanitizerTest principal
     "CN%3DSome%20characters%20%21%40%23%24%25%26%2A%28%29_-%2B%3D%27%3B%3A%2C%2F%7E"),
    ("bjørn", "bj%C3%B8rn"),                     # UTF-8, upper-case hex
    ("<default>", "%3Cdefault%3E"),              # never the default-quota entity
])
def test_sanitize_is_kafkas(name, node):
    assert sanitize(name) == node
    assert desanitize(node) == name
    assert re.fullmatch(r"[A-Za-z0-9._\-%]+", node)
    assert user_path(name) == f"/config/users/{node}"


def test_desanitize_reads_urlencoders_plus_as_a_space():
    assert desanitize("alice+smith") == "alice smith"


def test_credential_string_is_kafkas_credential_to_string():
    text = format_kafka_credential(SHA512)
    assert re.fullmatch(r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,server_key=[A-Za-z0-9+/=]+,"
                        r"iterations=8192", text)


def test_credential_string_read_as_java_reads_it():
    text = format_kafka_credential(SHA256)
    # java.util.Base64's basic decoder does not require the "=" padding
    unpadded = ",".join(f"{k}={v.rstrip('=')}" for k, v in (t.split("=", 1) for t in text.split(",")))
    assert parse_kafka_credential(unpadded) == SHA256
    # Integer.parseInt takes a sign but no spaces or underscores
    assert parse_kafka_credential(text.replace("iterations=4096", "iterations=+4096")) == SHA256
    for bad in ("iterations= 4096", "iterations=4_096", "iterations=4096 "):
        with pytest.raises(ValueError, match="Credentials not valid"):
            parse_kafka_credential(text.replace("iterations=4096", bad))


def test_update_keeps_every_other_config_of_the_user():
    current = {"producer_byte_rate": "1024", "consumer_byte_rate": "2048",
               "SCRAM-SHA-256": format_kafka_credential(SHA256)}
    added = updated_config(current, frozenset(), {"SCRAM-SHA-512": format_kafka_credential(SHA512)})
    assert added == {**current, "SCRAM-SHA-512": format_kafka_credential(SHA512)}
    removed = updated_config(added, frozenset({"SCRAM-SHA-256"}), {})
    assert removed == {"producer_byte_rate": "1024", "consumer_byte_rate": "2048",
                       "SCRAM-SHA-512": format_kafka_credential(SHA512)}
    # the last credential gone: the znode keeps its quotas (Kafka does not delete it)
    assert updated_config(removed, frozenset({"SCRAM-SHA-512"}), {}) == {
        "producer_byte_rate": "1024", "consumer_byte_rate": "2048"}
    assert json.loads(zk_layout.encode_topic_config({})) == {"version": 1, "config": {}}


def test_credentials_of_a_user_znode():
    config = {"producer_byte_rate": "1024", "SCRAM-SHA-256": format_kafka_credential(SHA256),
              "SCRAM-SHA-512": "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096"}
    credentials, problems = kafka_config_credentials(config)
    assert credentials == {"SCRAM-SHA-256": SHA256}          # the bad one is left out, not fatal
    assert len(problems) == 1 and problems[0].startswith("SCRAM-SHA-512")
    too_many = format_kafka_credential(SHA256).replace("iterations=4096", "iterations=20000")
    assert kafka_config_credentials({"SCRAM-SHA-256": too_many})[0] == {}
    assert kafka_config_credentials({"SCRAM-SHA-1": "x", "quota": "1"}) == ({}, [])


@pytest.mark.parametrize("data, user", [
    (zk_layout.encode_config_change("users/alice"), "alice"),
    (zk_layout.encode_config_change("users/alice%20smith"), "alice smith"),
    (b'{"version":1,"entity_type":"users","entity_name":"bob"}', "bob"),     # older tools
    (zk_layout.encode_config_change("topics/alice"), None),
    (zk_layout.encode_config_change("users/<default>"), None),                # default quotas
    (zk_layout.encode_config_change("users/alice/clients/app"), None),        # per-client quotas
    (zk_layout.encode_config_change("users/"), None),
    (b'{"version":3,"entity_path":"users/alice"}', None),
    (b"not json", None), (b"[]", None), (b"\xff", None),
])
def test_which_change_notifications_name_a_user(data, user):
    assert changed_user(data) == user
