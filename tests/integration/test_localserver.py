"""`citewise serve`'s server over real HTTP, with a fake functions directory whose handlers echo what
they receive: the events, the identity, the errors, and uploads through the queue to the ingest handler."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import re
import socket
import struct
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aws_lambda_powertools.utilities.parser.models import APIGatewayProxyEventModel, S3SqsEventNotificationModel

from citewise.domain.errors import CitewiseError
from citewise.domain.models import Caller, Document, DocumentStatus, Visibility
from citewise.domain.sources import SourceKind, SourceSpec, page_path
from citewise.domain.tenancy import document_id
from citewise.ingest.sources import register_source
from citewise.ports.blobstore import key_to_location
from citewise.runtime.services import Services
from citewise.runtime.settings import Settings, load_settings
from citewise_local.auth import TOKEN_PURPOSE, local_key, mint_token
from citewise_local.backend import local_blob_store
from citewise_local.blobstore import LocalBlobStore
from citewise_local.registry import LocalRegistry
from citewise_local.server import MAX_RECEIVES, LocalServer
from citewise_local.sources import LocalSources
from tests.doubles.web import FakeSite, Page, html

MAX_BODY = 4096

ECHO_HANDLER = textwrap.dedent(
    """
    import json, os, time
    from pathlib import Path

    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging import correlation_paths

    # Module-global, as in the real handlers: the state that concurrent invocations must not share. Its
    # lines go to a file (appended whole) that the test reads.
    logger = Logger(service="echo", stream=(Path(__file__).parent / "log.jsonl").open("a", buffering=1))

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    def meet(event, context):
        # Each invocation waits here until the other has arrived too (at most 30 s), so both are in flight
        # at once; then it logs, under the correlation id that is the logger's now.
        meeting = Path(__file__).parent / "meeting"
        meeting.mkdir(exist_ok=True)
        (meeting / event["requestContext"]["requestId"]).touch()
        deadline = time.monotonic() + 30
        while len(list(meeting.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        logger.info("met")
        body = {"met": len(list(meeting.iterdir())), "correlation_id": logger.get_correlation_id()}
        return {"statusCode": 200, "body": json.dumps(body)}

    def lambda_handler(event, context):
        mode = (event.get("queryStringParameters") or {}).get("mode")
        if mode == "meet":
            return meet(event, context)
        if mode == "raise":
            raise RuntimeError("secret internal detail")
        if mode == "exit":  # the environment's process dies
            os._exit(3)
        if mode == "hang":  # far longer than the test's timeout; says which process it is in
            (Path(__file__).parent / f"hang-{os.getpid()}").touch()
            time.sleep(60)
        if mode == "malformed":
            return "not a proxy response"
        if mode == "slow":  # long enough for a client to leave before the answer
            time.sleep(0.5)
        if mode == "binary":
            return {"statusCode": 200, "headers": {"Content-Type": "application/octet-stream"},
                    "body": "AAEC/w==", "isBase64Encoded": True}
        observed = {
            "function": os.path.basename(os.path.dirname(__file__)),
            "event": event,
            "context": {
                "function_name": context.function_name,
                "aws_request_id": context.aws_request_id,
                "invoked_function_arn": context.invoked_function_arn,
                "memory_limit_in_mb": context.memory_limit_in_mb,
                "remaining_ms": context.get_remaining_time_in_millis(),
            },
            "environment": {name: os.environ.get(name) for name in (
                "CITEWISE_BACKEND", "CITEWISE_HOME", "CITEWISE_PUBLIC_URL", "POWERTOOLS_TRACE_DISABLED",
                "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_METRICS_DISABLED")},
        }
        return {
            "statusCode": 201 if event["httpMethod"] == "POST" else 200,
            "headers": {"Content-Type": "application/json", "X-Both": "single"},
            "multiValueHeaders": {"X-Multi": ["a", "b"], "X-Both": ["multi"]},
            "body": json.dumps(observed),
            "isBase64Encoded": False,
        }
    """
)

# Records every event it receives; fails or raises as `mode` next to it says (per message: the first
# `fail-once` receive fails, later ones succeed). A document whose path has "bomb" in it is recorded
# PENDING, as the pipeline records it first, and then takes far longer than the test's timeout.
INGEST_HANDLER = textwrap.dedent(
    """
    import json, os, time
    from datetime import UTC, datetime
    from pathlib import Path

    from citewise.domain.models import Document, DocumentStatus
    from citewise.domain.tenancy import document_id
    from citewise.ports.blobstore import key_to_location
    from citewise_local.registry import LocalRegistry

    HERE = Path(__file__).parent

    def record_pending(key):
        tenant, path = key_to_location(key)
        now = datetime.now(UTC)
        registry = LocalRegistry(Path(os.environ["CITEWISE_HOME"]) / "registry.db")
        registry.put(Document(tenant_id=tenant, doc_id=document_id(tenant, path), path=path, source="local",
                              owner="alice", status=DocumentStatus.PENDING, version="v1", created_at=now,
                              updated_at=now))
        registry.close()

    def lambda_handler(event, context):
        mode = (HERE / "mode").read_text().strip() if (HERE / "mode").exists() else "ok"
        with (HERE / "events.jsonl").open("a") as stream:
            stream.write(json.dumps({"event": event, "function_name": context.function_name,
                                     "remaining_ms": context.get_remaining_time_in_millis()}) + "\\n")
        key = json.loads(event["Records"][0]["body"])["Records"][0]["s3"]["object"]["key"]
        if "bomb" in key:
            record_pending(key)
            (HERE / f"bomb-{os.getpid()}").touch()
            time.sleep(60)
        if mode == "slow":
            time.sleep(0.3)
        if mode == "block":  # until the test releases it (at most 60 s)
            (HERE / "blocked").touch()
            deadline = time.monotonic() + 60
            while not (HERE / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        record = event["Records"][0]
        if mode == "raise":
            raise RuntimeError("ingest broke")
        if mode == "fail" or (mode == "fail-once" and record["attributes"]["ApproximateReceiveCount"] == "1"):
            return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
        return {"batchItemFailures": []}
    """
)


@pytest.fixture
def functions_dir(tmp_path: Path) -> Path:
    root = tmp_path / "functions"
    for name in ("query", "documents", "mcp"):
        (root / name).mkdir(parents=True)
        (root / name / "handler.py").write_text(ECHO_HANDLER)
    (root / "ingest").mkdir()
    (root / "ingest" / "handler.py").write_text(INGEST_HANDLER)
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def restore_environment() -> Iterator[None]:
    """The server sets the handlers' variables in os.environ: put back what the other tests saw."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


class Running:
    """A server on an ephemeral port, serving from a thread, and its log."""

    def __init__(self, server: LocalServer, log: io.StringIO) -> None:
        self.server = server
        self.log = log
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def start(home: Path, functions_dir: Path, restore_environment: None) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def _start(**options: Any) -> Running:
        log = io.StringIO()
        settings = Settings(home=home, embedder="hashing")
        arguments: dict[str, Any] = {
            "functions_dir": functions_dir,
            "max_body_bytes": MAX_BODY,
            "retry_delay": 0.0,
            "log_stream": log,
        }
        server = LocalServer(("127.0.0.1", 0), settings, **(arguments | options))
        running.append(Running(server, log))
        return running[-1]

    yield _start
    for each in running:
        if each.thread.is_alive():
            each.stop()


@pytest.fixture
def api(start: Callable[..., Running]) -> Running:
    return start()


@pytest.fixture
def token(home: Path) -> Callable[..., str]:
    def _token(tenant: str = "acme", user: str = "alice", groups: tuple[str, ...] = (), **options: Any) -> str:
        return mint_token(local_key(home, TOKEN_PURPOSE), tenant_id=tenant, user_id=user, groups=groups, **options)

    return _token


class Response:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    url: str,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    connection: http.client.HTTPConnection | None = None,
) -> Response:
    """One request over real HTTP; every status comes back as a Response (nothing raises)."""
    parts = urlsplit(url)
    conn = connection or http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        reply = conn.getresponse()
        return Response(reply.status, reply.headers, reply.read())
    finally:
        if connection is None:
            conn.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_error(response: Response, status: int, code: str) -> dict[str, Any]:
    assert response.status == status
    assert response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details", "request_id"}
    assert error["code"] == code
    assert error["request_id"] == response.headers["x-amzn-RequestId"]
    uuid.UUID(error["request_id"])
    return dict(error)


# --- the API --------------------------------------------------------------------------------------


def test_an_authenticated_get_reaches_its_handler_as_an_api_gateway_event(
    api: Running, token: Callable[..., str], home: Path
) -> None:
    # Given a token of alice in acme with two groups
    headers = bearer(token(groups=("admins", "readers"))) | {"User-Agent": "tests/1.0"}
    # When a document is fetched by an id that needs percent-encoding, with repeated query parameters
    response = call(api.url, "GET", "/v1/documents/a%20b?limit=5&tag=x&tag=y", headers=headers)
    # Then the documents handler answers with what it received
    assert response.status == 200
    observed = response.json()
    assert observed["function"] == "documents"
    event = observed["event"]
    APIGatewayProxyEventModel.model_validate(event)
    assert (event["resource"], event["path"], event["httpMethod"]) == (
        "/v1/documents/{id}",
        "/v1/documents/a%20b",
        "GET",
    )
    assert event["pathParameters"] == {"id": "a b"}
    assert event["queryStringParameters"] == {"limit": "5", "tag": "y"}
    assert event["multiValueQueryStringParameters"] == {"limit": ["5"], "tag": ["x", "y"]}
    assert event["headers"]["User-Agent"] == "tests/1.0"
    assert event["body"] is None
    context = event["requestContext"]
    assert context["requestId"] == response.headers["x-amzn-RequestId"]
    assert context["path"] == "/local/v1/documents/a%20b"
    assert context["identity"]["sourceIp"] == "127.0.0.1"
    assert abs(context["requestTimeEpoch"] - time.time() * 1000) < 10_000
    # And the claims are the token's, as API Gateway's Cognito authorizer passes them
    claims = context["authorizer"]["claims"]
    assert all(isinstance(value, str) for value in claims.values())
    assert claims["sub"] == claims["cognito:username"] == "alice"
    assert claims["custom:tenant_id"] == "acme"
    assert claims["cognito:groups"] == "admins,readers"
    assert claims["token_use"] == "id"
    assert re.fullmatch(r"\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} UTC \d{4}", claims["exp"])
    # And the context is Lambda's, with an invocation id of its own
    lambda_context = observed["context"]
    assert lambda_context["function_name"] == "citewise-documents"
    assert lambda_context["invoked_function_arn"].endswith(":function:citewise-documents")
    assert lambda_context["aws_request_id"] != context["requestId"]
    assert 0 < lambda_context["remaining_ms"] <= 29_000
    # And the handler saw the server's settings
    assert observed["environment"] == {
        "CITEWISE_BACKEND": "local",
        "CITEWISE_HOME": str(home.resolve()),
        "CITEWISE_PUBLIC_URL": api.url,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "Citewise",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    # And headers and multiValueHeaders are merged as API Gateway merges them
    assert response.headers.get_all("X-Multi") == ["a", "b"]
    assert response.headers.get_all("X-Both") == ["multi"]


def test_a_post_body_reaches_the_query_handler_unchanged(api: Running, token: Callable[..., str]) -> None:
    body = json.dumps({"query": "où est la documentation?"}).encode()
    response = call(api.url, "POST", "/v1/query", body=body, headers=bearer(token()))
    assert response.status == 201  # the handler's status comes back
    observed = response.json()
    assert observed["function"] == "query"
    assert observed["event"]["body"] == body.decode()
    assert observed["event"]["isBase64Encoded"] is False
    assert observed["context"]["function_name"] == "citewise-query"


def test_a_non_utf8_body_travels_base64_encoded(api: Running, token: Callable[..., str]) -> None:
    response = call(api.url, "POST", "/v1/search", body=b"\xff\x00\xfe", headers=bearer(token()))
    event = response.json()["event"]
    assert (event["body"], event["isBase64Encoded"]) == ("/wD+", True)


def test_a_base64_response_is_sent_as_bytes(api: Running) -> None:
    response = call(api.url, "GET", "/v1/health?mode=binary")
    assert response.status == 200
    assert response.body == b"\x00\x01\x02\xff"


def test_public_routes_need_no_token_and_carry_no_authorizer(api: Running) -> None:
    for path in ("/v1/health", "/v1/openapi.json"):
        response = call(api.url, "GET", path)
        assert response.status == 200
        assert "authorizer" not in response.json()["event"]["requestContext"]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Basic YWxpY2U6c2VjcmV0",
        "Bearer",
        "Bearer not-a-jwt",
    ],
)
def test_requests_without_a_usable_token_get_401_before_any_handler(api: Running, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = call(api.url, "POST", "/v1/query", body=b"{}", headers=headers)
    error = assert_error(response, 401, "UNAUTHORIZED")
    assert error["details"] == {}


def test_a_tampered_token_gets_401(api: Running, token: Callable[..., str]) -> None:
    header, payload, signature = token().split(".")
    tampered = f"{header}.{payload}.{signature[:-4]}{'AAAA' if signature[-4:] != 'AAAA' else 'BBBB'}"
    response = call(api.url, "GET", "/v1/documents", headers=bearer(tampered))
    assert "signature" in assert_error(response, 401, "UNAUTHORIZED")["message"]
    assert tampered not in api.log.getvalue() and signature not in response.body.decode()


def test_an_expired_token_gets_401(api: Running, token: Callable[..., str]) -> None:
    expired = token(ttl=60, now=time.time() - 120)
    response = call(api.url, "GET", "/v1/documents", headers=bearer(expired))
    assert "expired" in assert_error(response, 401, "UNAUTHORIZED")["message"]


def test_a_token_of_another_home_gets_401(api: Running, tmp_path: Path) -> None:
    foreign = mint_token(local_key(tmp_path / "elsewhere", TOKEN_PURPOSE), tenant_id="acme", user_id="mallory")
    response = call(api.url, "GET", "/v1/documents", headers=bearer(foreign))
    assert_error(response, 401, "UNAUTHORIZED")


def test_a_bare_token_is_accepted_as_api_gateway_accepts_it(api: Running, token: Callable[..., str]) -> None:
    response = call(api.url, "GET", "/v1/documents", headers={"Authorization": token(user="bob")})
    assert response.status == 200
    assert response.json()["event"]["requestContext"]["authorizer"]["claims"]["sub"] == "bob"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/nothing"), ("GET", "/v1/documents/"), ("GET", "/"), ("PUT", "/v1/documents/x/y")],
)
def test_unknown_paths_get_404(api: Running, token: Callable[..., str], method: str, path: str) -> None:
    response = call(api.url, method, path, headers=bearer(token()))
    assert_error(response, 404, "NOT_FOUND")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/v1/query", "POST"),
        ("PUT", "/v1/documents/x", "DELETE, GET"),
        ("TRACE", "/v1/health", "GET"),
        ("QUERY", "/v1/documents", "GET"),
    ],
)
def test_undeclared_methods_on_known_paths_get_405_with_allow(
    api: Running, token: Callable[..., str], method: str, path: str, allowed: str
) -> None:
    response = call(api.url, method, path, headers=bearer(token()))
    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["Allow"] == allowed


