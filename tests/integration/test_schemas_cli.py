"""``kwire schemas`` against the Schema Registry of one real broker process
(schema.registry.listeners): in process through ``main`` with capsys, and once through the
``kwire`` entry point as an operator types it."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid

import pytest

from kwire.tools.schemas import URL_ENV, main
from tests.support.broker import BrokerProcess, free_port, wait_port
from tests.support.tool_output import tables

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory):
    port = free_port()
    broker = BrokerProcess(tmp_path_factory.mktemp("schemas-cli"),
                           properties={"schema.registry.listeners": f"http://127.0.0.1:{port}"})
    broker.start()
    try:
        wait_port("127.0.0.1", port, timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        broker.stop()


@pytest.fixture
def schemas(registry_url, capsys, monkeypatch):
    """``kwire schemas`` against the module's registry: schemas("list") -> (exit code, stdout,
    stderr); ``stdin=`` feeds ``--schema-file -``."""
    def call(*argv: str, stdin: str | None = None):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = main([*argv, "--registry-url", registry_url])
        out, err = capsys.readouterr()
        return code, out, err
    return call


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def avro(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": list(fields)})


ID = {"name": "id", "type": "long"}
QTY = {"name": "qty", "type": "int"}
QTY_DEFAULT = {"name": "qty", "type": "int", "default": 1}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def schema_file(tmp_path, text: str, name: str = "order.avsc") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def rows(out: str) -> list[dict]:
    return tables(out)[0]["rows"]


def test_register_list_and_describe(schemas, tmp_path):
    orders, people = unique("orders-value"), unique("people-value")
    code, out, err = schemas("register", "--subject", orders, "--schema-file", schema_file(tmp_path, avro(ID)))
    assert code == 0, err
    order_id = int(out)
    # the same schema again: the same id, no new version
    assert schemas("register", "--subject", orders, "--schema-file", schema_file(tmp_path, avro(ID)))[1] == out
    code, out, err = schemas("--register", "--subject", people, "--schema-file", "-", "--type", "json",
                             "--output", "json", stdin=json.dumps(PERSON))
    assert code == 0, err
    person_id = json.loads(out)["id"]
    assert json.loads(out) == {"subject": people, "id": person_id} and person_id != order_id

    code, out, err = schemas("list")
    assert code == 0, err
    listed = {r["SUBJECT"]: r for r in rows(out)}
    assert listed[orders] == {"SUBJECT": orders, "VERSION": "1", "ID": str(order_id), "TYPE": "AVRO"}
    assert listed[people] == {"SUBJECT": people, "VERSION": "1", "ID": str(person_id), "TYPE": "JSON"}
    code, out, err = schemas("--list", "--subject-prefix", people, "--output", "json")
    assert code == 0, err
    assert json.loads(out) == [{"subject": people, "version": 1, "id": person_id, "schemaType": "JSON"}]

    code, out, err = schemas("describe", "--subject", orders)
    assert code == 0, err
    assert f"Subject:    {orders}\nVersion:    1\nId:         {order_id}\nType:       AVRO\n" in out
    schema_text = out.split("Schema:\n", 1)[1]
    assert json.loads(schema_text) == json.loads(avro(ID)) and '\n  "name": "Order",\n' in schema_text
    code, out, err = schemas("describe", "--id", str(person_id), "--output", "json")
    assert code == 0, err
    described = json.loads(out)
    assert (described["id"], described["schemaType"]) == (person_id, "JSON")
    assert json.loads(described["schema"]) == PERSON
    assert described["versions"] == [{"subject": people, "version": 1}]
    code, out, err = schemas("describe", "--id", str(person_id))
    assert code == 0 and f"Used by:    {people}:1\n" in out, err


def test_references_and_the_protobuf_type_from_the_file_name(schemas, tmp_path):
    address = unique("address")
    address_schema = {"type": "record", "name": "Address", "namespace": "shop",
                      "fields": [{"name": "city", "type": "string"}]}
    assert schemas("register", "--subject", address, "--schema-file",
                   schema_file(tmp_path, json.dumps(address_schema), "address.avsc"))[0] == 0
    customer = unique("customer")
    code, out, err = schemas("register", "--subject", customer, "--reference", f"shop.Address={address}:latest",
                             "--schema-file", schema_file(tmp_path, avro(ID, {"name": "home", "type": "shop.Address"})))
    assert code == 0, err
    code, out, err = schemas("describe", "--subject", customer)
    assert code == 0 and f"References: shop.Address={address}:1\n" in out, err

    proto = 'syntax = "proto3";\npackage shop;\n\nmessage Pen {\n  int64 id = 1;\n}\n'
    pens = unique("pens")
    assert schemas("register", "--subject", pens, "--schema-file", schema_file(tmp_path, proto, "pen.proto"))[0] == 0
    code, out, err = schemas("describe", "--subject", pens)
    assert code == 0 and "Type:       PROTOBUF\n" in out and "message Pen" in out.split("Schema:\n", 1)[1], err


def test_check_reports_compatibility_and_exits_1_when_incompatible(schemas, tmp_path):
    subject = unique("checked")
    assert schemas("register", "--subject", subject, "--schema-file", schema_file(tmp_path, avro(ID)))[0] == 0
    # BACKWARD (the default): a new field without a default cannot read the old records
    code, out, err = schemas("check", "--subject", subject, "--schema-file", schema_file(tmp_path, avro(ID, QTY)))
    assert code == 1 and out.startswith(f"incompatible with subject '{subject}'"), (out, err)
    assert "  - " in out and err == ""
    code, out, err = schemas("check", "--subject", subject, "--version", "1", "--output", "json",
                             "--schema-file", schema_file(tmp_path, avro(ID, QTY)))
    answer = json.loads(out)
    assert code == 1 and answer["is_compatible"] is False and answer["version"] == "1" and answer["messages"]
    code, out, err = schemas("check", "--subject", subject, "--schema-file",
                             schema_file(tmp_path, avro(ID, QTY_DEFAULT)))
    assert code == 0 and out.startswith(f"compatible with subject '{subject}'"), (out, err)


def test_delete_soft_then_permanent(schemas, tmp_path):
    subject = unique("deleting")
    first = int(schemas("register", "--subject", subject, "--schema-file", schema_file(tmp_path, avro(ID)))[1])
    assert schemas("register", "--subject", subject,
                   "--schema-file", schema_file(tmp_path, avro(ID, QTY_DEFAULT)))[0] == 0

    code, out, err = schemas("delete", "--subject", subject, "--version", "2")
    assert code == 0 and out.startswith(f"Soft-deleted subject '{subject}' version 2."), err
    assert json.loads(schemas("list", "--subject-prefix", subject, "--output", "json")[1])[0]["version"] == 1
    assert json.loads(schemas("list", "--subject-prefix", subject, "--deleted",
                              "--output", "json")[1])[0]["version"] == 2
    assert schemas("describe", "--subject", subject, "--version", "2")[0] == 1
    assert schemas("describe", "--subject", subject, "--version", "2", "--deleted")[0] == 0
    code, out, err = schemas("--delete", "--subject", subject, "--version", "2", "--permanent")
    assert code == 0 and out == f"Permanently deleted subject '{subject}' version 2.\n", err

    # a permanent delete needs the soft one first: the registry says so
    code, out, err = schemas("delete", "--subject", subject, "--permanent")
    assert code == 1 and "(error 40405)" in err
    code, out, err = schemas("delete", "--subject", subject, "--output", "json")
    assert code == 0 and json.loads(out) == {"subject": subject, "versions": [1], "permanent": False}, err
    assert schemas("describe", "--id", str(first))[0] == 0         # soft-deleted: still resolves by id
    code, out, err = schemas("delete", "--subject", subject, "--permanent")
    assert code == 0 and out == f"Permanently deleted subject '{subject}' version 1.\n", err
    assert schemas("describe", "--subject", subject, "--deleted")[0] == 1


def test_config_and_mode_set_and_get(schemas, tmp_path):
    subject = unique("configured")
    code, out, err = schemas("config")
    assert code == 0 and rows(out) == [{"SUBJECT": "(global)", "COMPATIBILITY LEVEL": "BACKWARD",
                                        "SET ON": "global"}], err
    code, out, err = schemas("config", "--subject", subject, "--output", "json")
    assert code == 0 and json.loads(out) == {"subject": subject, "compatibilityLevel": "BACKWARD",
                                             "source": "global"}, err
    code, out, err = schemas("config", "--subject", subject, "--set", "full")
    assert code == 0 and out == f"The compatibility level of subject '{subject}' is now FULL.\n", err
    code, out, err = schemas("config", "--subject", subject, "--output", "json")
    assert json.loads(out) == {"subject": subject, "compatibilityLevel": "FULL", "source": "subject"}
    assert schemas("config", "--subject", subject, "--unset")[0] == 0
    assert json.loads(schemas("config", "--subject", subject, "--output", "json")[1])["source"] == "global"

    assert schemas("register", "--subject", subject, "--schema-file", schema_file(tmp_path, avro(ID)))[0] == 0
    code, out, err = schemas("mode", "--subject", subject, "--set", "READONLY")
    assert code == 0, err
    code, out, err = schemas("mode", "--subject", subject)
    assert code == 0 and rows(out) == [{"SUBJECT": subject, "MODE": "READONLY", "SET ON": "subject"}], err
    code, out, err = schemas("register", "--subject", subject,
                             "--schema-file", schema_file(tmp_path, avro(ID, QTY_DEFAULT)))
    assert code == 1 and err.startswith("kwire: ") and err.rstrip().endswith("(error 42205)") and out == ""
    assert schemas("mode", "--subject", subject, "--unset")[0] == 0
    code, out, err = schemas("mode", "--subject", subject, "--output", "json")
    assert json.loads(out) == {"subject": subject, "mode": "READWRITE", "source": "global"}, err


def test_registry_errors_are_one_readable_line_and_exit_1(schemas, capsys):
    subject = unique("missing")
    code, out, err = schemas("describe", "--subject", subject)
    assert (code, out, err) == (1, "", f"kwire: Subject '{subject}' not found. (error 40401)\n")
    code = main(["list", "--registry-url", f"http://127.0.0.1:{free_port()}"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("kwire: cannot reach the Schema Registry at http://127.0.0.1:")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("argv", [
    [],
    ["list", "--output", "xml"],
    ["describe"],                                                   # neither --subject nor --id
    ["describe", "--subject", "s", "--id", "1"],
    ["describe", "--subject", "s", "--version", "0"],
    ["register", "--subject", "s"],                                 # no --schema-file
    ["register", "--subject", "s", "--schema-file", "/nonexistent/x.avsc"],
    ["register", "--subject", "s", "--schema-file", "-", "--type", "XML"],
    ["register", "--subject", "s", "--schema-file", "-", "--reference", "shop.Address=address"],
    ["check", "--subject", "s", "--schema-file", "-", "--version", "first"],
    ["config", "--set", "SIDEWAYS"],
    ["config", "--set", "FULL", "--unset"],
    ["mode", "--force"],
    ["list", "--user", "nopassword"],
    ["list", "--registry-url", "ftp://127.0.0.1:8081"],
    ["list", "--ca-file", "/etc/hostname"],                         # http registry, no TLS to configure
])
def test_bad_arguments_exit_2_before_any_request(argv, capsys, monkeypatch):
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:1")              # nothing listens: no request may be sent
    monkeypatch.setattr(sys, "stdin", io.StringIO('"string"'))
    assert main(argv) == 2
    assert "kwire" in capsys.readouterr().err


def test_the_kwire_command_and_the_url_from_the_environment(registry_url, tmp_path, schemas):
    subject = unique("entry")
    registered = subprocess.run([sys.executable, "-m", "kwire", "schemas", "--output", "json", "register",
                                 "--subject", subject, "--schema-file", schema_file(tmp_path, avro(ID))],
                                capture_output=True, text=True, timeout=60,
                                env={**os.environ, URL_ENV: registry_url})
    assert registered.returncode == 0, registered.stderr
    schema_id = json.loads(registered.stdout)["id"]
    code, out, err = schemas("list", "--subject-prefix", subject, "--output", "json")
    assert code == 0 and json.loads(out) == [{"subject": subject, "version": 1, "id": schema_id,
                                              "schemaType": "AVRO"}], err
