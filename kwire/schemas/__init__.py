"""The built-in Schema Registry (Confluent's REST API over the ``_schemas`` topic) and the
broker-side record validation that uses it.

* ``kwire.schemas.types``: parsing, normalising, compatibility and payload checks of AVRO,
  JSON and PROTOBUF schemas (synchronous, no I/O);
* the registry's state, REST API and service, and the produce-path validators.
"""
