"""Compatibility harness: a client x scenario matrix through stock Kafka clients.

``kwire compat --bootstrap HOST:PORT`` (``kwire.compat_tests.cli:main``) runs
it against any Kafka-compatible broker; ``FINDINGS.md`` is the allow-list of
known differences of the reference brokers; ``third_party`` runs a client
library's own integration tests.  Only public client libraries and the broker
as a process or fixture are used here, never kwire internals.
"""