def test_head_gets_the_headers_of_the_405_without_its_body_and_the_connection_goes_on(api: Running) -> None:
    parts = urlsplit(api.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        head = call(api.url, "HEAD", "/v1/health", connection=connection)
        after = call(api.url, "GET", "/v1/health", connection=connection)
    finally:
        connection.close()
    assert head.status == 405 and int(head.headers["Content-Length"]) > 0 and head.body == b""
    assert after.status == 200


def test_a_body_over_the_limit_gets_413(api: Running, token: Callable[..., str]) -> None:
    response = call(api.url, "POST", "/v1/query", body=b"x" * (MAX_BODY + 1), headers=bearer(token()))
    error = assert_error(response, 413, "PAYLOAD_TOO_LARGE")
    assert error["details"] == {"size": MAX_BODY + 1, "limit": MAX_BODY}
    assert response.headers["Connection"] == "close"


def test_a_handler_that_raises_gives_500_without_its_message_and_the_server_goes_on(
    api: Running, token: Callable[..., str]
) -> None:
    response = call(api.url, "GET", "/v1/documents?mode=raise", headers=bearer(token()))
    error = assert_error(response, 500, "INTERNAL_ERROR")
    assert "secret internal detail" not in error["message"]
    assert "RuntimeError" in api.log.getvalue()  # the traceback is for the operator
    assert call(api.url, "GET", "/v1/health").status == 200


def test_an_environment_that_dies_fails_its_request_and_the_next_one_gets_a_new_environment(api: Running) -> None:
    response = call(api.url, "GET", "/v1/health?mode=exit")
    assert "exited (code 3)" in assert_error(response, 500, "INTERNAL_ERROR")["message"]
    assert call(api.url, "GET", "/v1/health").status == 200
    assert "documents: a new execution environment in" in api.log.getvalue()


def test_a_malformed_proxy_response_gives_502(api: Running) -> None:
    response = call(api.url, "GET", "/v1/health?mode=malformed")
    assert response.status == 502
    assert response.json()["error"]["code"] == "INTERNAL_ERROR"


def test_one_connection_serves_several_requests(api: Running, token: Callable[..., str]) -> None:
    parts = urlsplit(api.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        first = call(api.url, "POST", "/v1/query", body=b"{}", connection=connection)
        second = call(api.url, "POST", "/v1/query", body=b"{}", headers=bearer(token()), connection=connection)
        third = call(api.url, "GET", "/v1/nothing", connection=connection)
    finally:
        connection.close()
    assert [first.status, second.status, third.status] == [401, 201, 404]


def test_the_docs_page_loads_swagger_ui_on_the_openapi_document(api: Running) -> None:
    response = call(api.url, "GET", "/v1/docs")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/html")
    page = response.body.decode()
    assert "SwaggerUIBundle" in page and '"/v1/openapi.json"' in page


def test_the_docs_page_loads_nothing_from_the_network(api: Running) -> None:
    """Swagger UI's script and style come from the server itself, so the page works offline."""
    page = call(api.url, "GET", "/v1/docs").body.decode()
    assert "http://" not in page and "https://" not in page
    referenced = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sorted(referenced) == ["/v1/docs/swagger-ui-bundle.min.js", "/v1/docs/swagger-ui.min.css"]
    script = call(api.url, "GET", "/v1/docs/swagger-ui-bundle.min.js")
    style = call(api.url, "GET", "/v1/docs/swagger-ui.min.css")
    assert script.status == style.status == 200
    assert script.headers["Content-Type"].startswith("text/javascript")
    assert style.headers["Content-Type"].startswith("text/css")
    assert b"SwaggerUIBundle" in script.body and len(script.body) > 100_000
    assert b".swagger-ui" in style.body


def test_each_request_is_one_log_line_without_bodies_or_tokens(api: Running, token: Callable[..., str]) -> None:
    secret_token = token()
    query = call(api.url, "POST", "/v1/query", body=b'{"query": "confidential question"}', headers=bearer(secret_token))
    missing = call(api.url, "GET", "/v1/nothing?x=1")
    lines = api.log.getvalue().splitlines()
    # method, path, status, milliseconds and the request id the response carries
    assert re.fullmatch(rf"POST /v1/query 201 \d+\.\dms {query.headers['x-amzn-RequestId']}", lines[0])
    assert re.fullmatch(rf"GET /v1/nothing 404 \d+\.\dms {missing.headers['x-amzn-RequestId']}", lines[1])
    assert "confidential" not in api.log.getvalue() and secret_token not in api.log.getvalue()


def test_a_missing_functions_directory_is_a_clear_error_and_frees_the_port(
    home: Path, tmp_path: Path, functions_dir: Path, restore_environment: None
) -> None:
    # Given a free port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # When a server is started on it without handlers, then the error says where it looked
    with pytest.raises(CitewiseError, match=r"no Lambda handler at .*nowhere/documents/handler.py"):
        LocalServer(("127.0.0.1", port), Settings(home=home), functions_dir=tmp_path / "nowhere")
    # And the port is free again for a server that has them
    server = LocalServer(("127.0.0.1", port), Settings(home=home), functions_dir=functions_dir)
    server.server_close()
    assert server.url == f"http://127.0.0.1:{port}"


# --- uploads and the ingest queue -------------------------------------------------------------------


def _ingest_events(functions_dir: Path) -> list[dict[str, Any]]:
    file = functions_dir / "ingest" / "events.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []


def _presign(path: str, data: bytes, *, tenant: str = "acme", owner: str = "alice") -> tuple[str, dict[str, str]]:
    """An upload URL as the documents handler issues it: from a store built from the environment, for
    whatever the path holds now."""
    blobs = local_blob_store(load_settings())
    current = blobs.head(tenant, path)
    upload = blobs.presign_put(
        tenant,
        path,
        owner=owner,
        content_type="text/markdown",
        size=len(data),
        replaces=current.etag if current is not None else None,
        visibility=Visibility.PRIVATE,
    )
    return upload.url, upload.headers


def _put(url: str, data: bytes, headers: dict[str, str]) -> Response:
    parts = urlsplit(url)
    return call(f"{parts.scheme}://{parts.netloc}", "PUT", parts.path, body=data, headers=headers)


def test_an_upload_is_stored_and_reaches_the_ingest_handler_as_an_s3_notification(
    api: Running, functions_dir: Path, home: Path
) -> None:
    # Given an upload URL issued for a path that needs URL-encoding in an S3 key
    data = b"# Plan\n\nShip it."
    url, headers = _presign("plans/q1 plan+notes.md", data)
    assert url.startswith(api.url + "/local-upload/")
    # When the client PUTs the body with the signed headers
    response = _put(url, data, headers)
    # Then it is stored as S3 would answer, with the MD5 ETag
    md5 = hashlib.md5(data).hexdigest()
    assert response.status == 200
    assert response.headers["ETag"] == f'"{md5}"'
    stored = LocalBlobStore(home / "blobs").get("acme", "plans/q1 plan+notes.md")
    assert stored.load() == data
    assert (stored.owner, stored.visibility) == ("alice", Visibility.PRIVATE)
    # And one SQS message holding an ObjectCreated:Put notification reaches the ingest handler
    assert api.server.ingest.wait_idle(10)
    [delivery] = _ingest_events(functions_dir)
    assert delivery["function_name"] == "citewise-ingest"
    assert 0 < delivery["remaining_ms"] <= 300_000
    event = S3SqsEventNotificationModel.model_validate(delivery["event"])
    [record] = event.Records
    assert record.attributes.ApproximateReceiveCount == "1"
    [notification] = record.body.Records
    assert notification.eventName == "ObjectCreated:Put"
    assert notification.s3.bucket.name == "local"
    assert notification.s3.object is not None
    assert notification.s3.object.key == "tenants/acme/plans/q1+plan%2Bnotes.md"
    assert key_to_location(notification.s3.object.key) == ("acme", "plans/q1 plan+notes.md")
    assert (notification.s3.object.size, notification.s3.object.eTag) == (len(data), md5)
    # And the log shows the upload without its token
    assert re.search(r"^PUT /local-upload/\.\.\. 200 ", api.log.getvalue(), re.MULTILINE)
    assert urlsplit(url).path.rsplit("/", 1)[1] not in api.log.getvalue()


def test_a_download_serves_the_granted_version_so_that_no_stored_page_runs_on_this_origin(api: Running) -> None:
    blobs = local_blob_store(load_settings())
    version = blobs.put("acme", "pages/x.html", b"<script>alert(1)</script>", content_type="text/html")
    url = blobs.presign_get("acme", "pages/x.html", version=version).url
    assert url.startswith(api.url + "/local-download/")
    response = call(api.url, "GET", urlsplit(url).path)
    assert (response.status, response.body) == (200, b"<script>alert(1)</script>")
    assert response.headers["Content-Disposition"].startswith('attachment; filename="x.html"')
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Content-Security-Policy"].startswith("sandbox;")
    assert response.headers["Cache-Control"] == "private, no-store"
    # A replaced file's old URL reads nothing (as S3 answers a version it no longer has), a forged one is 403
    blobs.put("acme", "pages/x.html", b"new", content_type="text/html")
    gone = call(api.url, "GET", urlsplit(url).path)
    assert gone.status == 404 and "<Code>NoSuchVersion</Code>" in gone.body.decode()
    assert call(api.url, "GET", urlsplit(url).path[:-3] + "abc").status == 403
    # And the log never shows a token
    assert re.search(r"^GET /local-download/\.\.\. 200 ", api.log.getvalue(), re.MULTILINE)
    assert urlsplit(url).path.rsplit("/", 1)[1] not in api.log.getvalue()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda url, data, headers: (url, data, headers | {"Content-Type": "text/html"}), "AccessDenied"),
        (lambda url, data, headers: (url, data, headers | {"x-amz-meta-owner": "mallory"}), "AccessDenied"),
        (lambda url, data, headers: (url, data + b"!", headers), "AccessDenied"),
        (lambda url, data, headers: (url[:-3] + "abc", data, headers), "AccessDenied"),
    ],
    ids=["other-content-type", "forged-owner", "other-length", "forged-signature"],
)
def test_an_upload_that_differs_from_its_grant_is_refused_as_s3_refuses_it(
    api: Running, functions_dir: Path, home: Path, change: Callable[..., Any], expected: str
) -> None:
    data = b"hello"
    signed_url, signed_headers = _presign("notes.md", data)
    url, data, headers = change(signed_url, data, signed_headers)
    response = _put(url, data, headers)
    assert response.status == 403
    assert response.headers["Content-Type"] == "application/xml"
    assert f"<Code>{expected}</Code>" in response.body.decode()
    assert not (home / "blobs" / "tenants" / "acme" / "notes.md").exists()
    assert api.server.ingest.wait_idle(5) and _ingest_events(functions_dir) == []


