"""Requests as the OpenSearch double received them, checked against the official API specification
(opensearch-project/opensearch-api-specification, the operations citewise uses, vendored in
`opensearch_spec/operations.json`; see its README for the commit and licence).

Each request is matched to an operation by method and path template; its query parameters must be
declared by that operation and valid for their schema, and its body must validate against the
operation's request body schema (a bulk body line by line, as the spec's array of actions and sources).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs

from tests.doubles.opensearch_server import Recorded

SPEC = Path(__file__).resolve().parent / "opensearch_spec" / "operations.json"


@cache
def _spec() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SPEC.read_text())
    return loaded


@cache
def _validator(operation: str, part: str, name: str = "") -> Any:
    spec = _spec()
    entry = spec["operations"][operation]
    schema = entry["body"]["schema"] if part == "body" else entry["parameters"][name]["schema"]
    return jsonschema_rs.Draft202012Validator({**schema, "$defs": spec["$defs"]})


def operation_of(method: str, path: str) -> str:
    """The spec's operation key (`POST /{index}/_bulk`) for a request; KeyError when it has none."""
    parts = [p for p in path.split("/") if p]
    template = "/" + "/".join(["{index}", *parts[1:]]) if parts else "/"
    key = f"{method} {template}"
    if key not in _spec()["operations"]:
        raise KeyError(f"{method} {path}: not an operation citewise is checked for ({key})")
    return key


def problems(request: Recorded) -> list[str]:
    """What in `request` the specification does not allow ([] when it conforms)."""
    try:
        operation = operation_of(request.method, request.path)
    except KeyError as exc:
        return [str(exc)]
    found: list[str] = []
    declared = _spec()["operations"][operation]["parameters"]
    for name, raw in request.params.items():
        if name not in declared or declared[name]["in"] != "query":
            found.append(f"{operation}: undeclared query parameter {name!r}")
            continue
        validator = _validator(operation, "parameter", name)
        if not (validator.is_valid(raw) or validator.is_valid(_typed(raw))):
            found.append(f"{operation}: query parameter {name}={raw!r} does not match its schema")
    if request.body:
        if _spec()["operations"][operation]["body"] is None:
            return [*found, f"{operation}: a body where the operation takes none"]
        text = request.body.decode()
        body = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if request.path.endswith("/_bulk")
            else json.loads(text)
        )
        found += [f"{operation}: {error}" for error in _validator(operation, "body").iter_errors(body)][:5]
    return found


def _typed(raw: str) -> Any:
    """A query string value as the JSON value it spells (`true`, `10`), else the string itself."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
