"""`citewise serve`: the API over real HTTP on one machine, calling the very Lambda handlers AWS runs.

Each request is turned into the API Gateway REST proxy event (payload v1) that API Gateway would send,
with the Cognito authorizer's claims for authenticated routes, and handed to `lambda_handler` of
`functions/<name>/handler.py` with a Lambda-like context; the proxy response becomes the HTTP response.
Routes come from `citewise.api.routes.ROUTES`, the table the CDK API is built from.

- Identity: `Authorization: Bearer <token>` from `citewise token`, verified here as the Cognito
  authorizer would (`citewise.localauth`); a missing, forged or expired token is a 401 before any
  handler runs.
- Uploads: `PUT /local-upload/<token>` is the local stand-in for a presigned S3 PUT. The body is stored
  by the local blob store, which checks the signed grant as S3 checks a signature, and then an SQS
  message holding an S3 `ObjectCreated:Put` notification goes to the ingest handler, as on AWS. One
  worker thread delivers messages in order; a message the handler reports in `batchItemFailures` (or
  whose invocation raises) is received again, up to `MAX_RECEIVES` times, then dead-lettered (logged).
- One invocation runs at a time, as in one Lambda execution environment: the handlers share
  process-global Powertools state (logger keys, the metrics buffer) that concurrent invocations would
  mix. HTTP parsing and token checks still run on one thread per connection.
- Logs: one line per request on stderr (method, path, status, milliseconds), never bodies or tokens.

The event and message builders are pure functions so tests check them as plain dicts.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import itertools
import json
import os
import queue
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, quote_plus, urlsplit
from xml.sax.saxutils import escape

import citewise
from citewise.api.routes import ROUTES, Route, allowed_methods, match_route
from citewise.blobstore.base import object_key
from citewise.blobstore.local import UPLOAD_ROUTE
from citewise.config import Settings
from citewise.errors import (
    CitewiseError,
    ForbiddenError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    UnauthorizedError,
    ValidationError,
    error_body,
)
from citewise.factory import local_blob_store
from citewise.localauth import TOKEN_PURPOSE, local_key, verify_token

Handler = Callable[[dict[str, Any], Any], Any]

STAGE = "local"
REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
API_ID = "citewise-local"
BUCKET = "local"
QUEUE_NAME = "citewise-local-ingest"
INGEST_FUNCTION = "ingest"
FUNCTIONS: tuple[str, ...] = tuple(sorted({route.function for route in ROUTES} | {INGEST_FUNCTION}))
MAX_RECEIVES = 3
"""Receives of one message before it is dead-lettered, as the queue's redrive policy (maxReceiveCount)."""
MAX_API_BODY_BYTES = 10 * 1024 * 1024
"""API Gateway's payload limit."""
API_TIMEOUT_S = 29
INGEST_TIMEOUT_S = 300
MEMORY_MB = 1024
DOCS_PATH = "/v1/docs"
OPENAPI_PATH = "/v1/openapi.json"
# Claims API Gateway renders as dates (`Fri Jul 29 18:52:53 UTC 2016`) rather than epoch seconds.
_DATE_CLAIMS = ("exp", "iat", "auth_time")
# The seconds a date claim can hold and still be a date (years 1 to 9999); a value outside stays a number.
_MIN_EPOCH = datetime.min.replace(tzinfo=UTC).timestamp()
_MAX_EPOCH = datetime.max.replace(tzinfo=UTC).timestamp()
_HOP_BY_HOP = frozenset({"connection", "content-length", "keep-alive", "transfer-encoding", "upgrade"})
_module_numbers = itertools.count(1)

SWAGGER_UI = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>citewise API</title>
  <link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({{url: "{OPENAPI_PATH}", dom_id: "#swagger-ui", persistAuthorization: true}});
  </script>
