"""The API against its own contract: schemathesis generates requests from docs/openapi.json for every
operation (the coverage phase's boundary and invalid values, undeclared methods and content types, missing
credentials; then random valid and invalid cases) and sends them over HTTP to `citewise serve`, as a tenant
with documents to list, read, search and delete (the operator's routes as the platform operator). No
request may get a 5xx, and every response must be one the document declares: its status code, its content
type and its body schema. The document states every rule the API enforces, so no request it calls valid is
refused (positive data acceptance), and a method a path does not declare is 405 with `Allow`.

Generation is derandomized, so a run is the same run on every machine and in CI. Unauthenticated calls to
every authenticated route of `citewise.api.routes.ROUTES` get the documented 401."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case, HookContext
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from citewise.api.audit import EXPORT_PATH as AUDIT_EXPORT
from citewise.api.routes import ROUTES, Route
from citewise.domain.models import CONVERSATION_ID_PATTERN, TENANT_ID_PATTERN
from citewise.ports.usage import MAX_REPORT_DAYS
from citewise_local.server import MAX_REQUEST_LINE_BYTES
from tests.e2e.helpers import Api, mint_operator, upload, wait_for_status

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
MAX_EXAMPLES = 30
"""Random cases per operation, on top of the coverage phase's boundary cases (the bulk of the run time)."""
UPLOAD_SIZE = 1024
"""The size the upload hook below gives its variants: well under the limit, so they can succeed."""
DOC_ID = re.compile(r"^[0-9a-f]{32}$")
TENANT_ID = re.compile(TENANT_ID_PATTERN)
CREDENTIAL_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
CONVERSATION_ID = re.compile(CONVERSATION_ID_PATTERN)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    # A request the document calls valid must not be refused (400, 405, 413, 415): the document states every
    # rule the API enforces. 401, 403, 404, 409 and 429 stay acceptable answers to valid requests.
    positive_data_acceptance,
    # A method a path does not declare is 405 with an `Allow` header naming those it does.
    unsupported_method,
]
CURSOR = re.compile(r"^[A-Za-z0-9_-]+$")

schema = schemathesis.openapi.from_path(DOCUMENT)


@dataclass
class Corpus:
    """The fuzzing tenant: its token, the documents reads may hit, and those deletes may use up; and the
    platform operator's token, with a cursor of its listing of tenants and one of the tenant's audit trail."""

    tenant: str = ""
    token: str = ""
    kept: list[str] = field(default_factory=list)
    disposable: list[str] = field(default_factory=list)
    cursor: str = ""
    operator: str = ""
    tenant_cursor: str = ""
    erasable: str = ""
    """A tenant the operator's erasure cases may erase (the first one that names it does)."""
    erased: str = ""
    """A tenant erased before the cases run, whose receipt the reads find."""
    audit_cursor: str = ""
    credentials: list[str] = field(default_factory=list)
    conversations: list[str] = field(default_factory=list)
    disposable_conversations: list[str] = field(default_factory=list)
    conversation_cursor: str = ""
    sources: list[str] = field(default_factory=list)
    """Web sources reads and refreshes may name (a refresh holds its source: a second is 409)."""
    disposable_sources: list[str] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)
    """The `response_id` of the tenant's answers: what feedback cases name."""
    source_names: list[str] = field(default_factory=list)
    """Sources of uploaded documents (their `source`): what a source's stats may name besides a web source."""


CORPUS = Corpus()
"""Filled by the `corpus` fixture before any case is generated: the path parameter hook below reads it."""


