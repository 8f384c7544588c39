"""Spark reads over SASL_SSL: the same ``kafka.security.protocol`` / ``kafka.sasl.*`` /
``kafka.ssl.truststore.*`` options a Spark user gives Spark's own connector work for it
(``format("kafka")``, the Java client) and for kwire's (``kwire-kafka``, kafka-python)."""
import pytest
from confluent_kafka import Producer

from kwire.spark.source import NAME
from kwire.testing.process import BrokerProcess, free_port
from tests.support.certs import CertificateAuthority

pytestmark = pytest.mark.clients

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="spark" '
        'password="spark-secret";')


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """(broker, SASL_SSL bootstrap, Spark options for it, topic of 40 records)."""
    directory = tmp_path_factory.mktemp("spark-sasl")
    server = CertificateAuthority().server_files(directory)
    ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    broker = BrokerProcess(directory / "data", port=ports["PLAINTEXT"], properties={
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS[:-1] + ' user_spark="spark-secret";',
        **server.kafka_properties("PEM")}).start()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        producer.produce("secured", b"s-%d" % i)
    assert producer.flush(30) == 0
    options = {"kafka.bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
               "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
               "kafka.sasl.jaas.config": JAAS, "kafka.ssl.truststore.type": "PEM",
               "kafka.ssl.truststore.location": str(server.truststore), "subscribe": "secured"}
    yield broker, options
    broker.close()


def values(df) -> list[str]:
    return sorted(r.value.decode() for r in df.select("value").collect())


def test_kwire_connector_reads_over_sasl_ssl(spark, secured):
    _broker, options = secured
    assert values(spark.read.format(NAME).options(**options).load()) == sorted(f"s-{i}" for i in range(40))


def test_sparks_own_connector_reads_over_sasl_ssl(jvm_spark, secured):
    _broker, options = secured
    assert values(jvm_spark.read.format("kafka").options(**options).load()) == sorted(f"s-{i}" for i in range(40))
