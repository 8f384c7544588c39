"""Spark integration: a Kafka data source for PySpark written in Python (``kwire-kafka``,
same schema and options as Spark's ``kafka`` source) and the website-activity demo
pipeline. Uses only public client libraries (PySpark, kafka-python); never kwire
internals, so it works against any Kafka broker."""