@schema.hook
def flatmap_path_parameters(context: HookContext, path_parameters: dict[str, Any] | None) -> st.SearchStrategy[Any]:
    """Random 32-hex ids almost never name a document, so reads and deletes would only ever see 404.

    A valid generated id is swapped, some of the time, for one of the tenant's documents (deletes get their
    own, so reads keep finding theirs), or of its credentials (revoking one again answers it again; the
    operator's route gets the fuzzing tenant's id with it). A valid tenant id in an operator's path is
    swapped the same way for the fuzzing tenant's, which has records (usage, an audit trail,
    credentials). Invalid ids are left alone: they are what a negative case tests."""
    doc_id = (path_parameters or {}).get("id")
    deleting = context.operation is not None and context.operation.method.upper() == "DELETE"
    if context.operation is not None and context.operation.path.endswith("/stats"):
        if path_parameters is None or not isinstance(doc_id, str):
            return st.just(path_parameters)
        named = [doc_id, *CORPUS.source_names, *CORPUS.sources]
        return st.sampled_from(named).map(lambda chosen: {**path_parameters, "id": chosen})
    if context.operation is not None and "/conversations/" in context.operation.path:
        if path_parameters is None or not isinstance(doc_id, str) or not CONVERSATION_ID.match(doc_id):
            return st.just(path_parameters)
        pool = CORPUS.disposable_conversations if deleting else CORPUS.conversations
        return st.sampled_from([doc_id, *pool]).map(lambda chosen: {**path_parameters, "id": chosen})
    if context.operation is not None and "/sources/" in context.operation.path:
        if path_parameters is None or not isinstance(doc_id, str) or not DOC_ID.match(doc_id):
            return st.just(path_parameters)
        pool = CORPUS.disposable_sources if deleting else CORPUS.sources
        return st.sampled_from([doc_id, *pool]).map(lambda chosen: {**path_parameters, "id": chosen})
    if context.operation is not None and "/credentials/" in context.operation.path:
        if path_parameters is None or not isinstance(doc_id, str) or not CREDENTIAL_ID.match(doc_id):
            return st.just(path_parameters)
        owned = {"tenant_id": CORPUS.tenant} if "tenant_id" in path_parameters else {}
        return st.sampled_from([{}, *({"id": chosen, **owned} for chosen in CORPUS.credentials)]).map(
            lambda chosen: {**path_parameters, **chosen}
        )
    tenant_id = (path_parameters or {}).get("tenant_id")
    if path_parameters is not None and isinstance(tenant_id, str) and TENANT_ID.match(tenant_id):
        if context.operation is not None and context.operation.path.endswith("/erasure"):
            # Some cases erase the corpus's tenant meant for it, or read the receipt of the one erased
            starting = context.operation.method.upper() == "POST"
            chosen = CORPUS.erasable if starting else CORPUS.erased
            return st.sampled_from([tenant_id, chosen]).map(lambda name: {**path_parameters, "tenant_id": name})
        return st.sampled_from([tenant_id, CORPUS.tenant]).map(lambda chosen: {**path_parameters, "tenant_id": chosen})
    if path_parameters is None or not isinstance(doc_id, str) or not DOC_ID.match(doc_id):
        return st.just(path_parameters)
    pool = CORPUS.disposable if deleting else CORPUS.kept
    return st.sampled_from([doc_id, *pool]).map(lambda chosen: {**path_parameters, "id": chosen})


@schema.hook
def flatmap_body(context: HookContext, body: Any) -> st.SearchStrategy[Any]:
    """Random file names almost never end in a supported extension, so uploads would only ever see 415.

    Alongside each generated upload body come two variants whatever else the body holds: its file name with
    a `.md` suffix, and a plain `fuzz/upload.md`, both with the Markdown content type and a size under the
    limit. Random response ids name no answer, so feedback would only ever see 404: a feedback body comes
    with a variant naming one of the tenant's answers, and one naming it as a whole (no citation). Bodies of
    the other operations, and bodies that are not objects, are left alone."""
    operation = context.operation
    if operation is not None and operation.path == "/v1/feedback" and isinstance(body, dict):
        named = [{**body, "response_id": response_id} for response_id in CORPUS.responses]
        whole = [{key: value for key, value in variant.items() if key != "citation"} for variant in named]
        return st.sampled_from([body, *named, *whole])
    if operation is None or operation.path != "/v1/uploads" or not isinstance(body, dict):
        return st.just(body)
    filename = body.get("filename")
    if not isinstance(filename, str):
        return st.just(body)
    markdown = {**body, "content_type": "text/markdown"}
    size = body.get("size")
    if isinstance(size, int | float) and size > UPLOAD_SIZE:
        markdown["size"] = UPLOAD_SIZE
    return st.sampled_from(
        [body, {**markdown, "filename": f"{filename}.md"}, {**markdown, "filename": "fuzz/upload.md"}]
    )