def test_an_expired_upload_url_is_refused(api: Running, home: Path) -> None:
    # Given a URL issued two minutes ago for one minute, with the home's upload key
    issued_at = datetime.now(UTC) - timedelta(seconds=120)
    blobs = LocalBlobStore(
        home / "blobs", url_ttl=60, base_url=api.url, secret=local_key(home, "uploads"), clock=lambda: issued_at
    )
    upload = blobs.presign_put("acme", "late.md", owner="alice", content_type="text/plain", size=1, replaces=None)
    # When it is used now, then S3's answer comes back: access denied, request expired
    response = _put(upload.url, b"x", upload.headers)
    assert response.status == 403
    assert "<Code>AccessDenied</Code>" in response.body.decode() and "expired" in response.body.decode()


def test_an_upload_url_survives_a_restart_of_the_server(
    start: Callable[..., Running], functions_dir: Path, home: Path
) -> None:
    # Given an upload URL issued while one server ran, which then stopped
    first = start()
    data = b"persisted"
    url, headers = _presign("kept.md", data)
    first.stop()
    # When a new server on the same home and port... (a new port: the URL's path is what matters)
    second = start()
    response = _put(second.url + urlsplit(url).path, data, headers)
    # Then it redeems the URL: the signing key lives in the home, not in the process
    assert response.status == 200
    assert second.server.ingest.wait_idle(10)
    assert len(_ingest_events(functions_dir)) == 1


