"""The broker's administrative rules, sans-I/O: pure functions and state machines, no trio.

* Configuration: typed keys (``config_def``), ``server.properties`` and ``--override``
  parsing (``properties``, ``broker_config`` with ``security_config`` and
  ``group_protocol_config``), topic configs (``topic_config``) and DescribeConfigs
  results with their sources and synonyms (``describe``).
* Topics: name rules (``topics``) and replica assignment (``assignment``).
* Cluster mode: the controller's decisions (``controller``) and Kafka's ZooKeeper layout,
  znode paths and JSON (``zk_layout``); the server layer (``kwire.cluster``) does the I/O.
* ACLs: bindings, filters, the indexed store and the authorizer (``acls``), which ACL each
  API checks (``acl_operations``), and their file and ZooKeeper formats (``acl_formats``).
"""
