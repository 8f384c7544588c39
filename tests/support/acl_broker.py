"""A kwire process with SASL/PLAIN users and Kafka's ACL authorizer on, for ACL tests.

    with AclBroker(tmp_path) as b:
        b.admin().create_acls([...])                       # as the super user "admin"
        Producer({"bootstrap.servers": b.bootstrap, **b.client("alice")})

Users (password = "<user>-secret"): ``admin`` (in super.users), ``alice``, ``bob``.
``bootstrap`` is the SASL_PLAINTEXT listener; ``plaintext_bootstrap`` a PLAINTEXT
one where every client is ``User:ANONYMOUS``.
"""
from __future__ import annotations

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, \
    ResourceType

from kwire.testing.process import BrokerProcess, free_port

USERS = ("admin", "alice", "bob")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        "password=\"admin-secret\" " + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")


class AclBroker:
    def __init__(self, data_dir, **properties):
        self.ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
        self.process = BrokerProcess(data_dir, port=self.ports["PLAINTEXT"], properties={
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            "connection.failed.authentication.delay.ms": "0",
            **properties})

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}"

    @property
    def plaintext_bootstrap(self) -> str:
        return self.process.bootstrap

    def client(self, user: str) -> dict:
        """confluent-kafka settings logging in as ``user`` on the SASL listener."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}

    def kafka_python(self, user: str) -> dict:
        """kafka-python / aiokafka keyword arguments logging in as ``user``."""
        return {"bootstrap_servers": self.bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": f"{user}-secret"}

    def command_config(self, user: str, directory, mechanism: str = "PLAIN") -> str:
        """The path of a Java client properties file (for ``--command-config``) logging in as
        ``user`` with ``mechanism``, written into ``directory``."""
        login = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        path = f"{directory}/{user}-{mechanism}.properties"
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config=org.apache.kafka.common.security.{login} required "
                    f'username="{user}" password="{user}-secret";\n')
        return path

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.client(user))

    def allow(self, user: str, resource_type: ResourceType, name: str, operation: AclOperation,
              pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> None:
        """Grant ``user`` ``operation`` on a resource, as the super user; waits for the answer."""
        binding = AclBinding(resource_type, name, pattern, f"User:{user}", "*", operation,
                             AclPermissionType.ALLOW)
        admin = self.admin()          # kept alive until the answer: a dropped client cancels it
        for future in admin.create_acls([binding], request_timeout=10).values():
            future.result()

    def start(self) -> "AclBroker":
        self.process.start()
        return self

    def close(self) -> None:
        self.process.close()

    def __enter__(self) -> "AclBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
