"""``kwire compat``: the client x scenario matrix against any Kafka-compatible broker.

    kwire compat --bootstrap 127.0.0.1:9092 [--clients kafka-python,kcat] [--scenarios ...] [--json out.json]
    kwire compat --against HOST:PORT --report out.html   # a readable report: out.html and out.json
    kwire compat --against tansu|kafka       # start a reference broker and run against it
    kwire compat --list

``--report`` puts a recording proxy between each client and the broker (the API versions each
cell sent) and asks the broker's ApiVersions (compared with Apache Kafka 4.2's).

Exit status: 0 when nothing failed, 1 when a scenario failed (or, with
``--allow BROKER``, when a result is not explained by FINDINGS.md), 2 on a usage error.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import socket
import sys
import time

from . import api_versions, java, reference, report, report_html
from .runner import CLIENTS, DEFAULT_CLIENTS, run_matrix
from .scenarios import SCENARIOS


def parse_args(argv):
    p = argparse.ArgumentParser(prog="kwire compat", description="Kafka client compatibility matrix.",
                                epilog="scenarios:\n" + report.scenario_help(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", metavar="HOST:PORT", help="the broker to test")
    where.add_argument("--against", metavar="tansu|kafka|HOST:PORT", type=_against,
                       help="start a reference broker: Tansu (bench/run.py) or Apache Kafka (testcontainers); "
                            "or HOST:PORT, a broker that is already running (as --bootstrap)")
    p.add_argument("--clients", default=",".join(DEFAULT_CLIENTS),
                   help=f"comma-separated, from {', '.join(CLIENTS)}")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated scenario names")
    p.add_argument("--java-jars", metavar="DIR",
                   help="folder of Apache Kafka's Java client (kafka-clients-*.jar, deps/) and Spark's "
                        "Kafka connector, for the java column and the spark-jvm row (default: "
                        "$KWIRE_COMPAT_JAVA_JARS, else ../shared/jars next to the project)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--report", metavar="FILE.html",
                   help="write the report as a self-contained HTML page, and as JSON beside it "
                        "(FILE.json, unless --json names another file)")
    p.add_argument("--name", help="the broker's name in the report (default: from --against or 'broker')")
    p.add_argument("--allow", metavar="BROKER",
                   help="exit 0 when every non-pass is in FINDINGS.md's allow-list for BROKER")
    p.add_argument("--jobs", type=int, default=1, help="clients to run at the same time (default 1)")
    p.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every scenario timeout")
    p.add_argument("--list", action="store_true", help="list clients and scenarios, then exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p.parse_args(argv)


REFERENCES = ("tansu", "kafka")


def _against(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if value in REFERENCES or (sep and host and port.isdigit()):
        return value
    raise argparse.ArgumentTypeError(f"expected tansu, kafka or HOST:PORT, not {value!r}")


def _split(text, known, what):
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in known]
    if bad:
        raise SystemExit(f"kwire compat: unknown {what}: {', '.join(bad)} (known: {', '.join(known)})")
    return items


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        print("clients: " + ", ".join(CLIENTS))
        print("scenarios:\n" + report.scenario_help())
        return 0
    if not args.bootstrap and not args.against:
        print("kwire compat: give --bootstrap HOST:PORT or --against tansu|kafka|HOST:PORT", file=sys.stderr)
        return 2
    try:
        clients = _split(args.clients, CLIENTS, "client")
        scenarios = _split(args.scenarios, SCENARIOS, "scenario")
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.java_jars:
        os.environ[java.JARS_ENV] = os.path.abspath(args.java_jars)   # read by the workers
    name = args.name or (args.against if args.against in REFERENCES else "broker")
    if args.against == "tansu":
        target = reference.tansu()
    elif args.against == "kafka":
        target = reference.apache_kafka()
    else:
        target = contextlib.nullcontext(args.bootstrap or args.against)

    def progress(r):
        if not args.quiet:
            print(f"  {r['status']:4} {r['client']:15} {r['scenario']:14} {r['seconds']:6.1f}s"
                  f"{'  ' + r['reason'] if r.get('reason') and r['status'] != 'pass' else ''}",
                  file=sys.stderr, flush=True)

    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    try:
        with target as bootstrap:
            host, _, port = bootstrap.rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
            except (OSError, ValueError) as exc:
                print(f"kwire compat: cannot connect to {bootstrap}: {exc}", file=sys.stderr)
                return 2
            probe = api_versions.probe(bootstrap) if args.report else None
            results = run_matrix(bootstrap, clients, scenarios, timeout_scale=args.timeout_scale,
                                 progress=progress, jobs=args.jobs, record_apis=bool(args.report))
    except reference.ReferenceUnavailable as exc:
        print(f"kwire compat: skipped: {exc}", file=sys.stderr)
        return 0
    print(report.table(results, title=f"{name} at {bootstrap}"))
    if args.json or args.report:
        doc = report_html.document(
            results, broker=name, bootstrap=bootstrap, started=started,
            duration_s=round(time.monotonic() - t0, 1), clients=clients, scenarios=scenarios,
            client_versions={c: CLIENTS[c].library_version() for c in clients}, probe=probe,
            command=" ".join(["kwire", "compat", *(sys.argv[1:] if argv is None else argv)]))
        report_html.write(doc, html_path=args.report,
                          json_path=args.json or report_html.json_path_for(args.report))
        if args.report and not args.quiet:
            print(f"report: {args.report} and {args.json or report_html.json_path_for(args.report)}",
                  file=sys.stderr)
    if args.allow:
        extra = report.unexpected(args.allow, results)
        for r in extra:
            print(f"not in FINDINGS.md: {r['client']} / {r['scenario']}: {r['status']}: {r.get('reason')}",
                  file=sys.stderr)
        return 1 if extra else 0
    return 1 if any(r["status"] == "fail" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