def test_uploads_are_delivered_in_order_with_increasing_sequencers(api: Running, functions_dir: Path) -> None:
    for number in range(3):
        data = f"version {number}".encode()
        url, headers = _presign("same.md", data)
        assert _put(url, data, headers).status == 200
    assert api.server.ingest.wait_idle(10)
    bodies = [json.loads(d["event"]["Records"][0]["body"]) for d in _ingest_events(functions_dir)]
    objects = [body["Records"][0]["s3"]["object"] for body in bodies]
    assert [o["size"] for o in objects] == [len(b"version 0"), len(b"version 1"), len(b"version 2")]
    sequencers = [o["sequencer"] for o in objects]
    assert sequencers == sorted(sequencers) and len(set(sequencers)) == 3


@pytest.mark.parametrize("mode", ["fail", "raise"])
def test_a_failing_message_is_received_three_times_then_dead_lettered(
    api: Running, functions_dir: Path, mode: str
) -> None:
    # Given an ingest handler that fails every receive (reporting it, or raising)
    (functions_dir / "ingest" / "mode").write_text(mode)
    data = b"doomed"
    url, headers = _presign("doomed.md", data)
    # When an upload is made
    assert _put(url, data, headers).status == 200
    assert api.server.ingest.wait_idle(10)
    # Then the same message was received MAX_RECEIVES times, counted up, and then dead-lettered
    records = [d["event"]["Records"][0] for d in _ingest_events(functions_dir)]
    assert MAX_RECEIVES == 3
    assert [r["attributes"]["ApproximateReceiveCount"] for r in records] == ["1", "2", "3"]
    assert len({r["messageId"] for r in records}) == 1
    assert len({r["receiptHandle"] for r in records}) == 3
    assert [m.message_id for m in api.server.ingest.dead_letters] == [records[0]["messageId"]]
    assert f"{records[0]['messageId']} dead-lettered after 3 receives" in api.log.getvalue()