def _usage_range(path: str, query: dict[str, Any] | None) -> dict[str, Any] | None:
    """A usage report's range has a rule across its two parameters that OpenAPI cannot state (the route's
    description does): it ends on or after it starts and spans at most `MAX_REPORT_DAYS`. Schema-valid days
    are put in that order and span (an inverted or too long range is tested in
    tests/integration/handlers/test_usage.py); anything else is left alone for the negative cases."""
    if query is None or not path.endswith("usage"):
        return query
    first, last = _day(query.get("from")), _day(query.get("to"))
    if first is None or (last is None and "to" in query):
        return query
    last = last or datetime.now(UTC).date()
    first, last = min(first, last), max(first, last)
    return {**query, "from": str(max(first, last - timedelta(days=MAX_REPORT_DAYS - 1))), "to": str(last)}


def _day(value: object) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


@pytest.fixture(scope="module")
def corpus(api: Api) -> Iterator[Corpus]:
    """A tenant with indexed documents; ingestion has settled before the first case is sent. The fuzzer is a
    tenant admin, so the admin-only operation (PUT /v1/settings) is exercised beyond its 403; it owns every
    document it reaches, so the other operations test what they would for any owner."""
    tenant = f"fuzz-{uuid.uuid4().hex[:12]}"
    token = api.token(tenant, "fuzzer", "admin")
    sources = [
        (
            "ops/runbook.md",
            b"# Runbook\n\n## Dead letters\n\nRedrive the messages once the cause is fixed.\n",
            "text/markdown",
        ),
        ("ops/releases.md", b"# Releases\n\nReleases ship on Tuesdays after the smoke tests pass.\n", "text/markdown"),
        ("notes/plain.txt", b"Plain text notes: the staging database is rebuilt every night.\n", "text/plain"),
    ]
    kept = [upload(api, token, path, data, content_type) for path, data, content_type in sources]
    disposable = [
        upload(api, token, f"tmp/scratch-{n}.md", f"# Scratch {n}\n\nThrowaway text.\n".encode(), "text/markdown")
        for n in range(2)
    ]
    for doc_id in kept + disposable:
        assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"
    # A second tenant, so the operator's listing has a page after its first
    other = api.token(f"fuzz-{uuid.uuid4().hex[:12]}", "fuzzer")
    assert wait_for_status(api, other, upload(api, other, "a.md", b"# A\n\nText.\n", "text/markdown"))
    first_page = api.request("GET", "/v1/documents?limit=1", token=token).json()
    CORPUS.tenant, CORPUS.token, CORPUS.kept, CORPUS.disposable = tenant, token, kept, disposable
    CORPUS.cursor = first_page["next_cursor"]
    CORPUS.operator = mint_operator(api, "fuzz-operator")
    CORPUS.tenant_cursor = api.request("GET", "/v1/admin/tenants?limit=1", token=CORPUS.operator).json()["next_cursor"]
    trail = api.request("GET", f"/v1/admin/tenants/{tenant}/audit?limit=1", token=CORPUS.operator).json()
    CORPUS.audit_cursor = trail["next_cursor"]
    CORPUS.credentials = [
        api.request("POST", "/v1/credentials", token=token, json_body={"name": "fuzz", "user": f"fuzz-{n}"}).json()[
            "credential"
        ]["credential_id"]
        for n in range(2)
    ]
    # Conversations of the fuzzing user: two that reads find, two that deletes may use up, and a cursor
    asked = [
        api.request("POST", "/v1/query", token=token, json_body={"query": f"What is in scratch {n}?"}).json()
        for n in range(4)
    ]
    ids = [answer["conversation"]["conversation_id"] for answer in asked]
    CORPUS.conversations, CORPUS.disposable_conversations = ids[:2], ids[2:]
    CORPUS.responses = [answer["conversation"]["response_id"] for answer in asked[:2]]
    CORPUS.source_names = ["ops", "notes"]  # the documents' first folders above
    CORPUS.conversation_cursor = api.request("GET", "/v1/conversations?limit=1", token=token).json()["next_cursor"]
    # Web sources: a few that reads and refreshes find, two that deletes may use up
    registered = [
        api.request(
            "POST", "/v1/sources", token=token, json_body={"kind": "urls", "urls": [f"https://docs.example.com/{n}"]}
        ).json()["source_id"]
        for n in range(6)
    ]
    CORPUS.sources, CORPUS.disposable_sources = registered[:4], registered[4:]
    # Two tenants for the erasure operations: one to erase, one erased already (its receipt to read)
    CORPUS.erasable, CORPUS.erased = (f"fuzz-{uuid.uuid4().hex[:12]}" for _ in range(2))
    for leaving in (CORPUS.erasable, CORPUS.erased):
        member = api.token(leaving, "fuzzer")
        assert wait_for_status(api, member, upload(api, member, "a.md", b"# A\n\nText.\n", "text/markdown"))
    erased = api.request("POST", f"/v1/admin/tenants/{CORPUS.erased}/erasure", token=CORPUS.operator)
    assert erased.status == 202, erased.body
    yield CORPUS
    CORPUS.tenant, CORPUS.token, CORPUS.kept, CORPUS.disposable, CORPUS.cursor = "", "", [], [], ""
    CORPUS.operator, CORPUS.tenant_cursor, CORPUS.audit_cursor, CORPUS.credentials = "", "", "", []
    CORPUS.erasable, CORPUS.erased = "", ""
    CORPUS.conversations, CORPUS.disposable_conversations, CORPUS.conversation_cursor = [], [], ""
    CORPUS.sources, CORPUS.disposable_sources = [], []
    CORPUS.responses, CORPUS.source_names = [], []


