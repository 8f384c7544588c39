"""Certificate rotation without a restart: a TLS listener's key store set as a dynamic broker
config (``listener.name.<l>.ssl.keystore.location``, on the broker, as Kafka requires) is used
for the connections made from then on, a file renewed in place is read again when its location
is set again, a store that does not load is refused and changes nothing, and a producer over
TLS keeps every acknowledged record throughout."""
from __future__ import annotations

import shutil
import socket
import ssl
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from cryptography import x509
from cryptography.x509.oid import NameOID
from kafka.protocol.admin import IncrementalAlterConfigsRequest

from kwire.testing.cluster import send_request
from kwire.testing.process import BrokerProcess, free_port
from tests.support.certs import CertificateAuthority

pytestmark = pytest.mark.clients
TIMEOUT = 20
KEY = "listener.name.ssl.ssl.keystore.location"


def served_subject(port: int, ca_file: str) -> str:
    """The organizational unit of the certificate a new TLS connection to ``port`` is shown."""
    context = ssl.create_default_context(cafile=ca_file)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            subject = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).subject
    return subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value


def set_keystore(bootstrap: str, entity: str, location: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, entity, incremental_configs=[
        ConfigEntry(KEY, location, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)


def produce_until(tls: dict, stop: threading.Event, acked: list) -> None:
    p = Producer({**tls, "acks": "all", "linger.ms": 5, "message.timeout.ms": 15000})
    i = 0
    while not stop.is_set():
        try:
            p.produce("rotated", str(i).encode(), on_delivery=lambda err, m: err is None and acked.append(m.value()))
            i += 1
        except BufferError:
            pass
        p.poll(0.002)
    p.flush(TIMEOUT)


def read_values(tls: dict, wanted: set) -> set:
    consumer = Consumer({**tls, "group.id": "rotation-reader", "auto.offset.reset": "earliest"})
    consumer.subscribe(["rotated"])
    seen = set()
    try:
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
            if seen >= wanted:
                break
    finally:
        consumer.close()
    return seen


def test_a_new_key_store_serves_new_connections_while_a_tls_producer_keeps_going(tmp_path):
    ca = CertificateAuthority(key_type="ec")
    first = ca.server_files(tmp_path / "first", subject="CN=localhost,OU=first,O=kwire")
    second = ca.server_files(tmp_path / "second", subject="CN=localhost,OU=second,O=kwire")
    ca_file = str(first.truststore)
    live = tmp_path / "live.pem"                     # the file a certificate manager renews in place
    shutil.copy(first.keystore, live)
    ports = {"PLAINTEXT": free_port(), "SSL": free_port()}
    broker = BrokerProcess(port=ports["PLAINTEXT"], properties={
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(live)}).start()
    tls = {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL", "ssl.ca.location": ca_file}
    acked, stop = [], threading.Event()
    producer = threading.Thread(target=produce_until, args=(tls, stop, acked))
    producer.start()
    try:
        assert served_subject(ports["SSL"], ca_file) == "first"
        set_keystore(broker.bootstrap, "1", str(second.keystore))
        assert served_subject(ports["SSL"], ca_file) == "second"
        # renewed in place: setting the same location again reads the file again
        set_keystore(broker.bootstrap, "1", str(live))
        assert served_subject(ports["SSL"], ca_file) == "first"
        shutil.copy(second.keystore, live)
        set_keystore(broker.bootstrap, "1", str(live))
        assert served_subject(ports["SSL"], ca_file) == "second"
        # a store that does not load is refused, and the listener keeps the one it has
        with pytest.raises(KafkaException) as excinfo:
            set_keystore(broker.bootstrap, "1", str(tmp_path / "missing.pem"))
        assert excinfo.value.args[0].code() == KafkaError.INVALID_CONFIG
        # a listener's store belongs to one broker, not to the cluster default (Kafka's rule)
        R = IncrementalAlterConfigsRequest[1]
        [refused] = send_request(broker.bootstrap, R(validate_only=False, resources=[R.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[R.AlterConfigsResource.AlterableConfig(
                name=KEY, config_operation=0, value=str(live))])]), TIMEOUT).responses
        assert refused.error_code == KafkaError.INVALID_REQUEST, refused
        assert "broker id must be specified" in refused.error_message
        assert served_subject(ports["SSL"], ca_file) == "second"
        mark = len(acked)                          # the producer goes on after the rotations
        deadline = time.monotonic() + TIMEOUT
        while len(acked) < mark + 50 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(acked) >= mark + 50, (mark, len(acked))
        stop.set()
        producer.join(TIMEOUT)
        seen = read_values(tls, set(acked))
        assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged records not read"
    finally:
        stop.set()
        producer.join(TIMEOUT)
        broker.close()