</body>
</html>
"""


# --- routes and events ------------------------------------------------------------------------------


def apigateway_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """Token claims as API Gateway's Cognito authorizer hands them to a REST integration: every value
    a string, lists comma-joined, time claims as dates."""
    rendered: dict[str, str] = {}
    for name, value in claims.items():
        if name in _DATE_CLAIMS and isinstance(value, int | float) and _MIN_EPOCH <= value <= _MAX_EPOCH:
            rendered[name] = datetime.fromtimestamp(value, UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
        elif isinstance(value, list):
            rendered[name] = ",".join(str(item) for item in value)
        elif isinstance(value, bool):
            rendered[name] = "true" if value else "false"
        else:
            rendered[name] = str(value)
    return rendered


def rest_event(
    route: Route,
    *,
    raw_path: str,
    query: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    path_parameters: Mapping[str, str],
    claims: Mapping[str, str] | None,
    source_ip: str,
    request_id: str,
    received: datetime,
    domain_name: str,
) -> dict[str, Any]:
    """The API Gateway REST proxy event (payload v1) of one request.

    As API Gateway does: `path` stays percent-encoded while path and query parameters are decoded;
    `headers` and `queryStringParameters` keep the last of repeated values, the `multiValue` forms all;
    absent parts are null; a body that is not UTF-8 travels base64-encoded.
    """
    single_headers: dict[str, str] = {}
    multi_headers: dict[str, list[str]] = {}
    for name, value in headers:
        single_headers[name] = value
        multi_headers.setdefault(name, []).append(value)
    pairs = parse_qsl(query, keep_blank_values=True)
    multi_query: dict[str, list[str]] = {}
    for name, value in pairs:
        multi_query.setdefault(name, []).append(value)
    try:
        text: str | None = body.decode("utf-8") if body else None
        encoded = False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode("ascii"), True
    epoch_ms = int(received.timestamp() * 1000)
    request_context: dict[str, Any] = {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": domain_name,
        "domainPrefix": domain_name.split(".", 1)[0],
        "extendedRequestId": request_id,
        "httpMethod": route.method,
        "identity": {
            "accessKey": None,
            "accountId": None,
            "caller": None,
            "cognitoAuthenticationProvider": None,
            "cognitoAuthenticationType": None,
            "cognitoIdentityId": None,
            "cognitoIdentityPoolId": None,
            "principalOrgId": None,
            "sourceIp": source_ip,
            "user": None,
            "userAgent": next((value for name, value in headers if name.lower() == "user-agent"), None),
            "userArn": None,
        },
        "path": f"/{STAGE}{raw_path}",
        "protocol": "HTTP/1.1",
        "requestId": request_id,
        "requestTime": received.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "requestTimeEpoch": epoch_ms,
        "resourceId": hashlib.sha256(route.path.encode()).hexdigest()[:6],
        "resourcePath": route.path,
        "stage": STAGE,
    }
    if claims is not None:
        request_context["authorizer"] = {"claims": dict(claims)}
    return {
        "resource": route.path,
        "path": raw_path,
        "httpMethod": route.method,
        "headers": single_headers,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": dict(pairs) or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": dict(path_parameters) or None,
        "stageVariables": None,
        "requestContext": request_context,
        "body": text,
        "isBase64Encoded": encoded,
    }


def s3_object_created_record(
    *,
    tenant_id: str,
    path: str,
    size: int,
    etag: str,
    sequencer: str,
    event_time: datetime,
    source_ip: str,
    request_id: str,
    bucket: str = BUCKET,
) -> dict[str, Any]:
    """One `ObjectCreated:Put` record of an S3 event notification, with the key URL-encoded as S3 sends
    it (`quote_plus`, `/` kept) and no `versionId` (the local bucket is unversioned)."""
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": REGION,
        "eventTime": event_time.strftime("%Y-%m-%dT%H:%M:%S.") + f"{event_time.microsecond // 1000:03d}Z",
        "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": "citewise-local"},
        "requestParameters": {"sourceIPAddress": source_ip},
        "responseElements": {"x-amz-request-id": request_id, "x-amz-id-2": _b64(request_id.encode())},
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "citewise-ingest",
            "bucket": {
                "name": bucket,
                "ownerIdentity": {"principalId": "citewise-local"},
                "arn": f"arn:aws:s3:::{bucket}",
            },
            "object": {
                "key": quote_plus(object_key(tenant_id, path), safe="/"),
                "size": size,
                "eTag": etag,
                "sequencer": sequencer,
            },
        },
    }


@dataclass(frozen=True)
class QueuedMessage:
    """A message on the local ingest queue: its id, body (an S3 notification as JSON) and send time."""

    message_id: str
    body: str
    sent_ms: int


def sqs_event(message: QueuedMessage, *, receive_count: int, first_receive_ms: int) -> dict[str, Any]:
    """The SQS event (batch of one record) of the `receive_count`-th receive of `message`."""
    return {
        "Records": [
            {
                "messageId": message.message_id,
                # A new receipt handle per receive, as SQS gives.
                "receiptHandle": _b64(f"{message.message_id}/{receive_count}".encode()),
                "body": message.body,
                "attributes": {
                    "ApproximateReceiveCount": str(receive_count),
                    "SentTimestamp": str(message.sent_ms),
                    "SenderId": "AROACITEWISELOCALS3",
                    "ApproximateFirstReceiveTimestamp": str(first_receive_ms),
                },
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(message.body.encode(), usedforsecurity=False).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{QUEUE_NAME}",
                "awsRegion": REGION,
            }
        ]
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Sequencer:
    """S3-like event sequencers: fixed-width upper-case hex that only increases, also across restarts
    (they start from the clock), so the registry's newest-event-wins check keeps working."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            self._last = max(self._last + 1, self._clock())
            return f"{self._last:018X}"


