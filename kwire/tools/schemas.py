"""``kwire schemas``: list, describe, register, check and delete the schemas of a Schema
Registry, and read or set its compatibility levels and modes.  It speaks only Confluent's REST
API, so it works against kwire's (``schema.registry.listeners``) and Confluent's own::

    kwire schemas list [--subject-prefix P] [--deleted]
    kwire schemas describe --subject S [--version V|latest] [--deleted]
    kwire schemas describe --id N [--deleted]
    kwire schemas register --subject S --schema-file F|- [--type AVRO|JSON|PROTOBUF]
                           [--reference NAME=SUBJECT:VERSION ...] [--normalize]
    kwire schemas check --subject S --schema-file F|- [--type ...] [--reference ...]
                        [--version V|latest|all]
    kwire schemas delete --subject S [--version V] [--permanent]
    kwire schemas config [--subject S] [--set LEVEL | --unset]
    kwire schemas mode [--subject S] [--set MODE [--force] | --unset]

Every command takes ``--registry-url URL`` (default http://127.0.0.1:8081, or
``$KWIRE_SCHEMA_REGISTRY_URL``), ``--user USER:PASSWORD`` (HTTP Basic), ``--ca-file PEM``
(the CAs an https registry's certificate is checked against; default the system's) and
``--output table|json``, before or after the command.  Kafka-style action flags work too
(``kwire schemas --list``).

``--type`` defaults to PROTOBUF for a ``.proto`` file, else AVRO.  ``check`` without
``--version`` (or with ``all``) checks what registering would: the versions the subject's
compatibility level names.  Deleting takes two steps, as in the registry: a soft delete,
then ``--permanent``.  ``describe`` pretty-prints AVRO and JSON schemas; ``describe --id``
also lists the subject versions holding the id.

Exit codes: 0 done (and compatible); 1 the registry refused (its message and Confluent error
code on one line: ``kwire: Subject 'x' not found. (error 40401)``), cannot be reached, or the
schema checked is incompatible; 2 bad arguments.
"""
from __future__ import annotations

import argparse
import base64
import http
import http.client
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Sequence

from kwire.tools.common import ToolError, UsageError, dispatch, emit

DEFAULT_URL = "http://127.0.0.1:8081"
URL_ENV = "KWIRE_SCHEMA_REGISTRY_URL"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = f"{CONTENT_TYPE}, application/vnd.schemaregistry+json; qs=0.9, application/json; qs=0.5"
TIMEOUT_S = 30.0
MAX_VERSION = 2 ** 31 - 1
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
ACTIONS = {f"--{name}": name for name in ("list", "describe", "register", "check", "delete")}
# Confluent's codes for "this subject has no level/mode of its own" (the global one applies)
NO_SUBJECT_CONFIG, NO_SUBJECT_MODE = 40408, 40409


# -- the REST client --------------------------------------------------------------------------
class RegistryRefused(ToolError):
    """The registry answered an error: HTTP ``status`` and Confluent's ``error_code``."""

    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(f"{message} (error {error_code})")
        self.status, self.error_code, self.message = status, error_code, message


