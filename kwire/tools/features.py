"""``kwire features``: describe and change the cluster's finalized feature levels, as
kafka-features.sh does (ApiVersions for describe, UpdateFeatures for the rest)::

    kwire features describe
    kwire features upgrade --feature transaction.version=2 [--feature ...] [--metadata 4.1-IV1] [--dry-run]
    kwire features downgrade --feature transaction.version=1 [--unsafe] [--dry-run]
    kwire features disable --feature transaction.version [--unsafe] [--dry-run]

``describe`` prints one line per feature the broker supports, as Kafka's tool does::

    Feature: transaction.version	SupportedMinVersion: 0	SupportedMaxVersion: 2	FinalizedVersionLevel: 1	Epoch: 3

Kafka's action flags (``--describe``, ``--upgrade``, ...) work too, and ``--bootstrap-server``
may come before or after the command.

Exit codes: 0 done, 1 the broker refused an update (or is unreachable), 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from kwire.admin.features import METADATA_VERSION, UpgradeType, level_name, metadata_level
from kwire.tools.common import ToolError, UsageError, client_config, dispatch, emit, tool_parser

ACTIONS = {"--describe": "describe", "--upgrade": "upgrade", "--downgrade": "downgrade", "--disable": "disable"}


def build_parser() -> argparse.ArgumentParser:
    parser, command = tool_parser("kwire features", __doc__)
    command("describe", "the supported and finalized feature levels")
    for name, help_text in (("upgrade", "raise finalized feature levels"),
                            ("downgrade", "lower finalized feature levels"),
                            ("disable", "take features back to level 0")):
        p = command(name, help_text)
        p.add_argument("--feature", action="append", default=[],
                       metavar="NAME" if name == "disable" else "NAME=LEVEL",
                       help="a feature and its new level (repeatable)")
        if name != "disable":
            p.add_argument("--metadata", metavar="VERSION", help="the metadata.version, as a release (4.0-IV3)")
        if name != "upgrade":
            p.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
        p.add_argument("--dry-run", action="store_true", help="check with the broker, change nothing")
    return parser


def parse_updates(args: argparse.Namespace, op: str) -> dict[str, int]:
    """{feature: level} of ``--feature`` and ``--metadata``.  Raises UsageError."""
    updates: dict[str, int] = {}
    if getattr(args, "metadata", None):
        try:
            updates[METADATA_VERSION] = metadata_level(args.metadata)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    for item in args.feature:
        name, sep, level = item.partition("=")
        if op == "disable":
            name, level, sep = item, "0", "="
        if not sep or not name.strip():
            raise UsageError(f"--feature {item!r}: expected NAME=LEVEL")
        try:
            value = int(level)
        except ValueError:
            raise UsageError(f"--feature {item!r}: {level!r} is not a level") from None
        if name.strip() in updates:
            raise UsageError(f"Feature {name.strip()} was specified more than once.")
        updates[name.strip()] = value
    if not updates:
        raise UsageError(f"You must specify at least one feature to {op}")
    return updates


def open_admin(args: argparse.Namespace):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(**client_config(args, client_id="kwire-features"))


def describe(args: argparse.Namespace) -> None:
    with open_admin(args) as admin:
        found = admin.describe_features()
    rows, document = [], []
    for name in sorted(n for n, f in found.items() if "supported" in f):
        low, high = found[name]["supported"]
        level = found[name].get("finalized", (0, 0))[1]
        epoch = next((f["finalized_epoch"] for f in found.values() if f.get("finalized_epoch") is not None), None)
        document.append({"feature": name, "supported_min_version": low, "supported_max_version": high,
                         "finalized_version_level": level, "epoch": epoch})
        rows.append(f"Feature: {name}\tSupportedMinVersion: {level_name(name, low)}\t"
                    f"SupportedMaxVersion: {level_name(name, high)}\t"
                    f"FinalizedVersionLevel: {level_name(name, level)}\tEpoch: {'-' if epoch is None else epoch}")
    if args.output == "json":
        emit(args, document, [], [])
        return
    for row in rows:
        print(row)


def update(args: argparse.Namespace) -> None:
    op = args.command
    updates = parse_updates(args, op)
    kind = UpgradeType.UPGRADE if op == "upgrade" else (
        UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE)
    from kafka.protocol.admin.cluster import UpdateFeaturesRequest as R
    request = R(timeout_ms=60000, validate_only=args.dry_run, feature_updates=[
        R.FeatureUpdateKey(feature=n, max_version_level=lvl, allow_downgrade=kind is not UpgradeType.UPGRADE,
                           upgrade_type=int(kind)) for n, lvl in updates.items()], min_version=1)
    with open_admin(args) as admin:          # to any broker: each one takes UpdateFeatures
        async def call():
            return await admin._manager.send(request)
        response = admin._manager.run(call)
    errors = {r.feature: r.error_message or f"error {r.error_code}" for r in response.results or () if r.error_code}
    if response.error_code:
        errors = {name: response.error_message or f"error {response.error_code}" for name in updates}
    document = {}
    for name in sorted(updates):
        level = updates[name]
        what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
        if name in errors:
            line = f"{'Can not' if args.dry_run else 'Could not'} {what}. {errors[name]}"
        else:
            line = f"{name}{' can be ' if args.dry_run else ' was '}" + ("disabled." if op == "disable" else f"{op}d to {level}.")
        document[name] = {"level": level, "error": errors.get(name)}
        if args.output != "json":
            print(line)
    if args.output == "json":
        emit(args, document, [], [])
    if errors:
        raise ToolError(f"{len(errors)} out of {len(updates)} operation(s) failed.")


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(argv, build_parser(), ACTIONS,
                    {"describe": describe, "upgrade": update, "downgrade": update, "disable": update})


if __name__ == "__main__":
    sys.exit(main())
