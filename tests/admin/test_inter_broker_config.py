"""The inter-broker listener's rules (Kafka's KafkaConfig): which listener brokers reach each
other through, and the mistakes refused at start, each naming the key to mend."""
from __future__ import annotations

import pytest

from kwire.admin.broker_config import ConfigError, broker_config_from_properties

CLUSTER = {"zookeeper.connect": "127.0.0.1:2181"}
TWO_LISTENERS = {"listeners": "CLIENT://127.0.0.1:9093,INTERNAL://127.0.0.1:9094",
                 "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SSL"}


def config(**props):
    return broker_config_from_properties({k.replace("_", "."): v for k, v in props.items()})


def cluster(props: dict):
    return broker_config_from_properties({**CLUSTER, **props})


def refusal(props: dict) -> str:
    """The ConfigError message of a cluster broker configured with ``props``."""
    with pytest.raises(ConfigError) as err:
        cluster(props)
    return str(err.value)


def test_default_is_the_listener_named_plaintext():
    assert config().inter_broker_listener_name == "PLAINTEXT"
    c = cluster({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"})
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_security_inter_broker_protocol_names_the_listener():
    c = cluster({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
                 "security.inter.broker.protocol": "SSL"})
    assert c.inter_broker_listener_name == "SSL"


def test_inter_broker_listener_name_is_normalised_to_upper_case():
    assert cluster({**TWO_LISTENERS, "inter.broker.listener.name": "internal"}).inter_broker_listener_name \
        == "INTERNAL"


def test_both_keys_set_is_refused_naming_both():
    with pytest.raises(ConfigError, match="Only one of inter.broker.listener.name and "
                                          "security.inter.broker.protocol should be set"):
        config(inter_broker_listener_name="PLAINTEXT", security_inter_broker_protocol="PLAINTEXT")


def test_a_name_missing_from_the_protocol_map_is_refused():
    with pytest.raises(ConfigError, match="Listener with name REPLICATION defined in "
                                          "inter.broker.listener.name not found in listener.security.protocol.map"):
        cluster({**TWO_LISTENERS, "inter.broker.listener.name": "REPLICATION"})


def test_in_a_cluster_the_listener_must_be_advertised():
    message = refusal({**TWO_LISTENERS, "advertised.listeners": "CLIENT://b1.example:9093",
                       "inter.broker.listener.name": "INTERNAL"})
    assert "inter.broker.listener.name must be a listener name defined in advertised.listeners" in message
    assert "The valid options based on currently configured listeners are CLIENT" in message
    # without the name: the listener named after security.inter.broker.protocol, with a hint
    message = refusal(TWO_LISTENERS)
    assert "security.inter.broker.protocol" in message and "the listener named PLAINTEXT" in message
    assert "CLIENT,INTERNAL" in message


def test_a_single_node_ignores_the_inter_broker_listener_and_says_so():
    c = broker_config_from_properties({**TWO_LISTENERS, "inter.broker.listener.name": "INTERNAL"})
    assert c.inter_broker_listener_name == "INTERNAL"
    assert any(n.startswith("inter.broker.listener.name=INTERNAL is accepted but ignored") for n in c.notes)
    # nothing of the cluster checks: the default PLAINTEXT need not exist on a single node
    assert broker_config_from_properties(TWO_LISTENERS).inter_broker_listener_name == "PLAINTEXT"


SASL = {"listeners": "CLIENT://127.0.0.1:9093,INTERNAL://127.0.0.1:9094",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_sasl_inter_broker_listener_with_an_enabled_mechanism(mechanism):
    c = cluster({**SASL, "sasl.mechanism.inter.broker.protocol": mechanism})
    assert c.inter_broker_listener_name == "INTERNAL"


def test_kafkas_default_gssapi_is_refused_saying_what_kwire_logs_in_with():
    message = refusal(SASL)
    assert "sasl.mechanism.inter.broker.protocol" in message and "GSSAPI" in message
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in message


def test_the_mechanism_must_be_enabled_on_the_listener():
    with pytest.raises(ConfigError, match="must be included in sasl.enabled.mechanisms .*SCRAM-SHA-512"):
        cluster({**SASL, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})
    # the listener's own list counts over the broker-wide one
    c = cluster({**SASL, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                 "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    assert c.inter_broker_listener_name == "INTERNAL"


def test_the_mechanism_is_not_checked_when_the_inter_broker_listener_has_no_sasl():
    # the CLIENT listener is SASL; the brokers talk over SSL: GSSAPI's default is irrelevant
    c = cluster({**SASL, "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SSL"})
    assert c.inter_broker_listener_name == "INTERNAL"