class Registry:
    """One registry's REST API over urllib: ``call`` sends a request and returns its JSON."""

    def __init__(self, url: str, *, user: str | None = None, ca_file: str | None = None,
                 timeout: float = TIMEOUT_S):
        """Raises UsageError for a URL that is not http(s), a malformed ``user`` or an
        unreadable ``ca_file``."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--registry-url {url!r}: expected http://HOST:PORT or https://HOST:PORT")
        self.url, self.timeout, self.context = url.rstrip("/"), timeout, None
        self.headers = {"Accept": ACCEPT, "Content-Type": CONTENT_TYPE}
        if user is not None:
            name, sep, password = user.partition(":")
            if not sep or not name:
                raise UsageError("--user: expected USER:PASSWORD")
            token = base64.b64encode(f"{name}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        if ca_file is not None:
            if parts.scheme != "https":
                raise UsageError("--ca-file needs an https:// --registry-url")
            from kwire.admin.config_def import ConfigError
            from kwire.security.tls import client_context
            try:
                self.context = client_context({"ssl.truststore.location": ca_file, "ssl.truststore.type": "PEM"})
            except ConfigError as exc:
                reason = str(exc).split("ssl.truststore.location: ", 1)[-1]     # Kafka's wording names the key
                raise UsageError(f"--ca-file {ca_file}: {reason}") from None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Registry":
        return cls(args.registry_url, user=args.user, ca_file=args.ca_file)

    def call(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None) -> Any:
        """The decoded JSON answer of ``method path?query`` with ``body`` as JSON.  ``query``
        values None and False are left out, True is sent as ``true``.  Raises RegistryRefused
        (an error answer), ToolError (unreachable, or an answer that is not JSON)."""
        params = {k: "true" if v is True else str(v) for k, v in (query or {}).items()
                  if v is not None and v is not False}
        url = self.url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            raise _refusal(method, path, exc) from None
        except urllib.error.URLError as exc:
            reason = getattr(exc.reason, "strerror", None) or exc.reason
            raise ToolError(f"cannot reach the Schema Registry at {self.url}: {reason}") from None
        except (OSError, http.client.HTTPException) as exc:
            raise ToolError(f"cannot reach the Schema Registry at {self.url}: {exc or type(exc).__name__}") from None
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError:
            raise ToolError(f"{method} {url}: the answer is not JSON: {raw[:200]!r}") from None


def _refusal(method: str, path: str, exc: urllib.error.HTTPError) -> RegistryRefused:
    """Confluent's ``{"error_code", "message"}`` body, or for any other body (a proxy's page,
    an unknown route of a plain HTTP server) the status line, with error code = status."""
    try:
        raw = exc.read()
    except OSError:
        raw = b""
    try:
        obj = json.loads(raw)
        return RegistryRefused(exc.code, int(obj["error_code"]), str(obj["message"]))
    except (ValueError, TypeError, KeyError):
        try:
            reason = exc.reason or http.HTTPStatus(exc.code).phrase
        except ValueError:
            reason = "(no reason given)"
        return RegistryRefused(exc.code, exc.code, f"{method} {path}: HTTP {exc.code} {reason}")


def quoted(subject: str) -> str:
    """A subject as one path segment (subjects may hold ``/`` and spaces)."""
    return urllib.parse.quote(subject, safe="")


# -- arguments ----------------------------------------------------------------------------------
def add_registry_arguments(parser: argparse.ArgumentParser, *, with_defaults: bool) -> None:
    """The common options.  The tool's own parser holds the defaults; each subcommand takes
    them too without defaults (argparse.SUPPRESS), so a value given after the subcommand wins
    and one given before it is not reset."""
    def default(value):
        return value if with_defaults else argparse.SUPPRESS
    parser.add_argument("--registry-url", metavar="URL", default=default(os.environ.get(URL_ENV) or DEFAULT_URL),
                        help=f"the Schema Registry (default ${URL_ENV}, else {DEFAULT_URL})")
    parser.add_argument("--user", metavar="USER:PASSWORD", default=default(None), help="HTTP Basic credentials")
    parser.add_argument("--ca-file", metavar="PEM", default=default(None),
                        help="CA certificates to check an https registry against (default: the system's)")
    parser.add_argument("--output", choices=("table", "json"), default=default("table"),
                        help="readable text (default) or JSON for scripts")


def version_type(*words: str):
    """An argparse type: a version number in [1, 2^31-1] (``-1`` is ``latest``) or one of ``words``."""
    def parse(text: str) -> str:
        if text == "-1" and "latest" in words:
            return "latest"
        if text in words or (text.isdigit() and 1 <= int(text) <= MAX_VERSION):
            return text if text in words else str(int(text))
        raise argparse.ArgumentTypeError(f"{text!r}: expected a version number or {' or '.join(words)}")
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kwire schemas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_registry_arguments(parser, with_defaults=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_registry_arguments(p, with_defaults=False)
        return p

    p = command("list", "subjects with their latest version, id and schema type")
    p.add_argument("--subject-prefix", default="", metavar="P", help="only subjects starting with P")
    p.add_argument("--deleted", action="store_true", help="soft-deleted subjects and versions too")
    p = command("describe", "one version of a subject, or the schema of an id")
    p.add_argument("--subject", help="the subject")
    p.add_argument("--version", type=version_type("latest"), help="a version number or latest (default)")
    p.add_argument("--id", type=int, help="a schema id (instead of --subject)")
    p.add_argument("--deleted", action="store_true", help="soft-deleted versions too")
    for name, help_text in (("register", "register a schema under a subject; prints its id"),
                            ("check", "check a schema's compatibility with a subject; exit 1 if incompatible")):
        p = command(name, help_text)
        p.add_argument("--subject", required=True, help="the subject")
        p.add_argument("--schema-file", required=True, metavar="FILE", help="the schema (- reads stdin)")
        p.add_argument("--type", type=str.upper, choices=SCHEMA_TYPES,
                       help="the schema type (default PROTOBUF for a .proto file, else AVRO)")
        p.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION",
                       help="a schema it references (repeatable; VERSION may be latest)")
    sub.choices["check"].add_argument("--version", type=version_type("latest", "all"),
                                      help="the version to check against, latest, or all (default: as "
                                           "registering would)")
    sub.choices["register"].add_argument("--normalize", action="store_true",
                                         help="normalize the schema before registering it")
    p = command("delete", "delete a subject or one of its versions (soft, then --permanent)")
    p.add_argument("--subject", required=True, help="the subject")
    p.add_argument("--version", type=version_type("latest"), help="one version (default: the whole subject)")
    p.add_argument("--permanent", action="store_true", help="remove what was soft-deleted, for good")
    for name, values, what in (("config", LEVELS, "compatibility level"), ("mode", MODES, "mode")):
        p = command(name, f"show or set the {what} of the registry or of one subject")
        p.add_argument("--subject", help=f"the subject (default: the global {what})")
        change = p.add_mutually_exclusive_group()
        change.add_argument("--set", type=str.upper, choices=values, metavar=name.upper(),
                            help=f"the new {what}: {', '.join(values)}")
        change.add_argument("--unset", action="store_true",
                            help=f"remove the subject's own {what} (the global one applies again)")
        if name == "mode":
            p.add_argument("--force", action="store_true", help="IMPORT even over existing schemas")
    return parser


def read_schema(args: argparse.Namespace) -> tuple[str, str]:
    """(schema type, text) of ``--schema-file`` and ``--type``.  Raises UsageError."""
    path = args.schema_file
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--schema-file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        raise UsageError(f"--schema-file {path}: the schema is empty")
    return args.type or ("PROTOBUF" if path.endswith(".proto") else "AVRO"), text


def parse_reference(text: str) -> tuple[str, str, str]:
    """``NAME=SUBJECT:VERSION`` as (name, subject, version); VERSION a number or latest.
    Raises UsageError."""
    name, sep, rest = text.rpartition("=")
    subject, colon, version = rest.rpartition(":")
    if not (sep and name and colon and subject) or not (version == "latest" or version.isdigit()):
        raise UsageError(f"--reference {text!r}: expected NAME=SUBJECT:VERSION")
    return name, subject, version


def schema_body(args: argparse.Namespace, registry: Registry) -> dict:
    """The request body of register and check: schema, schemaType (left out for AVRO, as
    Confluent's own clients do) and references, ``latest`` resolved to a number.  Raises
    UsageError, RegistryRefused, ToolError."""
    references = [parse_reference(r) for r in args.reference]
    schema_type, text = read_schema(args)
    body: dict[str, Any] = {"schema": text}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    resolved = []
    for name, subject, version in references:
        if version == "latest":
            version = registry.call("GET", f"/subjects/{quoted(subject)}/versions/latest")["version"]
        resolved.append({"name": name, "subject": subject, "version": int(version)})
    if resolved:
        body["references"] = resolved
    return body


# -- commands -----------------------------------------------------------------------------------
def latest_versions(registry: Registry, prefix: str, deleted: bool) -> list[dict]:
    """The latest version of each subject (GET /schemas?latestOnly=true; a registry without
    that route is asked subject by subject)."""
    try:
        found = registry.call("GET", "/schemas", query={"subjectPrefix": prefix or None, "deleted": deleted,
                                                         "latestOnly": True})
    except RegistryRefused as exc:
        if exc.error_code != 404:           # 404 itself: an unknown route, not a missing subject
            raise
        subjects = registry.call("GET", "/subjects", query={"deleted": deleted})
        found = [registry.call("GET", f"/subjects/{quoted(s)}/versions/latest", query={"deleted": deleted})
                 for s in subjects if s.startswith(prefix)]
    return sorted(found, key=lambda v: (v["subject"], v["version"]))


def list_subjects(args: argparse.Namespace) -> None:
    found = latest_versions(Registry.from_args(args), args.subject_prefix, args.deleted)
    document = [{"subject": v["subject"], "version": v["version"], "id": v["id"],
                 "schemaType": v.get("schemaType", "AVRO")} for v in found]
    emit(args, document, ("SUBJECT", "VERSION", "ID", "TYPE"),
         [(d["subject"], d["version"], d["id"], d["schemaType"]) for d in document])


def pretty(schema_type: str, text: str) -> str:
    """AVRO and JSON schemas indented; PROTOBUF (and anything unparsable) as registered."""
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return text


def describe(args: argparse.Namespace) -> None:
    if (args.subject is None) == (args.id is None):
        raise UsageError("describe needs --subject S or --id N (one of them)")
    if args.id is not None and args.version is not None:
        raise UsageError("--version goes with --subject")
    registry = Registry.from_args(args)
    if args.subject is not None:
        answer = registry.call("GET", f"/subjects/{quoted(args.subject)}/versions/{args.version or 'latest'}",
                               query={"deleted": args.deleted})
    else:
        answer = {"id": args.id, **registry.call("GET", f"/schemas/ids/{args.id}")}
        try:
            answer["versions"] = registry.call("GET", f"/schemas/ids/{args.id}/versions",
                                               query={"deleted": args.deleted})
        except RegistryRefused as exc:
            if exc.error_code != 404:       # a registry without the route: leave them out
                raise
    answer.setdefault("schemaType", "AVRO")
    if args.output == "json":
        emit(args, answer, [], [])
        return
    fields = [("Subject", answer.get("subject")), ("Version", answer.get("version")), ("Id", answer["id"]),
              ("Type", answer["schemaType"]),
              ("References", ", ".join(f"{r['name']}={r['subject']}:{r['version']}"
                                       for r in answer.get("references") or ()) or None),
              ("Used by", ", ".join(f"{v['subject']}:{v['version']}" for v in answer["versions"])
               if "versions" in answer else None)]
    for label, value in fields:
        if value is not None:
            print(f"{label + ':':<12}{value}")
    print("Schema:")
    print(pretty(answer["schemaType"], answer["schema"]))


def register(args: argparse.Namespace) -> None:
    registry = Registry.from_args(args)
    body = schema_body(args, registry)
    answer = registry.call("POST", f"/subjects/{quoted(args.subject)}/versions",
                           query={"normalize": args.normalize}, body=body)
    if args.output == "json":
        emit(args, {"subject": args.subject, "id": answer["id"]}, [], [])
    else:
        print(answer["id"])


def check(args: argparse.Namespace) -> int:
    """Exit code 0 when compatible, 1 when not."""
    registry = Registry.from_args(args)
    body = schema_body(args, registry)
    version = args.version or "all"
    path = f"/compatibility/subjects/{quoted(args.subject)}/versions" + ("" if version == "all" else f"/{version}")
    answer = registry.call("POST", path, query={"verbose": True}, body=body)
    compatible, messages = bool(answer.get("is_compatible")), list(answer.get("messages") or ())
    if args.output == "json":
        emit(args, {"subject": args.subject, "version": version, "is_compatible": compatible,
                    "messages": messages}, [], [])
    else:
        against = "the versions its compatibility level checks" if version == "all" else f"version {version}"
        print(f"{'compatible' if compatible else 'incompatible'} with subject '{args.subject}' "
              f"({against}){'' if compatible else ':'}")
        for message in messages if not compatible else ():
            print(f"  - {message}")
    return 0 if compatible else 1


def delete(args: argparse.Namespace) -> None:
    path = f"/subjects/{quoted(args.subject)}" + (f"/versions/{args.version}" if args.version else "")
    answer = Registry.from_args(args).call("DELETE", path, query={"permanent": args.permanent})
    versions = answer if isinstance(answer, list) else [answer]
    if args.output == "json":
        emit(args, {"subject": args.subject, "versions": versions, "permanent": args.permanent}, [], [])
        return
    done = "Permanently deleted" if args.permanent else "Soft-deleted"
    print(f"{done} subject '{args.subject}' version{'s' if len(versions) != 1 else ''} "
          f"{', '.join(map(str, versions))}.")
    if not args.permanent:
        print("Soft-deleted versions still resolve by id; delete again with --permanent to remove them for good.")


def _setting(args: argparse.Namespace, route: str, key: str, missing: int, what: str) -> None:
    """``config`` and ``mode``: read, set or unset ``key`` at ``/route[/subject]``."""
    registry = Registry.from_args(args)
    subject = args.subject
    path = f"/{route}" + (f"/{quoted(subject)}" if subject is not None else "")
    whose = f"subject '{subject}'" if subject is not None else "the registry (global)"
    if args.set:
        registry.call("PUT", path, query={"force": getattr(args, "force", False)},
                      body={"compatibility" if route == "config" else "mode": args.set})
        document, text = {"subject": subject, key: args.set}, f"The {what} of {whose} is now {args.set}."
    elif args.unset:
        previous = registry.call("DELETE", path) or {}
        document = {"subject": subject, "removed": previous.get(key)}
        text = f"Removed the {what} of {whose} (it was {previous.get(key)})."
    else:
        source = "subject" if subject is not None else "global"
        try:
            answer = registry.call("GET", path)
        except RegistryRefused as exc:
            if exc.error_code != missing:
                raise
            answer, source = registry.call("GET", f"/{route}"), "global"
        document = {"subject": subject, key: answer.get(key), "source": source}
        if answer.get("normalize") is not None:
            document["normalize"] = answer["normalize"]
        label = "(global)" if subject is None else subject
        emit(args, document, ("SUBJECT", what.upper(), "SET ON"), [(label, answer.get(key), source)])
        return
    if args.output == "json":
        emit(args, document, [], [])
    else:
        print(text)


def config(args: argparse.Namespace) -> None:
    _setting(args, "config", "compatibilityLevel", NO_SUBJECT_CONFIG, "compatibility level")


def mode(args: argparse.Namespace) -> None:
    if args.force and args.set is None:
        raise UsageError("--force goes with --set")
    _setting(args, "mode", "mode", NO_SUBJECT_MODE, "mode")


COMMANDS = {"list": list_subjects, "describe": describe, "register": register, "check": check,
            "delete": delete, "config": config, "mode": mode}


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(argv, build_parser(), ACTIONS, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
