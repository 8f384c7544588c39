"""Inter-broker connections over every security protocol (kwire.security.peer), in-process:
a real kwire broker on loopback sockets (SSL with client certificates, SASL_PLAINTEXT and
SASL_SSL), and this broker's own connector built from the same Kafka keys a broker of the
cluster would have.  Who the server took the peer for is read back the way it decides
everything: the cluster operations the authorizer grants it (super users all, others none)."""
from __future__ import annotations

import contextlib
import logging
import subprocess
import sys

import pytest
import trio

from kwire.admin.broker_config import ConfigError, broker_config_from_properties
from kwire.server.broker import Broker
from kwire.transport.peer import PeerConnection, PeerError
from kwire.security.peer import PeerConnector
from kwire.security.scram import scram_credential
from kwire.server.serving import serve
from tests.support.certs import CertificateAuthority

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
              'password="admin-secret";')
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "MTLS": "SSL", "SASL": "SASL_PLAINTEXT", "SASL_TLS": "SASL_SSL"}


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(CA, broker files valid for 127.0.0.1, files of a certificate for another host, alice's)."""
    directory = tmp_path_factory.mktemp("peer-tls")
    ca = CertificateAuthority(key_type="ec")
    return (ca, ca.server_files(directory, subject="CN=broker-1,O=kwire"),
            ca.server_files(directory, subject="CN=elsewhere,O=kwire", hosts=("elsewhere.example",),
                            name="elsewhere"),
            ca.client_files(directory, "CN=alice,O=kwire", name="alice"))


def properties(tls, tmp_path, **extra) -> dict:
    _ca, broker, _elsewhere, _alice = tls
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in LISTENERS.items()),
        "log.dirs": str(tmp_path / "logs"),
        **broker.kafka_properties("PEM"),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
        "listener.name.sasl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:CN=broker-1,O=kwire;User:admin",
        **extra,
    }


def connector(props: dict, listener: str, **overrides) -> PeerConnector:
    """The connector of a broker configured with ``props`` whose inter-broker listener is ``listener``."""
    return PeerConnector.from_config(broker_config_from_properties(
        {**props, "inter.broker.listener.name": listener, **overrides}))


def run_with_broker(props: dict, scenario) -> None:
    """Serve ``props`` in-process and run ``await scenario(broker)``; SCRAM user admin exists."""
    async def main():
        broker = Broker(broker_config_from_properties(props))
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, broker, "127.0.0.1", 0)
            broker.scram.store.set("admin", "SCRAM-SHA-512", scram_credential("SCRAM-SHA-512", "admin-secret"))
            try:
                await scenario(broker)
            finally:
                nursery.cancel_scope.cancel()
    trio.run(main)


@contextlib.asynccontextmanager
async def connected(peers: PeerConnector, broker, listener: str):
    """(connection, endpoint) to ``broker``'s ``listener`` through ``peers``; closed after."""
    ep = broker.endpoints[listener]
    conn = await peers.open(ep.host, ep.port, "kwire-replica-1", 5)
    try:
        yield conn, ep
    finally:
        await conn.aclose()


async def cluster_operations(conn: PeerConnection) -> set:
    """The cluster operations the authorizer grants the principal of ``conn`` (DescribeCluster's
    authorized_operations bits)."""
    response = await conn.request(60, 0, include_cluster_authorized_operations=True)
    assert response.error_code == 0
    return set(response.authorized_operations)


@pytest.mark.parametrize("listener, mechanism", [
    ("PLAINTEXT", None), ("MTLS", None), ("SASL", "PLAIN"), ("SASL", "SCRAM-SHA-512"),
    ("SASL_TLS", "PLAIN")])
def test_a_broker_reaches_each_listener_as_its_own_principal(tls, tmp_path, listener, mechanism):
    props = properties(tls, tmp_path)
    overrides = {"sasl.mechanism.inter.broker.protocol": mechanism} if mechanism else {}
    peers = connector(props, listener, **overrides)

    async def scenario(broker):
        async with connected(peers, broker, listener) as (conn, ep):
            assert (type(conn) is PeerConnection) == (listener == "PLAINTEXT")     # nothing added to PLAINTEXT
            # a super user (the broker's DN, or User:admin), but User:ANONYMOUS on PLAINTEXT
            assert bool(await cluster_operations(conn)) == (listener != "PLAINTEXT")
            metadata = await conn.request(3, 9, topics=None, allow_auto_topic_creation=False,
                                          include_cluster_authorized_operations=False,
                                          include_topic_authorized_operations=False)
            assert [(b.host, b.port) for b in metadata.brokers] == [(ep.host, ep.port)]   # this listener's
    run_with_broker(props, scenario)


def test_a_principal_that_is_not_a_super_user_gets_no_cluster_operation(tls, tmp_path):
    _ca, _broker, _elsewhere, alice = tls
    props = properties(tls, tmp_path)
    as_alice_tls = connector(props, "MTLS", **{"ssl.keystore.location": str(alice.keystore)})
    as_alice_sasl = connector(props, "SASL", **{
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": JAAS.replace('username="admin" password="admin-secret"',
                                         'username="alice" password="alice-secret"')})

    async def scenario(broker):
        for peers, listener in ((as_alice_tls, "MTLS"), (as_alice_sasl, "SASL")):
            async with connected(peers, broker, listener) as (conn, _ep):
                assert await cluster_operations(conn) == set()
    run_with_broker(props, scenario)


