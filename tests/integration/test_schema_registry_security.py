"""The Schema Registry's listener with the broker's TLS settings (https) and HTTP Basic auth
checked against the broker's SASL users: a PLAIN JAAS user and a SCRAM user made through
AlterUserScramCredentials, as confluent-kafka's SchemaRegistryClient and curl present them."""
from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.support.broker import BrokerProcess, free_port, wait_port
from tests.support.certs import CertificateAuthority

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """(broker, registry https URL, server TLS files)."""
    directory = tmp_path_factory.mktemp("registry-security")
    server = CertificateAuthority().server_files(directory)
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    registry_port = free_port()
    broker = BrokerProcess(directory / "data", port=ports["PLAINTEXT"], properties={
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        **server.kafka_properties("PEM"),
        "schema.registry.listeners": f"https://127.0.0.1:{registry_port}",
        "schema.registry.authentication.method": "BASIC",
    }).start()
    wait_port("127.0.0.1", registry_port, timeout=30)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"bob-secret")
    admin.alter_user_scram_credentials([upsert])["bob"].result(15)
    yield broker, f"https://127.0.0.1:{registry_port}", server
    broker.close()


def get(url: str, server, credentials: str | None) -> int:
    context = ssl.create_default_context(cafile=str(server.truststore))
    headers = {}
    if credentials is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
    request = urllib.request.Request(url + "/subjects", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            json.loads(response.read())
            return response.status
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read())
        assert body["error_code"] == exc.code
        return exc.code


def test_basic_auth_takes_plain_and_scram_users_and_refuses_the_rest(secured):
    _broker, url, server = secured
    assert get(url, server, None) == 401
    assert get(url, server, "alice:wrong") == 401
    assert get(url, server, "nobody:alice-secret") == 401
    assert get(url, server, "alice:alice-secret") == 200          # PLAIN (JAAS user_alice)
    assert get(url, server, "bob:bob-secret") == 200              # SCRAM-SHA-256 credential
    assert get(url, server, "bob:bob-wrong") == 401


def test_confluent_client_over_https_with_basic_auth(secured):
    _broker, url, server = secured
    client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(server.truststore),
                                   "basic.auth.user.info": "bob:bob-secret"})
    schema_id = client.register_schema("secured-value", Schema('"string"', "AVRO"))
    assert client.get_schema(schema_id).schema_str == '"string"'
    refused = SchemaRegistryClient({"url": url, "ssl.ca.location": str(server.truststore),
                                    "basic.auth.user.info": "bob:nope"})
    with pytest.raises(SchemaRegistryError) as denied:
        refused.get_subjects()
    assert denied.value.http_status_code == 401


def test_plain_http_to_the_tls_listener_gets_no_answer(secured):
    _broker, url, _server = secured
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(url.replace("https:", "http:") + "/subjects", timeout=5).read()