# --- the Lambda side ----------------------------------------------------------------------------------


@dataclass
class LambdaContext:
    """What a handler (and Powertools) reads from the Lambda context object."""

    function_name: str
    aws_request_id: str
    timeout_s: float
    memory_limit_in_mb: int = MEMORY_MB
    function_version: str = "$LATEST"
    identity: None = None
    client_context: None = None
    invoked_function_arn: str = field(init=False)
    log_group_name: str = field(init=False)
    log_stream_name: str = field(init=False)
    _deadline: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"
        self._deadline = time.monotonic() + self.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout (not enforced locally)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def default_functions_dir() -> Path:
    """`functions/` of the source checkout this library runs from."""
    return Path(citewise.__file__).resolve().parents[2] / "functions"


def load_handler(functions_dir: Path, name: str) -> Handler:
    """`lambda_handler` of `functions_dir/name/handler.py`, loaded by file under a unique module name
    (every function's file is called handler.py, so they cannot share one)."""
    file = functions_dir / name / "handler.py"
    if not file.is_file():
        raise CitewiseError(
            f"no Lambda handler at {file}: `citewise serve` runs the handlers of a citewise source checkout "
            f"(functions/<name>/handler.py for {', '.join(FUNCTIONS)})"
        )
    module_name = f"citewise_local_function_{name}_{next(_module_numbers)}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise CitewiseError(f"cannot load {file} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    handler = getattr(module, "lambda_handler", None)
    if not callable(handler):
        raise CitewiseError(f"{file} defines no lambda_handler(event, context)")
    return handler  # type: ignore[no-any-return]


