"""The operator commands: ``kwire topics``, ``groups``, ``configs``, ``produce``, ``consume``,
``perf``, ``acls`` and ``users`` (alias ``scram``).  Kafka clients on kafka-python, with Kafka's
option names (kwire.tools.common)."""