def test_a_message_that_fails_once_succeeds_on_its_second_receive(api: Running, functions_dir: Path) -> None:
    (functions_dir / "ingest" / "mode").write_text("fail-once")
    data = b"flaky"
    url, headers = _presign("flaky.md", data)
    assert _put(url, data, headers).status == 200
    assert api.server.ingest.wait_idle(10)
    counts = [d["event"]["Records"][0]["attributes"]["ApproximateReceiveCount"] for d in _ingest_events(functions_dir)]
    assert counts == ["1", "2"]
    assert api.server.ingest.dead_letters == []


def test_closing_the_server_delivers_what_is_queued(start: Callable[..., Running], functions_dir: Path) -> None:
    # Given a slow ingest handler and three uploads queued behind one another
    (functions_dir / "ingest" / "mode").write_text("slow")
    running = start()
    for number in range(3):
        data = f"doc {number}".encode()
        url, headers = _presign(f"doc{number}.md", data)
        assert _put(url, data, headers).status == 200
    # When the server is stopped at once
    running.stop()
    # Then every message was delivered before close returned
    assert len(_ingest_events(functions_dir)) == 3


def test_on_start_what_the_registry_lacks_of_the_blob_store_is_queued_as_s3_notifications(
    start: Callable[..., Running], functions_dir: Path, home: Path
) -> None:
    # Given a blob store and a registry left behind by a server that died with messages in its queue
    blobs = LocalBlobStore(home / "blobs")
    registry = LocalRegistry(home / "registry.db")

    def record(tenant: str, path: str, version: str, status: DocumentStatus, source: str = "local") -> None:
        now = datetime.now(UTC)
        pending = Document(
            tenant_id=tenant,
            doc_id=document_id(tenant, path),
            path=path,
            source=source,
            owner="alice",
            status=DocumentStatus.PENDING,
            version=version,
            created_at=now,
            updated_at=now,
        )
        registry.put(pending)  # as the pipeline writes it: PENDING first, then its outcome
        registry.put(pending.model_copy(update={"status": status}))

    blobs.put("acme", "never-ingested.md", b"new")
    record("acme", "current.md", blobs.put("acme", "current.md", b"indexed"), DocumentStatus.INDEXED)
    record("acme", "failed.md", blobs.put("acme", "failed.md", b"unreadable"), DocumentStatus.FAILED)
    record("acme", "replaced.md", "the-version-before", DocumentStatus.INDEXED)
    blobs.put("acme", "replaced.md", b"the version after")
    record("globex", "stuck.md", blobs.put("globex", "stuck.md", b"stuck"), DocumentStatus.PENDING)
    record("acme", "tagged.md", blobs.put("acme", "tagged.md", b"tagged"), DocumentStatus.INDEXED)
    blobs.put("acme", "tagged.md.metadata.json", b'{"metadataAttributes": {"team": "ops"}}')
    record("globex", "vanished.md", "gone", DocumentStatus.PENDING)
    record("acme", "deleted-half-way.md", "its-object-went", DocumentStatus.INDEXED)
    record("acme", "from-a-folder.md", "ingested-by-the-cli", DocumentStatus.INDEXED, source="folder")
    record("acme", "folder-crash.md", "cut-short", DocumentStatus.PENDING, source="folder")
    (home / "blobs" / "tenants" / "acme" / ".current.md.x1y2.tmp").write_bytes(b"a write cut short")
    registry.close()
    # When a server starts on that home
    running = start()
    assert running.server.ingest.wait_idle(10)
    # Then the ingest handler receives S3 notifications, one per message, for exactly what the registry lacks
    events = [S3SqsEventNotificationModel.model_validate(d["event"]) for d in _ingest_events(functions_dir)]
    notifications = [n for event in events for record in event.Records for n in record.body.Records]
    assert len(notifications) == len(events)
    assert sorted((n.eventName, n.s3.object.key) for n in notifications if n.s3.object is not None) == [
        ("ObjectCreated:Put", "tenants/acme/never-ingested.md"),
        ("ObjectCreated:Put", "tenants/acme/replaced.md"),
        ("ObjectCreated:Put", "tenants/acme/tagged.md"),
        ("ObjectCreated:Put", "tenants/globex/stuck.md"),
        ("ObjectRemoved:Delete", "tenants/acme/deleted-half-way.md"),
        ("ObjectRemoved:Delete", "tenants/globex/vanished.md"),
    ]
    # And a created object's notification carries its size and ETag, as an upload's does
    [created] = [n for n in notifications if n.s3.object is not None and n.s3.object.key.endswith("replaced.md")]
    assert created.s3.object is not None
    assert (created.s3.object.size, created.s3.object.eTag) == (
        len(b"the version after"),
        hashlib.md5(b"the version after").hexdigest(),
    )
    sequencers = [n.s3.object.sequencer for n in notifications if n.s3.object is not None]
    assert len(set(sequencers)) == len(sequencers)
    assert "reconciled on start: 4 objects to ingest, 2 records to remove" in running.log.getvalue()


