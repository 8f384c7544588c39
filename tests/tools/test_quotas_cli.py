"""``kwire quotas`` argument handling (no broker: every case exits before connecting); the
broker round trip is tests/integration/test_client_quotas.py::test_cli_alters_and_describes."""
from __future__ import annotations

import argparse

import pytest

from kwire.tools.common import options_first
from kwire.tools.quotas import build_parser, main, parse_add_config, parse_entity, UsageError


@pytest.mark.parametrize("argv", [
    ["alter", "--entity-type", "users", "--entity-name", "a"],                        # nothing to change
    ["alter", "--add-config", "producer_byte_rate=1"],                               # no entity
    ["alter", "--entity-type", "groups", "--entity-name", "g", "--add-config", "x=1"],
    ["alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"],     # type without a name
    ["alter", "--entity-name", "a", "--add-config", "producer_byte_rate=1"],         # name without a type
    ["alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "producer_byte_rate=fast"],
    ["alter", "--entity-type", "users", "--entity-name", "a", "--entity-type", "users", "--entity-name", "b",
     "--add-config", "producer_byte_rate=1"],
    ["describe", "--entity-type", "clients"],
])
def test_bad_arguments_exit_2_before_any_connection(argv):
    assert main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2


def parsed(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    return parser.parse_args(options_first(list(argv), parser, ("describe", "alter")))


def test_entities_pair_types_with_names_in_order():
    args = parsed("--bootstrap-server", "h:1", "alter", "--entity-type", "users", "--entity-default",
                  "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=1024")
    assert args.bootstrap_server == "h:1"
    assert parse_entity(args) == [("user", None), ("client-id", "app")]
    assert parse_entity(parsed("describe", "--user", "alice", "--client-id", "c")) == [("user", "alice"), ("client-id", "c")]
    assert parse_add_config("producer_byte_rate=1024, request_percentage = 12.5") == {
        "producer_byte_rate": 1024.0, "request_percentage": 12.5}
    with pytest.raises(UsageError):
        parse_add_config("producer_byte_rate")