def handler_environment(home: Path, public_url: str) -> tuple[dict[str, str], dict[str, str]]:
    """(variables the server sets, variables it sets only if unset) for the handlers' settings."""
    forced = {
        "CITEWISE_BACKEND": "local",
        "CITEWISE_HOME": str(home),
        "CITEWISE_PUBLIC_URL": public_url,
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon to send segments to
    }
    defaults = {
        "POWERTOOLS_SERVICE_NAME": "citewise",
        "POWERTOOLS_METRICS_NAMESPACE": "Citewise",
        # No CloudWatch here to read EMF lines: set it to false to see them on stdout.
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    return forced, defaults


class IngestWorker:
    """The local ingest queue: one thread delivering S3 notifications to the ingest handler in order.

    A delivery fails when the handler raises or lists the message in `batchItemFailures`; it is then
    received again (ApproximateReceiveCount + 1) after `retry_delay` seconds, up to `max_receives`
    receives, after which it goes to `dead_letters` and a line on the log.
    """

    def __init__(
        self,
        invoke: Callable[[str, dict[str, Any]], Any],
        log: Callable[[str], None],
        *,
        max_receives: int = MAX_RECEIVES,
        retry_delay: float = 1.0,
    ) -> None:
        self._invoke = invoke
        self._log = log
        self.max_receives = max_receives
        self.retry_delay = retry_delay
        self.dead_letters: list[QueuedMessage] = []
        self._queue: queue.Queue[QueuedMessage | None] = queue.Queue()
        self._pending = 0
        self._idle = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="citewise-ingest", daemon=True)
        self._thread.start()

    def submit(self, body: str) -> QueuedMessage:
        """Queue a message body (an S3 notification) for the ingest handler."""
        message = QueuedMessage(str(uuid.uuid4()), body, int(time.time() * 1000))
        with self._idle:
            if self._closed:
                raise CitewiseError("the local ingest queue is closed")
            self._pending += 1
        self._queue.put(message)
        return message

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every submitted message is delivered or dead-lettered; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Deliver what is queued (retries included), then stop the thread."""
        with self._idle:
            if self._closed:
                return
            self._closed = True
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (message := self._queue.get()) is not None:
            try:
                self._deliver(message)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _deliver(self, message: QueuedMessage) -> None:
        first_receive_ms = int(time.time() * 1000)
        for receive in range(1, self.max_receives + 1):
            event = sqs_event(message, receive_count=receive, first_receive_ms=first_receive_ms)
            if self._delivered(message, event):
                return
            if receive < self.max_receives:
                time.sleep(self.retry_delay)
        self.dead_letters.append(message)
        self._log(f"ingest message {message.message_id} dead-lettered after {self.max_receives} receives")

    def _delivered(self, message: QueuedMessage, event: dict[str, Any]) -> bool:
        try:
            response = self._invoke(INGEST_FUNCTION, event)
        except Exception as exc:  # the invocation failed: SQS would make the whole batch visible again
            self._log(f"ingest handler raised {type(exc).__name__} on message {message.message_id}")
            self._log(traceback.format_exc().rstrip())
            return False
        failures = response.get("batchItemFailures", []) if isinstance(response, dict) else []
        failed = any(isinstance(f, dict) and f.get("itemIdentifier") == message.message_id for f in failures)
        if failed:
            self._log(f"ingest handler reported message {message.message_id} as failed")
        return not failed


# --- the HTTP side ------------------------------------------------------------------------------------


class LocalServer(ThreadingHTTPServer):
    """The API and the upload endpoint on `address`, calling the handlers in `functions_dir`.

    Binding happens at construction (port 0 picks a free port; `url` says which). Construction also
    sets the handlers' environment (`handler_environment`) and loads every handler, so a missing or
    broken one fails here, not at the first request. `server_close` drains the ingest queue.
    """

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        settings: Settings,
        *,
        functions_dir: Path | None = None,
        public_url: str | None = None,
        max_body_bytes: int = MAX_API_BODY_BYTES,
        retry_delay: float = 1.0,
        log_stream: TextIO | None = None,
    ) -> None:
        super().__init__(address, _RequestHandler)
        try:
            host, port = self.server_address[0], self.server_address[1]
            self.url = public_url or f"http://{_url_host(str(host))}:{port}"
            self.settings = settings.model_copy(update={"public_url": self.url})
            self.max_body_bytes = max_body_bytes
            self._log_stream = log_stream
            self._log_lock = threading.Lock()
            home = settings.home_dir.resolve()
            self.token_key = local_key(home, TOKEN_PURPOSE)
            self.blobs = local_blob_store(self.settings.model_copy(update={"home": home}))
            self.sequencer = Sequencer()
            forced, defaults = handler_environment(home, self.url)
            os.environ.update(forced)
            for name, value in defaults.items():
                os.environ.setdefault(name, value)
            directory = functions_dir or default_functions_dir()
            self.handlers = {name: load_handler(directory, name) for name in FUNCTIONS}
        except BaseException:
            super().server_close()
            raise
        self._invoke_lock = threading.Lock()
        self.ingest = IngestWorker(self.invoke, self.log, retry_delay=retry_delay)

    def invoke(self, function: str, event: dict[str, Any]) -> Any:
        """Call one function's handler with a fresh context, one invocation at a time."""
        timeout = INGEST_TIMEOUT_S if function == INGEST_FUNCTION else API_TIMEOUT_S
        context = LambdaContext(f"citewise-{function}", str(uuid.uuid4()), timeout)
        with self._invoke_lock:
            return self.handlers[function](event, context)

    def log(self, line: str) -> None:
        """One line on stderr (or the given stream)."""
        stream = self._log_stream or sys.stderr
        with self._log_lock:
            stream.write(line + "\n")
            stream.flush()

    def server_close(self) -> None:
        """Stop listening, then deliver what the ingest queue still holds."""
        super().server_close()
        worker: IngestWorker | None = getattr(self, "ingest", None)  # None when binding failed
        if worker is not None:
            worker.close()


def _url_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0") else host  # noqa: S104 - comparing, not binding