# --- concurrency ------------------------------------------------------------------------------------


def _wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.02)


def test_a_request_is_answered_while_an_ingest_is_still_running(
    api: Running, functions_dir: Path, token: Callable[..., str]
) -> None:
    # Given an upload whose ingestion is held up until the test releases it
    (functions_dir / "ingest" / "mode").write_text("block")
    data = b"# Slow\n\nTakes its time."
    url, headers = _presign("slow.md", data)
    assert _put(url, data, headers).status == 200
    _wait_for((functions_dir / "ingest" / "blocked").exists)
    # When another tenant's request comes in meanwhile
    response = call(api.url, "GET", "/v1/documents", headers=bearer(token(tenant="globex")))
    # Then it is answered (within the client's 10 s; the ingest holds for 60), while the ingest still runs
    assert response.status == 200
    assert response.json()["event"]["requestContext"]["authorizer"]["claims"]["custom:tenant_id"] == "globex"
    assert not api.server.ingest.wait_idle(0)
    (functions_dir / "ingest" / "release").touch()
    assert api.server.ingest.wait_idle(30)


def test_concurrent_invocations_of_one_function_keep_their_own_correlation_ids_and_logs(
    api: Running, token: Callable[..., str], functions_dir: Path
) -> None:
    # Given two requests to the same function, of two tenants, whose handler waits until both are in it
    replies: dict[str, Response] = {}

    def ask(tenant: str) -> None:
        # A generous client timeout: the second request waits for an environment's cold start.
        parts = urlsplit(api.url)
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        try:
            headers = bearer(token(tenant=tenant))
            replies[tenant] = call(api.url, "GET", "/v1/documents?mode=meet", headers=headers, connection=connection)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask, args=(tenant,)) for tenant in ("acme", "globex")]
    # When they are sent at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    # Then both were in flight together, and each kept its own request id as correlation id
    assert set(replies) == {"acme", "globex"}
    for reply in replies.values():
        assert reply.status == 200
        assert reply.json() == {"met": 2, "correlation_id": reply.headers["x-amzn-RequestId"]}
    # And each handler's log line carries its own request's correlation id
    log = (functions_dir / "documents" / "log.jsonl").read_text()
    logged = [json.loads(line) for line in log.splitlines() if '"met"' in line]
    assert sorted(line["correlation_id"] for line in logged) == sorted(
        reply.headers["x-amzn-RequestId"] for reply in replies.values()
    )
    assert api.server.pools["documents"].size == 2


# --- deadlines and fair scheduling ----------------------------------------------------------------------

SHORT_TIMEOUT_S = 6
"""The functions' timeout in these tests: long enough for a cold start on a busy machine, short to wait out."""