def test_refused_logins_and_certificates_are_peer_errors_worth_a_warning(tls, tmp_path):
    _ca, _broker, elsewhere, _alice = tls
    props = properties(tls, tmp_path)
    wrong_password = connector(props, "SASL", **{
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.replace("admin-secret", "nope")})
    disabled = connector(props, "SASL", **{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                                           "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"})
    no_client_certificate = connector(props, "MTLS", **{"ssl.keystore.location": ""})
    other_host = {**props, **elsewhere.kafka_properties("PEM")}      # a server certificate for elsewhere.example

    async def scenario(broker):
        for peers, listener, fragment in ((wrong_password, "SASL", "SCRAM-SHA-512 login as 'admin' refused"),
                                          (disabled, "SASL", "the listener enables PLAIN, SCRAM-SHA-512"),
                                          (no_client_certificate, "MTLS", "")):
            ep = broker.endpoints[listener]
            with pytest.raises(PeerError, match=fragment or None) as err:
                conn = await peers.open(ep.host, ep.port, "kwire-replica-1", 5)
                await cluster_operations(conn)       # TLS 1.3: a refused certificate shows here
            if fragment:
                assert err.value.log_level == logging.WARNING
    run_with_broker(props, scenario)

    async def wrong_host(broker):
        ep = broker.endpoints["MTLS"]
        with pytest.raises(PeerError, match="certificate verify failed") as err:
            await connector(props, "MTLS").open(ep.host, ep.port, "kwire-replica-1", 5)
        assert err.value.log_level == logging.WARNING
        # ssl.endpoint.identification.algorithm empty: the chain is checked, the host name is not
        unverified = connector(props, "MTLS", **{"ssl.endpoint.identification.algorithm": ""})
        async with connected(unverified, broker, "MTLS") as (conn, _ep):
            assert await cluster_operations(conn)
    run_with_broker(other_host, wrong_host)


def test_a_peer_logs_in_again_before_its_session_ends(tls, tmp_path):
    # KIP-368: the listener bounds sessions to 1.2 s and closes a connection whose session ended;
    # the peer re-authenticates on the same socket at 85-95% of it, so requests for 3.5 s all succeed
    props = properties(tls, tmp_path, **{"listener.name.sasl.connections.max.reauth.ms": "1200"})
    peers = connector(props, "SASL", **{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})

    async def scenario(broker):
        logins = 0
        async with connected(peers, broker, "SASL") as (conn, _ep):
            deadline = trio.current_time() + 3.5
            while trio.current_time() < deadline:
                before = conn.reauth_at
                assert await cluster_operations(conn)
                logins += conn.reauth_at != before
                await trio.sleep(0.1)
        assert logins >= 2
    run_with_broker(props, scenario)


def test_a_sasl_inter_broker_listener_needs_the_brokers_own_username_and_password(tls, tmp_path):
    props = properties(tls, tmp_path)
    users_only = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
    with pytest.raises(ConfigError, match="listener.name.sasl.plain.sasl.jaas.config.*username and password"):
        connector(props, "SASL", **{"sasl.mechanism.inter.broker.protocol": "PLAIN",
                                    "listener.name.sasl.plain.sasl.jaas.config": users_only})
    with pytest.raises(ConfigError, match="set listener.name.sasl.plain.sasl.jaas.config"):
        connector({k: v for k, v in props.items() if k != "sasl.jaas.config"}, "SASL",
                  **{"sasl.mechanism.inter.broker.protocol": "PLAIN"})
    with pytest.raises(ConfigError, match="ssl.truststore.location"):
        connector(props, "MTLS", **{"ssl.truststore.location": str(tmp_path / "missing.pem")})


def test_plaintext_peers_are_kwire_peer_connections_untouched():
    # the replication hot path: no TLS or SASL layer, not even a subclass
    peers = PeerConnector.from_config(broker_config_from_properties({}))
    assert (peers.listener, peers.protocol, peers.ssl_context, peers.login) == ("PLAINTEXT", "PLAINTEXT", None, None)


@pytest.mark.parametrize("extra, fragment", [
    ({}, "GSSAPI is Kafka's default"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "needs the username and password options"),
])
def test_kwire_serve_refuses_an_inter_broker_login_it_cannot_make(tmp_path, extra, fragment):
    # before ZooKeeper is reached (nothing listens on its port): exit 2, the key named
    users_only = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
    props = {"zookeeper.connect": "127.0.0.1:1", "log.dirs": str(tmp_path),
             "listeners": "CLIENT://127.0.0.1:0", "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT",
             "inter.broker.listener.name": "CLIENT", "sasl.enabled.mechanisms": "PLAIN",
             "sasl.jaas.config": users_only, **extra}
    argv = [sys.executable, "-m", "kwire", "serve"] + [f"--override={k}={v}" for k, v in props.items()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "invalid configuration" in done.stderr and fragment in done.stderr