class _RequestHandler(BaseHTTPRequestHandler):
    server: LocalServer
    protocol_version = "HTTP/1.1"
    server_version = "citewise-local"

    # Buffer the headers and send them with the body: two small writes on a kept-alive connection
    # would otherwise wait out Nagle's algorithm against the client's delayed ACK (about 40 ms each).
    disable_nagle_algorithm = True

    def __getattr__(self, name: str) -> Any:
        """Every method goes to `_handle` (`do_GET`, `do_TRACE`, ...): an unknown one gets the API's JSON
        404, as API Gateway answers a method no resource has, instead of http.server's HTML 501."""
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Silenced: `_handle` writes one line per request, and http.server's own would show paths
        with upload tokens."""

    def _handle(self) -> None:
        self._started = time.perf_counter()
        self._logged = False
        request_id = str(uuid.uuid4())
        raw_path = urlsplit(self.path).path
        status = 500
        try:
            status = (
                self._upload(raw_path, request_id) if self._is_upload(raw_path) else self._api(raw_path, request_id)
            )
        except Exception as exc:  # a bug here must still answer, in the error shape, and never kill the server
            self.server.log(traceback.format_exc().rstrip())
            status = self._send_error(exc, request_id, close=True)
        finally:
            self._log_request(status)

    def _is_upload(self, raw_path: str) -> bool:
        return self.command == "PUT" and raw_path.startswith(UPLOAD_ROUTE)

    def _log_request(self, status: int) -> None:
        """The request's one log line, once. `_send` writes it before the body, so a client that has its
        answer can already read the line (tests do); `_handle` writes it if nothing was sent."""
        if self._logged:
            return
        self._logged = True
        raw_path = urlsplit(self.path).path
        shown = UPLOAD_ROUTE + "..." if self._is_upload(raw_path) else raw_path
        elapsed = (time.perf_counter() - self._started) * 1000
        self.server.log(f"{self.command} {shown} {status} {elapsed:.1f}ms")

    # --- the API -----------------------------------------------------------------------------------

    def _api(self, raw_path: str, request_id: str) -> int:
        try:
            body = self._read_body(self.server.max_body_bytes)
        except CitewiseError as exc:
            return self._send_error(exc, request_id, close=True)
        if self.command == "GET" and raw_path == DOCS_PATH:
            return self._send(200, SWAGGER_UI.encode(), [("Content-Type", "text/html; charset=utf-8")], request_id)
        matched = match_route(self.command, raw_path)
        if matched is None:
            allowed = allowed_methods(raw_path)
            missing = (
                MethodNotAllowedError(self.command, allowed)
                if allowed
                else NotFoundError(f"no route {self.command} {raw_path}")
            )
            return self._send_error(missing, request_id)
        route, parameters = matched
        try:
            claims = self._claims() if route.authenticated else None
        except UnauthorizedError as exc:
            return self._send_error(exc, request_id)
        event = rest_event(
            route,
            raw_path=raw_path,
            query=urlsplit(self.path).query,
            headers=list(self.headers.items()),
            body=body,
            path_parameters=parameters,
            claims=claims,
            source_ip=self.client_address[0],
            request_id=request_id,
            received=datetime.now(UTC),
            domain_name=urlsplit(self.server.url).hostname or "localhost",
        )
        return self._send_proxy_response(self.server.invoke(route.function, event), request_id)

    def _claims(self) -> dict[str, str]:
        header = self.headers.get("Authorization", "").strip()
        if not header:
            raise UnauthorizedError("no Authorization header: send 'Bearer <token>' (get one with `citewise token`)")
        scheme, _, token = header.partition(" ")
        if not token:
            token = scheme  # a bare token, as API Gateway's Cognito authorizer also accepts
        elif scheme.lower() != "bearer":
            raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
        claims = verify_token(self.server.token_key, token.strip())
        return apigateway_claims(claims)

    def _send_proxy_response(self, response: Any, request_id: str) -> int:
        """The HTTP response of a Lambda proxy response; a malformed one is a 502, as API Gateway gives."""
        if not isinstance(response, dict) or not isinstance(response.get("statusCode"), int):
            self.server.log(f"malformed Lambda proxy response (request {request_id})")
            _, body = error_body(Exception(), request_id)
            return self._send_json(502, body, request_id)
        text = response.get("body") or ""
        data = base64.b64decode(text) if response.get("isBase64Encoded") else str(text).encode()
        # API Gateway merges `headers` into `multiValueHeaders`; a name in both keeps the multi values.
        multi: dict[str, list[str]] = response.get("multiValueHeaders") or {}
        multi_names = {name.lower() for name in multi}
        headers = [(name, str(value)) for name, value in (response.get("headers") or {}).items()]
        headers = [(name, value) for name, value in headers if name.lower() not in multi_names]
        headers += [(name, str(value)) for name, values in multi.items() for value in values]
        return self._send(response["statusCode"], data, headers, request_id)

    # --- uploads ------------------------------------------------------------------------------------

    def _upload(self, raw_path: str, request_id: str) -> int:
        """A presigned-PUT stand-in: store the body if its grant allows it, answer as S3, notify ingest."""
        token = raw_path[len(UPLOAD_ROUTE) :]
        blobs = self.server.blobs
        try:
            data = self._read_body(blobs.max_bytes)
            grant = blobs.verify(token)
            blobs.redeem(token, data, dict(self.headers.items()))
        except CitewiseError as exc:
            return self._send_s3_error(exc, request_id, close=isinstance(exc, PayloadTooLargeError))
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        record = s3_object_created_record(
            tenant_id=grant.tenant_id,
            path=grant.path,
            size=len(data),
            etag=etag,
            sequencer=self.server.sequencer.next(),
            event_time=datetime.now(UTC),
            source_ip=self.client_address[0],
            request_id=request_id,
        )
        self.server.ingest.submit(_json({"Records": [record]}))
        return self._send(200, b"", [("ETag", f'"{etag}"'), ("x-amz-request-id", request_id)], request_id)

    def _send_s3_error(self, error: CitewiseError, request_id: str, *, close: bool) -> int:
        code = next((code for kind, code in _S3_CODES if isinstance(error, kind)), "InternalError")
        status = error.http_status if code != "InternalError" else 500
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{escape(error.message)}</Message>"
            f"<RequestId>{request_id}</RequestId></Error>"
        )
        return self._send(status, xml.encode(), [("Content-Type", "application/xml")], request_id, close=close)

    # --- plumbing -----------------------------------------------------------------------------------

    def _read_body(self, limit: int) -> bytes:
        """The request body, at most `limit` bytes (PayloadTooLargeError beyond, without reading it)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise ValidationError("send the body with a Content-Length; chunked transfer encoding is not supported")
        raw_length = self.headers.get("Content-Length", "0").strip() or "0"
        if not raw_length.isdigit():
            raise ValidationError("Content-Length must be a number of bytes")
        length = int(raw_length)
        if length > limit:
            raise PayloadTooLargeError(
                f"the request body is {length} bytes; the limit is {limit}", details={"size": length, "limit": limit}
            )
        return self.rfile.read(length) if length else b""

    def _send_error(self, error: Exception, request_id: str, *, close: bool = False) -> int:
        status, body = error_body(error, request_id)
        headers = [
            ("Content-Type", "application/json"),
            *(error.headers() if isinstance(error, CitewiseError) else {}).items(),
        ]
        return self._send(status, _json(body).encode(), headers, request_id, close=close)

    def _send_json(self, status: int, body: dict[str, Any], request_id: str, *, close: bool = False) -> int:
        return self._send(status, _json(body).encode(), [("Content-Type", "application/json")], request_id, close=close)

    def _send(
        self,
        status: int,
        data: bytes,
        headers: Sequence[tuple[str, str]],
        request_id: str,
        *,
        close: bool = False,
    ) -> int:
        self.send_response_only(status)
        self.send_header("Date", self.date_time_string())
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("x-amzn-RequestId", request_id)
        self.send_header("Content-Length", str(len(data)))
        if close:
            # The unread body (or what is left of the stream) cannot be trusted as the next request.
            self.send_header("Connection", "close")
        self.end_headers()
        self._log_request(status)
        if self.command != "HEAD":  # a HEAD answer has the headers of the body it does not carry
            self.wfile.write(data)
        return status


_S3_CODES: tuple[tuple[type[CitewiseError], str], ...] = (
    (ForbiddenError, "AccessDenied"),
    (PayloadTooLargeError, "EntityTooLarge"),
    (ValidationError, "InvalidArgument"),
)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