def _started_in(directory: Path, prefix: str) -> list[int]:
    """The ids of the processes in which a test handler began its long work (it leaves `prefix-<pid>`)."""
    return [int(marker.name.removeprefix(prefix)) for marker in directory.glob(f"{prefix}*")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _timed_call(url: str, path: str, headers: dict[str, str]) -> tuple[Response, float]:
    """One GET with a client timeout longer than any the test expects; (response, seconds it took)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    began = time.monotonic()
    try:
        return call(url, "GET", path, headers=headers, connection=connection), time.monotonic() - began
    finally:
        connection.close()


def test_a_request_ends_at_the_function_timeout_and_another_tenants_request_does_not_wait_behind_it(
    start: Callable[..., Running], token: Callable[..., str], functions_dir: Path
) -> None:
    # Given functions that time out after a few seconds, two environments each
    api = start(api_timeout=SHORT_TIMEOUT_S, max_environments=2)
    # When one tenant sends two requests whose handler would run for a minute
    slow: list[tuple[Response, float]] = []
    threads = [
        threading.Thread(
            target=lambda: slow.append(_timed_call(api.url, "/v1/documents?mode=hang", bearer(token("mallory"))))
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    _wait_for(lambda: bool(_started_in(functions_dir / "documents", "hang-")))
    # Then another tenant's request is answered while they are still running
    quick, _ = _timed_call(api.url, "/v1/documents", bearer(token("acme")))
    assert quick.status == 200
    assert slow == []
    # And each slow request ends at the timeout with the structured 504, not later and not with a 200
    for thread in threads:
        thread.join(60)
    assert len(slow) == 2
    for response, seconds in slow:
        error = assert_error(response, 504, "TIMEOUT")
        assert error["details"] == {"timeout_s": SHORT_TIMEOUT_S}
        assert SHORT_TIMEOUT_S - 0.5 <= seconds < SHORT_TIMEOUT_S + 10
    # And the environment that was running one was killed, as Lambda ends a timed-out sandbox
    [pid, *_] = _started_in(functions_dir / "documents", "hang-")
    assert not _alive(pid)
    assert re.search(r"^GET /v1/documents 504 ", api.log.getvalue(), re.MULTILINE)
    # And the tenant's next request gets a fresh environment
    assert _timed_call(api.url, "/v1/documents", bearer(token("mallory")))[0].status == 200


def _delivered_keys(functions_dir: Path) -> list[str]:
    return [
        json.loads(d["event"]["Records"][0]["body"])["Records"][0]["s3"]["object"]["key"]
        for d in _ingest_events(functions_dir)
    ]


def test_a_document_that_outlasts_the_ingest_timeout_is_failed_and_holds_up_no_other_tenant(
    start: Callable[..., Running], functions_dir: Path, home: Path
) -> None:
    # Given an ingest function that times out after a few seconds
    api = start(ingest_timeout=SHORT_TIMEOUT_S)
    registry = LocalRegistry(home / "registry.db")

    def status(tenant: str, path: str) -> DocumentStatus | None:
        record = registry.get(tenant, document_id(tenant, path))
        return None if record is None else record.status

    # When one tenant uploads two documents that would each take a minute to ingest, then another
    # tenant uploads a small one
    for path in ("bomb-1.md", "bomb-2.md"):
        url, headers = _presign(path, b"# bomb", tenant="mallory")
        assert _put(url, b"# bomb", headers).status == 200
    _wait_for(lambda: status("mallory", "bomb-1.md") is DocumentStatus.PENDING)
    url, headers = _presign("note.md", b"# note", tenant="acme")
    assert _put(url, b"# note", headers).status == 200
    # Then the other tenant's document is delivered while the first slow one still runs, before the second
    _wait_for(lambda: "tenants/acme/note.md" in _delivered_keys(functions_dir))
    assert _delivered_keys(functions_dir)[:2] == ["tenants/mallory/bomb-1.md", "tenants/acme/note.md"]
    assert status("mallory", "bomb-1.md") is DocumentStatus.PENDING
    # And each slow document is stopped at the timeout and recorded FAILED with the reason, once each
    assert api.server.ingest.wait_idle(60)
    for path in ("bomb-1.md", "bomb-2.md"):
        record = registry.get("mallory", document_id("mallory", path))
        assert record is not None and record.status is DocumentStatus.FAILED
        assert record.error == (
            f"TIMEOUT: ingestion did not finish within the ingest function's {SHORT_TIMEOUT_S} s timeout "
            "and was stopped"
        )
    assert sorted(_delivered_keys(functions_dir)) == [
        "tenants/acme/note.md",
        "tenants/mallory/bomb-1.md",
        "tenants/mallory/bomb-2.md",
    ]
    assert api.server.ingest.dead_letters == []
    # And the environments that ran them were killed, returning what they held
    pids = _started_in(functions_dir / "ingest", "bomb-")
    assert len(pids) == 2
    assert not any(_alive(pid) for pid in pids)
    # And the tenant's next document is delivered
    url, headers = _presign("after.md", b"# after", tenant="mallory")
    assert _put(url, b"# after", headers).status == 200
    assert api.server.ingest.wait_idle(30)
    assert _delivered_keys(functions_dir)[-1] == "tenants/mallory/after.md"
    registry.close()


# --- protocol errors and idle connections -------------------------------------------------------------

REQUEST_END = b"Host: localhost\r\n\r\n"


def exchange(url: str, data: bytes) -> Response:
    """Send `data` as it is on a new connection and read the one response; the server must close after it."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10) as connection:
        connection.sendall(data)
        reply = http.client.HTTPResponse(connection)
        reply.begin()
        body = reply.read()
        assert reply.headers["Connection"] == "close"
        return Response(reply.status, reply.headers, body)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NONSENSE\r\n\r\n", 400),
        (b"GET /v1/health HTTP/x.y\r\n" + REQUEST_END, 400),
        (b"GET /v1/health HTTP/2.0\r\n" + REQUEST_END, 505),
        (b"GET /v1/health\r\n", 505),
        (b"GET /v1/health?q=" + b"a" * 9000 + b" HTTP/1.1\r\n" + REQUEST_END, 414),
        (b"GET /v1/health?q=" + b"a" * 70_000 + b" HTTP/1.1\r\n" + REQUEST_END, 414),
        (b"GET /v1/health HTTP/1.1\r\nX-Big: " + b"a" * 11_000 + b"\r\n" + REQUEST_END, 431),
        (b"GET /v1/health HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n" + REQUEST_END, 431),
        (b"GET /v1/health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(101)) + REQUEST_END, 431),
    ],
    ids=[
        "bad-request-line",
        "bad-version",
        "http-2",
        "http-0.9",
        "url-over-8k",
        "url-over-64k",
        "headers-over-10k",
        "header-line-over-64k",
        "too-many-headers",
    ],
)
def test_a_protocol_error_gets_the_json_error_body_and_closes_the_connection(
    api: Running, request_bytes: bytes, status: int
) -> None:
    response = exchange(api.url, request_bytes)
    error = assert_error(response, status, "VALIDATION_ERROR")
    assert error["message"]
    assert f"(unreadable request) {status} " in api.log.getvalue()
    assert call(api.url, "GET", "/v1/health").status == 200  # and the server goes on