@dataclass
class Outcomes:
    """What one operation's cases got back, and whether one of them already failed a check."""

    statuses: Counter[int] = field(default_factory=Counter)
    failed: bool = False


@pytest.fixture
def outcomes() -> Iterator[Outcomes]:
    """Set up once per operation (the test item), not per case. Unless a check already failed, at least one
    case must have succeeded: a run that only ever saw 4xx (a broken token, documents that were never
    reachable) would pass every check and prove little."""
    seen = Outcomes()
    yield seen
    if not seen.failed:
        successes = sum(count for status, count in seen.statuses.items() if 200 <= status < 300)
        assert successes, f"no generated case succeeded: {dict(seen.statuses)}"


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_keeps_its_contract(case: Case, api: Api, corpus: Corpus, outcomes: Outcomes) -> None:
    # No shared session: over a kept-alive connection each request to `citewise serve` stalls ~40 ms (its
    # headers and body leave in two writes, and Nagle waits for the client's delayed ACK); a fresh
    # connection per case takes ~2 ms.
    operator = case.operation.path.startswith("/v1/admin/")
    exporting = case.operation.path == AUDIT_EXPORT
    issued = corpus.audit_cursor if exporting else corpus.tenant_cursor if operator else corpus.cursor
    if case.operation.path == "/v1/conversations":
        issued = corpus.conversation_cursor
    query = _issued_cursor(case.query, issued)
    if exporting and query is not case.query:
        # An audit cursor is bound to the tenant it was issued for: the export of that tenant
        case.path_parameters = {**(case.path_parameters or {}), "tenant_id": corpus.tenant}
    case.query = _usage_range(case.operation.path, query)
    token = corpus.operator if operator else corpus.token
    response = case.call(base_url=api.url, headers={"Authorization": f"Bearer {token}"})
    outcomes.statuses[response.status_code] += 1
    request_line = f"{response.request.method} {response.request.path_url} HTTP/1.1"
    if len(request_line.encode()) > MAX_REQUEST_LINE_BYTES:
        # A limit of the server's, as API Gateway has one, before any operation: no operation's contract.
        assert response.status_code == 414, response.text
        assert response.json()["error"]["code"] == "VALIDATION_ERROR"
        return
    try:
        case.validate_response(response, checks=CHECKS)
    except BaseException:  # schemathesis raises a FailureGroup, a BaseExceptionGroup
        outcomes.failed = True
        raise