def test_a_body_that_stops_half_way_gets_408_after_the_idle_timeout(start: Callable[..., Running]) -> None:
    running = start(idle_timeout=1.0)
    response = exchange(running.url, b"POST /v1/query HTTP/1.1\r\nContent-Length: 100\r\n" + REQUEST_END + b"x" * 10)
    error = assert_error(response, 408, "VALIDATION_ERROR")
    assert "nothing came for 1 seconds" in error["message"]


def test_silent_and_half_sent_connections_are_closed_without_holding_up_others(start: Callable[..., Running]) -> None:
    # Given a server that gives a silent connection 2 seconds
    running = start(idle_timeout=2.0)
    parts = urlsplit(running.url)
    address = (parts.hostname or "", parts.port or 80)
    # When one client connects and sends nothing, and another sends half a request
    with socket.create_connection(address, timeout=30) as silent, socket.create_connection(address, timeout=30) as half:
        half.sendall(b"GET /v1/health HTTP/1.1\r\nHost: local")
        # Then a third client is served meanwhile
        assert call(running.url, "GET", "/v1/health").status == 200
        # And the server closes both, long before the clients' own 30 s
        assert silent.recv(1) == b""
        assert half.recv(1) == b""


# --- clients that leave ------------------------------------------------------------------------------


def _leave(connection: socket.socket, how: str) -> None:
    """Close as a client does: `closed` (FIN, as a process exiting or a timed-out client), `reset` (RST)."""
    if how == "reset":
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


@pytest.mark.parametrize("how", ["closed", "reset"])
@pytest.mark.parametrize(
    ("request_bytes", "line"),
    [
        (b"GET /v1/health?mode=slow HTTP/1.1\r\n" + REQUEST_END, "GET /v1/health 200"),
        # Half a body: the handler never sees it, and there is no status, only the client gone
        (b"POST /v1/query HTTP/1.1\r\nContent-Length: 100\r\n" + REQUEST_END + b"x" * 10, "POST /v1/query -"),
    ],
    ids=["before-the-answer", "within-the-body"],
)
def test_a_client_that_leaves_is_one_log_line_with_the_outcome_and_no_traceback(
    api: Running, capfd: pytest.CaptureFixture[str], request_bytes: bytes, line: str, how: str
) -> None:
    # Given a client that sends a request (or part of one)
    parts = urlsplit(api.url)
    connection = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10)
    connection.sendall(request_bytes)
    # When it leaves before the answer
    _leave(connection, how)
    # Then the server writes one line for the request, saying what it answered and that no one was there
    _wait_for(lambda: bool(api.log.getvalue()))
    assert call(api.url, "GET", "/v1/nothing").status == 404  # and the server goes on
    lines = api.log.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert re.fullmatch(rf"{re.escape(line)} \d+\.\dms [0-9a-f-]{{36}} client disconnected", lines[0])
    assert lines[1].startswith("GET /v1/nothing 404 ")
    # And nothing else: no traceback in the log or on the terminal
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out + api.log.getvalue()


def test_a_client_that_resets_its_kept_alive_connection_after_its_answer_leaves_no_trace(
    api: Running, capfd: pytest.CaptureFixture[str]
) -> None:
    # Given a client that has its answer on a connection kept alive
    parts = urlsplit(api.url)
    connection = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10)
    connection.sendall(b"GET /v1/health HTTP/1.1\r\n" + REQUEST_END)
    reply = http.client.HTTPResponse(connection)
    reply.begin()
    assert reply.status == 200
    reply.read()
    # When it resets the connection instead of sending another request
    _leave(connection, "reset")
    assert call(api.url, "GET", "/v1/nothing").status == 404
    # Then the log has its two requests and nothing more, and the terminal nothing at all
    lines = api.log.getvalue().splitlines()
    assert [line.split()[:3] for line in lines] == [["GET", "/v1/health", "200"], ["GET", "/v1/nothing", "404"]]
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out


def test_with_json_logs_a_client_that_left_is_a_field_of_its_request_line(start: Callable[..., Running]) -> None:
    running = start(log_format="json")
    parts = urlsplit(running.url)
    connection = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10)
    connection.sendall(b"GET /v1/health?mode=slow HTTP/1.1\r\n" + REQUEST_END)
    _leave(connection, "closed")
    _wait_for(lambda: bool(running.log.getvalue()))
    [line] = [json.loads(line) for line in running.log.getvalue().splitlines()]
    assert (line["message"], line["path"], line["status"], line["client_disconnected"]) == (
        "request",
        "/v1/health",
        200,
        True,
    )


# --- web sources ------------------------------------------------------------------------------------


def test_serve_refreshes_due_sources_and_their_pages_reach_the_ingest_handler(
    start: Callable[..., Running], functions_dir: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a site and a source of acme, due now (the real fetcher comes with the web-fetch branch)
    site = FakeSite({f"https://docs.example.com/p{i}.html": Page(html(f"P{i}", "Text.")) for i in range(3)})
    monkeypatch.setattr(Services, "page_fetcher", property(lambda _: site))
    sources = LocalSources(home / "sources.db")
    admin = Caller(tenant_id="acme", user_id="carol", groups=("admin",))
    spec = SourceSpec(kind=SourceKind.URLS, urls=list(site.pages))
    source_id = register_source(sources, admin, spec, now=datetime.now(UTC)).source_id
    # When the server runs its refresh loop
    api = start(refresh_interval=0.1)
    # Then the pages are stored and each reaches the ingest handler as an S3 notification, as an upload does
    _wait_for(lambda: (s := sources.source("acme", source_id)) is not None and s.last_run is not None)
    assert api.server.ingest.wait_idle(10)
    keys = sorted(
        json.loads(e["event"]["Records"][0]["body"])["Records"][0]["s3"]["object"]["key"]
        for e in _ingest_events(functions_dir)
    )
    assert keys == sorted(f"tenants/acme/{page_path(source_id, url, 'html')}" for url in site.pages)
    assert "refresh of source" in api.log.getvalue()
    api.stop()
    sources.close()