def _issued_cursor(query: dict[str, Any] | None, issued: str) -> dict[str, Any] | None:
    """A cursor is opaque: one that merely has the documented form was never issued, and is refused (400).

    A well-formed generated cursor is swapped for `issued`, one the server issued for the operation's listing
    (the tenant's documents, or the operator's tenants), without the path prefix it was not issued for (in the
    test, not a hook: the coverage phase's cases pass no hooks). Malformed cursors are left alone, for the
    negative cases."""
    if not query or not isinstance(query.get("cursor"), str) or not CURSOR.match(query["cursor"]):
        return query
    return {name: value for name, value in query.items() if name != "path_prefix"} | {"cursor": issued}


def _tampered(token: str) -> str:
    """The same token claiming another tenant: the signature no longer matches the claims."""
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["custom:tenant_id"] = "someone-else"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{header}.{forged}.{signature}"


VALID_BODIES: dict[str, dict[str, Any]] = {
    "/v1/query": {"query": "When do releases ship?"},
    "/v1/search": {"query": "releases"},
    "/v1/uploads": {"filename": "a.md", "content_type": "text/markdown", "size": 10},
    "/v1/credentials": {"name": "agent", "user": "agent"},
    "/v1/sources": {"kind": "sitemap", "url": "https://docs.example.com/sitemap.xml"},
}


@pytest.mark.parametrize("credentials", ["none", "tampered", "not-a-jwt"])
@pytest.mark.parametrize(
    "route", [r for r in ROUTES if r.authenticated and r.openapi], ids=lambda r: f"{r.method} {r.path}"
)
def test_authenticated_operations_refuse_a_missing_or_bad_token(
    api: Api, corpus: Corpus, route: Route, credentials: str
) -> None:
    # Given a request that is valid in every way but its identity (and names a document, a tenant, that exists)
    operation = schema[route.path][route.method]
    known = {"id": corpus.kept[0], "tenant_id": "acme"}
    named = {name: value for name, value in known.items() if f"{{{name}}}" in route.path}
    parts: dict[str, Any] = {"path_parameters": named} if named else {}
    if route.path in VALID_BODIES:
        parts |= {"body": VALID_BODIES[route.path], "media_type": "application/json"}
    case = operation.Case(**parts)
    headers = {
        "none": {},
        "tampered": {"Authorization": f"Bearer {_tampered(corpus.token)}"},
        "not-a-jwt": {"Authorization": "Bearer not-a-jwt"},
    }[credentials]
    # When it is sent
    response = case.call(base_url=api.url, headers=headers)
    # Then it is refused with the documented 401 body before any handler runs
    assert response.status_code == 401, response.text
    case.validate_response(response, checks=CHECKS)
    error = response.json()["error"]
    assert error["code"] == "UNAUTHORIZED"
    assert [error["request_id"]] == response.headers["x-amzn-requestid"]
    if route.method == "DELETE":
        assert api.request("GET", f"/v1/documents/{corpus.kept[0]}", token=corpus.token).status == 200
