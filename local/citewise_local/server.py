"""`citewise serve`: the API over real HTTP on one machine, calling the very Lambda handlers AWS runs.

Each request is turned into the API Gateway REST proxy event (payload v1) that API Gateway would send,
with the Cognito authorizer's claims for authenticated routes, and handed to `lambda_handler` of
`functions/<name>/handler.py` (installed as the package `citewise_functions`) with a Lambda-like
context; the proxy response becomes the HTTP response.
Routes come from `citewise.api.routes.ROUTES`, the table the CDK API is built from.

- Identity: `Authorization: Bearer <token>` from `citewise token`, verified here as the Cognito
  authorizer would (`citewise_local.auth`); a missing, forged or expired token is a 401 before any
  handler runs.
- Credentials of programs: `POST /oauth2/token` is the token endpoint of the client-credentials grant
  (Cognito's, on AWS): a credential's id and secret (`citewise credential create`) buy an access token.
  As API Gateway, the server takes access tokens only on the `/m2m/` routes (those with OAuth scopes, one
  of which the token must grant) and ID tokens only on the others.
- Uploads: `PUT /local-upload/<token>` is the local stand-in for a presigned S3 PUT. The body is stored
  by the local blob store, which checks the signed grant as S3 checks a signature, and then an SQS
  message holding an S3 `ObjectCreated:Put` notification goes to the ingest handler, as on AWS.
  `IngestWorker` delivers the messages: each tenant's in order, the tenants in turn, on
  `INGEST_WORKERS` threads; a message the handler reports in `batchItemFailures` (or whose invocation
  raises) is received again, up to `MAX_RECEIVES` times, then dead-lettered (logged); one whose
  invocation runs past the ingest function's timeout is stopped and its document recorded FAILED.
- Restarts: the queue lives in memory, so on start the server reconciles the blob store with the
  registry (`reconciliation`) and queues the notifications the lost messages would have carried: an
  upload accepted before a crash is ingested, a PENDING record is retried.
- Concurrency: each connection has a thread, and handlers run in Lambda-like execution environments,
  one process per concurrent invocation (`citewise_local.lambdaenv`), so no per-invocation state (log
  keys, correlation id, metrics, the current event) is shared between invocations. Every invocation
  ends at its function's timeout (`api_timeout`, `ingest_timeout`: the Lambda timeouts the stack
  configures), killed if it has not answered, and one tenant holds at most half of a function's
  environments: a tenant's slow requests hold up neither another tenant's requests nor ingestion.
- Protocol errors (a malformed request line, a URL or headers over the limits, an HTTP version other
  than 1.x, a request that stops half-way) get the API's JSON error body and close the connection; a
  connection that sends nothing for `idle_timeout` seconds is closed.
- Logs: one line per request on stderr (method, path, status, milliseconds, request id; text or JSON, see
  `citewise_local.servelog`), never bodies or tokens; the handlers' own logs go where `Output` says. A
  client that closes or resets its connection before its answer is that same one line, marked `client
  disconnected`: leaving is the client's right, not the server's error, so it is no traceback.

The events come from the Lambda emulator (`citewise_local.emulator`), the one the tests drive the
handlers with.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.resources
import itertools
import json
import os
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import parse_qs, unquote_plus, urlsplit
from xml.sax.saxutils import escape

from citewise.api.routes import ROUTES, Route, allowed_methods, match_route
from citewise.api.streaming import DELIMITER, wants_stream
from citewise.domain.errors import (
    CitewiseError,
    ConflictError,
    ForbiddenError,
    FunctionTimeoutError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
    UnauthorizedError,
    ValidationError,
    error_body,
)
from citewise.domain.metadata import SIDECAR_SUFFIX
from citewise.domain.models import Document, DocumentStatus
from citewise.domain.provenance import channel_of
from citewise.domain.tenancy import document_id
from citewise.ports.blobstore import is_sidecar, key_to_location, object_key
from citewise.runtime import cors
from citewise.runtime.resource_metadata import challenge
from citewise.runtime.services import Services
from citewise.runtime.settings import Settings
from citewise_local import packaged
from citewise_local.auth import TENANT_CLAIM, TOKEN_PURPOSE, local_key, mint_access_token, verify_token
from citewise_local.backend import TOKEN_PATH, LocalBackend, local_blob_store, local_token_url
from citewise_local.blobstore import DOWNLOAD_ROUTE, UPLOAD_ROUTE, ListedObject
from citewise_local.credentials import LocalCredentials
from citewise_local.emulator import (
    API_TIMEOUT_S,
    INGEST_TIMEOUT_S,
    LambdaContext,
    MalformedProxyResponseError,
    QueuedMessage,
    Sequencer,
    authorizer_claims,
    http_response,
    rest_event,
    s3_record,
    sqs_event,
    sqs_record,
)
from citewise_local.lambdaenv import ExecutionEnvironment, FunctionPool, HandlerError, Output
from citewise_local.refresh_loop import REFRESH_INTERVAL_S, NotifyingWriter, RefreshLoop
from citewise_local.registry import LocalRegistry
from citewise_local.servelog import LogFormat, ServeLog
from citewise_local.sources import LocalSources
from citewise_local.webconsole import (
    CONSOLE_PATH,
    MAX_SESSION_REQUEST_BYTES,
    SECURITY_HEADERS,
    SESSION_PATH,
    SignIns,
    cache_control,
    console_config,
    console_files,
)

INGEST_FUNCTION = "ingest"
REFRESH_ROUTE = "/v1/sources/{id}/refresh"
"""The route that queues a refresh for the server's refresh loop (`citewise.api.sources`)."""
FUNCTIONS: tuple[str, ...] = tuple(sorted({route.function for route in ROUTES} | {INGEST_FUNCTION}))
MAX_RECEIVES = 3
"""Receives of one message before it is dead-lettered, as the queue's redrive policy (maxReceiveCount)."""
MAX_API_BODY_BYTES = 10 * 1024 * 1024
"""API Gateway's payload limit."""
MAX_TOKEN_REQUEST_BYTES = 4096  # noqa: S105 - a size, not a secret
"""A token request is a short form: a client id, a secret, a grant type and a scope."""
MAX_ENVIRONMENTS = 4
"""Execution environments (processes) per function at most, as a reserved concurrency would cap them."""
INGEST_WORKERS = 2
"""Ingest messages delivered at once, as the stack's event source mapping's maximum concurrency (2)."""
IDLE_TIMEOUT_S = 60.0
"""Seconds a connection may stay silent, between requests or in the middle of one, before it is closed."""
MAX_REQUEST_LINE_BYTES = 8 * 1024
"""The request line (method, URL, version), like common front ends' 8 KiB; longer is a 414."""
MAX_HEADER_BYTES = 10 * 1024
"""All header lines together, API Gateway's limit; more is a 431 (as is a 101st header: http.server's)."""
DOCS_PATH = "/v1/docs"
OPENAPI_PATH = "/v1/openapi.json"
_HOP_BY_HOP = frozenset({"connection", "content-length", "keep-alive", "transfer-encoding", "upgrade"})

# Swagger UI from the copy aws-lambda-powertools ships (its own docs page serves the same files), so the
# page works offline and loads nothing from a CDN.
_SWAGGER_PACKAGE = "aws_lambda_powertools.event_handler.openapi.swagger_ui"
DOCS_ASSETS = {
    f"{DOCS_PATH}/swagger-ui-bundle.min.js": ("swagger-ui-bundle.min.js", "text/javascript; charset=utf-8"),
    f"{DOCS_PATH}/swagger-ui.min.css": ("swagger-ui.min.css", "text/css; charset=utf-8"),
}
SWAGGER_UI = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>citewise API</title>
  <link rel="stylesheet" href="{DOCS_PATH}/swagger-ui.min.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{DOCS_PATH}/swagger-ui-bundle.min.js"></script>
  <script>
    window.ui = SwaggerUIBundle({{url: "{OPENAPI_PATH}", dom_id: "#swagger-ui", persistAuthorization: true}});
  </script>
</body>
</html>
"""


@functools.cache
def docs_asset(name: str) -> bytes:
    """One of Swagger UI's files, read once from the installed aws-lambda-powertools."""
    return importlib.resources.files(_SWAGGER_PACKAGE).joinpath(name).read_bytes()


# --- routes and events ------------------------------------------------------------------------------


def reconciliation(
    stored: Iterable[ListedObject],
    recorded: Callable[[str, str], Document | None],
    held: Iterable[Document],
) -> tuple[list[ListedObject], list[Document]]:
    """What the registry does not reflect of the blob store: (objects to ingest, records to remove).

    `stored` lists the bucket, `recorded(tenant_id, path)` is a document's record and `held` every record
    of a document that came through the blob store (its source is the store's). An object is ingested
    when its document has no record, a record of another version, or a PENDING one. A sidecar is no
    document: it belongs to the document it describes, which is always re-submitted when it has one,
    since a record keeps only the document's own version (ingestion skips it when the sidecar's
    attributes are those recorded). A record whose object is gone is removed, whatever its status (a
    delete killed between removing the object and the record). Records of documents from local folders
    (`citewise ingest`, source `folder`) are no business of the blob store's.
    """
    objects = list(stored)
    documents = {(o.tenant_id, o.path): o for o in objects if not is_sidecar(o.path)}
    described = {(o.tenant_id, o.path.removesuffix(SIDECAR_SUFFIX)) for o in objects if is_sidecar(o.path)}
    to_ingest = []
    for key, obj in documents.items():
        record = recorded(*key)
        if (
            record is None
            or record.version != obj.version
            or record.status is DocumentStatus.PENDING
            or key in described
        ):
            to_ingest.append(obj)
    gone = [record for record in held if (record.tenant_id, record.path) not in documents]
    return to_ingest, gone


# --- the Lambda side ----------------------------------------------------------------------------------


def handler_environment(home: Path, public_url: str) -> tuple[dict[str, str], dict[str, str]]:
    """(variables the server sets, variables it sets only if unset) for the handlers' settings."""
    forced = {
        "CITEWISE_BACKEND": "local",
        "CITEWISE_HOME": str(home),
        "CITEWISE_PUBLIC_URL": public_url,
        # The tokens this server accepts are the ones `citewise token` signs with its home's secret: it is
        # their issuer, named in the MCP endpoint's protected-resource metadata.
        "CITEWISE_AUTHORIZATION_SERVER": public_url,
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon to send segments to
        # The functions never fetch pages (the server's refresh loop does, with its own settings) and their
        # settings refuse the loopback switch, as on Lambda: a server started with it must still start.
        "CITEWISE_WEB_ALLOW_LOOPBACK": "false",
    }
    defaults = {
        "POWERTOOLS_SERVICE_NAME": "citewise",
        "POWERTOOLS_METRICS_NAMESPACE": "Citewise",
        # No CloudWatch here to read EMF lines: set it to false to see them on stdout.
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    return forced, defaults


class IngestWorker:
    """The local ingest queue: S3 notifications delivered to the ingest handler, fairly between tenants.

    Messages are grouped by tenant, as an SQS FIFO queue groups them by message group: a tenant's are
    delivered in order, one at a time, and `workers` threads take the tenants with messages waiting in
    turn. So one tenant's slow document holds up that tenant's later uploads only, never another's.

    A delivery fails when the handler raises or lists the message in `batchItemFailures`; it is then
    received again (ApproximateReceiveCount + 1) after `retry_delay` seconds, up to `max_receives`
    receives, after which it goes to `dead_letters` and a line on the log. An invocation that runs past
    the ingest function's timeout (`FunctionTimeoutError`: its environment was killed) is not received
    again: the same document would take as long again; `on_timeout` settles it (records it FAILED).
    """

    def __init__(
        self,
        invoke: Callable[[str, dict[str, Any], str], Any],
        log: Callable[[str], None],
        on_timeout: Callable[[QueuedMessage, FunctionTimeoutError], None],
        *,
        workers: int = INGEST_WORKERS,
        max_receives: int = MAX_RECEIVES,
        retry_delay: float = 1.0,
    ) -> None:
        if workers < 1:
            raise ValueError("the ingest queue needs at least one worker")
        self._invoke = invoke
        self._log = log
        self._on_timeout = on_timeout
        self.max_receives = max_receives
        self.retry_delay = retry_delay
        self.dead_letters: list[QueuedMessage] = []
        self._waiting: dict[str, deque[QueuedMessage]] = {}  # per tenant, in the order submitted
        self._turns: deque[str] = deque()  # tenants with a message waiting and none in delivery
        self._delivering: set[str] = set()
        self._pending = 0  # submitted and not yet delivered or dead-lettered
        self._changed = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._run, name=f"citewise-ingest-{n}", daemon=True) for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, body: str, tenant_id: str) -> QueuedMessage:
        """Queue a message body (an S3 notification about `tenant_id`'s object) for the ingest handler."""
        message = QueuedMessage(str(uuid.uuid4()), body, int(time.time() * 1000))
        with self._changed:
            if self._closed:
                raise CitewiseError("the local ingest queue is closed")
            self._pending += 1
            waiting = self._waiting.setdefault(tenant_id, deque())
            if not waiting and tenant_id not in self._delivering:
                self._turns.append(tenant_id)
            waiting.append(message)
            self._changed.notify_all()
        return message

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every submitted message is delivered or dead-lettered; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Deliver what is queued (retries included), then stop the threads."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._changed.notify_all()
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            tenant_id, message = taken
            try:
                self._deliver(message, tenant_id)
            finally:
                self._done(tenant_id)

    def _take(self) -> tuple[str, QueuedMessage] | None:
        """The next tenant's next message, or None once the queue is closed and empty."""
        with self._changed:
            while not self._turns:
                if self._closed and self._pending == 0:
                    return None
                self._changed.wait()
            tenant_id = self._turns.popleft()
            self._delivering.add(tenant_id)
            return tenant_id, self._waiting[tenant_id].popleft()

    def _done(self, tenant_id: str) -> None:
        with self._changed:
            self._delivering.discard(tenant_id)
            self._pending -= 1
            if self._waiting[tenant_id]:
                self._turns.append(tenant_id)  # behind the tenants already waiting for their turn
            else:
                del self._waiting[tenant_id]
            self._changed.notify_all()

    def _deliver(self, message: QueuedMessage, tenant_id: str) -> None:
        first_receive_ms = int(time.time() * 1000)
        for receive in range(1, self.max_receives + 1):
            event = sqs_event([sqs_record(message, receive_count=receive, first_receive_ms=first_receive_ms)])
            if self._delivered(message, event, tenant_id):
                return
            if receive < self.max_receives:
                time.sleep(self.retry_delay)
        self.dead_letters.append(message)
        self._log(f"ingest message {message.message_id} dead-lettered after {self.max_receives} receives")

    def _delivered(self, message: QueuedMessage, event: dict[str, Any], tenant_id: str) -> bool:
        try:
            response = self._invoke(INGEST_FUNCTION, event, tenant_id)
        except FunctionTimeoutError as exc:
            self._log(f"ingest message {message.message_id} stopped: {exc.message}")
            try:
                self._on_timeout(message, exc)
            except Exception:  # noqa: BLE001 - the record stays PENDING, which the next start's reconciling retries
                self._log(traceback.format_exc().rstrip())
            return True
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
    sets the handlers' environment (`handler_environment`), starts one execution environment per
    function, so a missing or broken handler fails here and not at the first request, and queues what
    reconciling the blob store with the registry asks for. `server_close` drains the ingest queue.

    `api_timeout` and `ingest_timeout` are the functions' timeouts in seconds (the stack's Lambda
    timeouts by default): an invocation still running then is stopped (see `citewise_local.lambdaenv`).
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
        max_environments: int = MAX_ENVIRONMENTS,
        api_timeout: float = API_TIMEOUT_S,
        ingest_timeout: float = INGEST_TIMEOUT_S,
        ingest_workers: int = INGEST_WORKERS,
        idle_timeout: float = IDLE_TIMEOUT_S,
        retry_delay: float = 1.0,
        log_stream: TextIO | None = None,
        log_format: LogFormat = "text",
        handler_output: Output | None = None,
        cors_origins: Sequence[str] = (),
        refresh_interval: float | None = REFRESH_INTERVAL_S,
    ) -> None:
        self.pools: dict[str, FunctionPool] = {}  # before binding: a failed bind calls server_close
        super().__init__(address, _RequestHandler)
        try:
            host, port = self.server_address[0], self.server_address[1]
            self.url = public_url or f"http://{_url_host(str(host))}:{port}"
            self.settings = settings.model_copy(update={"public_url": self.url})
            self.max_body_bytes = max_body_bytes
            if min(api_timeout, ingest_timeout) <= 0:
                raise ValueError("a function's timeout must be positive")
            self.api_timeout = api_timeout
            self.ingest_timeout = ingest_timeout
            self.idle_timeout = idle_timeout
            self.serve_log = ServeLog(log_stream, log_format)
            self.handler_output = handler_output
            self.home = settings.home_dir.resolve()
            self.token_key = local_key(self.home, TOKEN_PURPOSE)
            self.sign_ins = SignIns.of_home(self.home)
            self.blobs = local_blob_store(self.settings.model_copy(update={"home": self.home}))
            self.credentials = LocalCredentials(self.home / "credentials.db", token_url=local_token_url(self.settings))
            self.sequencer = Sequencer()
            forced, defaults = handler_environment(self.home, self.url)
            # CORS as API Gateway and the functions do it on AWS: the server answers preflights and its own
            # errors, the functions their responses (`citewise.runtime.cors`).
            self.cors_origins = tuple(cors_origins)
            forced["CITEWISE_CORS_ALLOW_ORIGINS"] = json.dumps(self.cors_origins)
            if handler_output is not None and handler_output.metrics:
                forced["POWERTOOLS_METRICS_DISABLED"] = "false"
            os.environ.update(forced)
            for name, value in defaults.items():
                os.environ.setdefault(name, value)
            self._start_environments(functions_dir or packaged.functions_dir(), max_environments)
        except BaseException:
            self._close_pools()
            super().server_close()
            raise
        self.ingest = IngestWorker(
            self.invoke, self.log, self._fail_stopped_ingest, workers=ingest_workers, retry_delay=retry_delay
        )
        try:
            self.reconcile()
        except BaseException:
            self.server_close()
            raise
        self.refreshes = self._refresh_loop(refresh_interval) if refresh_interval is not None else None

    def _start_environments(self, directory: Path, max_environments: int) -> None:
        """A pool per function, each with one environment started ahead: all start at once, then the
        cold starts are awaited, so the first request does not pay for them."""
        started = {name: ExecutionEnvironment(directory, name, self.handler_output) for name in FUNCTIONS}
        for name in FUNCTIONS:
            self.pools[name] = FunctionPool(functools.partial(self._cold_start, directory, name), max_environments)
        try:
            for name, environment in started.items():
                environment.wait_ready()
                self.pools[name].add(environment)
        except BaseException:
            for environment in started.values():
                environment.close()
            raise

    def _cold_start(self, directory: Path, name: str) -> ExecutionEnvironment:
        """One more environment for `name`, when every one it has is busy; logged, as Lambda's INIT is."""
        started = time.perf_counter()
        environment = ExecutionEnvironment(directory, name, self.handler_output)
        environment.wait_ready()
        self.log(f"{name}: a new execution environment in {(time.perf_counter() - started) * 1000:.0f}ms")
        return environment

    def invoke(self, function: str, event: dict[str, Any], tenant_id: Hashable = None) -> Any:
        """Call one function's handler for `tenant_id` (the caller's fairness key, `_fairness_key`) with a
        fresh context, in an environment of its own (see `citewise_local.lambdaenv`): invocations run
        concurrently without sharing any handler state, and FunctionTimeoutError ends one at the
        function's timeout, counted from now."""
        timeout = self.ingest_timeout if function == INGEST_FUNCTION else self.api_timeout
        context = LambdaContext(f"citewise-{function}", str(uuid.uuid4()), timeout)
        return self.pools[function].invoke(event, context, caller=tenant_id)

    def invoke_stream(
        self, function: str, event: dict[str, Any], tenant_id: Hashable = None
    ) -> Generator[bytes, None, None]:
        """`invoke` of the function's streamed handler: its bytes as they come (`citewise.api.streaming`);
        closing it stops the handler."""
        context = LambdaContext(f"citewise-{function}", str(uuid.uuid4()), self.api_timeout)
        return self.pools[function].invoke_stream(event, context, caller=tenant_id)

    def notify(self, record: dict[str, Any]) -> None:
        """Queue an SQS message holding one S3 notification record for the ingest handler, as S3 does."""
        tenant_id, _ = key_to_location(record["s3"]["object"]["key"])
        self.ingest.submit(_json({"Records": [record]}), tenant_id)

    def _fail_stopped_ingest(self, message: QueuedMessage, timeout: FunctionTimeoutError) -> None:
        """Record FAILED, with the reason, the document whose ingestion was stopped at the function's
        timeout: its environment was killed with the record still PENDING, and on AWS the message would
        come back only to run out of time again. Its chunks go too, as for any failed document (the
        killed invocation may have swapped them in); a record that is not PENDING is left alone."""
        [record] = json.loads(message.body)["Records"]
        if not record["eventName"].startswith("ObjectCreated:"):
            return
        tenant_id, path = key_to_location(record["s3"]["object"]["key"])
        reason = (
            f"{timeout.code}: ingestion did not finish within the ingest function's {self.ingest_timeout:g} s "
            "timeout and was stopped"
        )
        backend = LocalBackend(self.settings.model_copy(update={"home": self.home}))
        try:
            registry = backend.registry()
            pending = registry.get(tenant_id, document_id(tenant_id, path))
            if pending is None or pending.status is not DocumentStatus.PENDING:
                return
            backend.index().delete_document(tenant_id, pending.doc_id)
            failed = pending.model_copy(update={"status": DocumentStatus.FAILED, "error": reason, "chunk_count": 0})
            registry.put(failed)
        except ConflictError:
            return  # a newer version or a delete took the record meanwhile: it is theirs to settle
        finally:
            backend.close()
        self.log(f"ingest of {tenant_id}/{path} stopped at the function's timeout: recorded FAILED")

    def reconcile(self) -> tuple[list[ListedObject], list[Document]]:
        """Queue the notifications that bring the registry up to the blob store (`reconciliation`), as
        the messages lost with the previous process's queue would have; returns what was queued.

        Only notifications: the ingest handler decides, by the same rules as for any upload.
        """
        registry = LocalRegistry(self.home / "registry.db")
        try:
            held = [
                record
                for tenant_id in registry.tenants()
                for record in _records(registry, tenant_id)
                if channel_of(record) == self.blobs.channel
            ]
            to_ingest, gone = reconciliation(
                self.blobs.walk(),
                lambda tenant_id, path: registry.get(tenant_id, document_id(tenant_id, path)),
                held,
            )
        finally:
            registry.close()
        for obj in to_ingest:
            self.notify(self._reconciling_record("ObjectCreated:Put", obj.tenant_id, obj.path, obj.size, obj.etag))
        for record in gone:
            self.notify(self._reconciling_record("ObjectRemoved:Delete", record.tenant_id, record.path))
        if to_ingest or gone:
            self.log(f"reconciled on start: {len(to_ingest)} objects to ingest, {len(gone)} records to remove")
        return to_ingest, gone

    def _reconciling_record(
        self,
        event_name: Literal["ObjectCreated:Put", "ObjectRemoved:Delete"],
        tenant_id: str,
        path: str,
        size: int | None = None,
        etag: str | None = None,
    ) -> dict[str, Any]:
        return s3_record(
            event_name,
            object_key(tenant_id, path),
            size=size,
            etag=etag,
            sequencer=self.sequencer.next(),
            event_time=datetime.now(UTC),
            source_ip=_url_host(str(self.server_address[0])),
            request_id=str(uuid.uuid4()),
        )

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Serve one connection (on its own thread) with the idle timeout on its socket: a client that
        stops sending, before or within a request, is disconnected after `idle_timeout` seconds."""
        if isinstance(request, socket.socket):
            request.settimeout(self.idle_timeout)
        super().finish_request(request, client_address)

    def log(self, line: str) -> None:
        """One line of the server's own (see `citewise_local.servelog`)."""
        self.serve_log.event(line)

    def _refresh_loop(self, interval: float) -> RefreshLoop:
        """The web sources' refreshes (`citewise_local.refresh_loop`), every `interval` seconds; their pages
        reach the ingest queue as uploads do."""
        queue = LocalSources(self.home / "sources.db")
        writer = NotifyingWriter(self.blobs, self.notify, self.sequencer.next)
        services = Services(self.settings, sources=queue, document_writer=writer)
        loop = RefreshLoop(services, queue, interval=interval, log=self.log)
        loop.start()
        return loop

    def server_close(self) -> None:
        """Stop listening and the refreshes, deliver what the ingest queue still holds, then end the
        environments."""
        super().server_close()
        refreshes: RefreshLoop | None = getattr(self, "refreshes", None)
        if refreshes is not None:
            refreshes.close()
            refreshes.queue.close()
        worker: IngestWorker | None = getattr(self, "ingest", None)  # None when starting failed
        if worker is not None:
            worker.close()
        self._close_pools()
        credentials: LocalCredentials | None = getattr(self, "credentials", None)
        if credentials is not None:
            credentials.close()

    def _close_pools(self) -> None:
        for pool in self.pools.values():
            pool.close()


def _records(registry: LocalRegistry, tenant_id: str) -> Iterator[Document]:
    cursor = None
    while True:
        page = registry.list(tenant_id, limit=1000, cursor=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _url_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0") else host  # noqa: S104 - comparing, not binding


class _RequestHandler(BaseHTTPRequestHandler):
    server: LocalServer
    protocol_version = "HTTP/1.1"
    server_version = "citewise-local"

    # Buffer the headers and send them with the body: two small writes on a kept-alive connection
    # would otherwise wait out Nagle's algorithm against the client's delayed ACK (about 40 ms each).
    disable_nagle_algorithm = True
    # Per request: set when its request line arrives, and once it has parsed (else it is a protocol error).
    _started = 0.0
    _parsed = False
    _logged = False
    _disconnected = False

    def __getattr__(self, name: str) -> Any:
        """Every method goes to `_handle` (`do_GET`, `do_TRACE`, ...): an unknown one gets the API's JSON
        404, as API Gateway answers a method no resource has, instead of http.server's HTML 501."""
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Silenced: `_handle` writes one line per request, and http.server's own would show paths
        with upload tokens."""

    # --- the protocol ---------------------------------------------------------------------------------

    def handle_one_request(self) -> None:
        """One request; its clock starts at its request line (`parse_request`), not while a kept-alive
        connection waits for it."""
        self._started = time.perf_counter()
        self._parsed = self._logged = self._disconnected = False
        try:
            super().handle_one_request()
        except ConnectionError:  # reset while no request was under way (one that was is logged by `_handle`)
            self.close_connection = True

    def parse_request(self) -> bool:
        """http.server's parsing, with the limits of `MAX_REQUEST_LINE_BYTES` and `MAX_HEADER_BYTES`, and
        HTTP/0.9 (a request line without a version) refused."""
        self._started = time.perf_counter()
        line_bytes = len(self.raw_requestline.rstrip(b"\r\n"))
        if line_bytes > MAX_REQUEST_LINE_BYTES:
            return self._refuse(
                HTTPStatus.REQUEST_URI_TOO_LONG,
                f"the request line is {line_bytes} bytes; the limit is {MAX_REQUEST_LINE_BYTES}",
            )
        if len(str(self.raw_requestline, "iso-8859-1").split()) == 2:  # method and path, as HTTP/0.9 sends
            # Refused before http.server, which would wait for headers that HTTP/0.9 does not send.
            return self._refuse(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/0.9 is not supported: send HTTP/1.1")
        if not super().parse_request():
            return False
        header_bytes = sum(len(name) + len(value) + 4 for name, value in self.headers.items())
        if header_bytes > MAX_HEADER_BYTES:
            self.send_error(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"the headers are {header_bytes} bytes; the limit is {MAX_HEADER_BYTES}",
            )
            return False
        self._parsed = True
        return True

    def _refuse(self, status: HTTPStatus, message: str) -> bool:
        """Answer a request line that is not parsed further; False, as `parse_request` returns then."""
        self.command, self.request_version, self.requestline = "", "", ""  # as http.server's own 414 has them
        self.send_error(status, message)
        return False

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A protocol error, from http.server or `parse_request`, in the API's JSON error shape (instead
        of http.server's HTML page) with the protocol's status. The connection closes after it: what
        follows a request that could not be read cannot be trusted as the next one."""
        self._send_protocol_error(code, message or HTTPStatus(code).phrase)

    def _send_protocol_error(self, status: int, message: str) -> int:
        if self.request_version == "HTTP/0.9":
            # http.server writes no status line or headers to HTTP/0.9, which is also what it assumes
            # when the request line is unreadable; the client must still see the status.
            self.request_version = "HTTP/1.0"
        request_id = str(uuid.uuid4())
        _, body = error_body(ValidationError(message), request_id)
        return self._send_json(int(status), body, request_id, close=True)

    # --- requests ----------------------------------------------------------------------------------

    def _handle(self) -> None:
        request_id = str(uuid.uuid4())
        raw_path = urlsplit(self.path).path
        status: int | None = 500
        try:
            if self._is_upload(raw_path):
                status = self._upload(raw_path, request_id)
            elif self._is_download(raw_path):
                status = self._download(raw_path, request_id)
            elif self.command == "POST" and raw_path == TOKEN_PATH:
                status = self._token(request_id)
            elif raw_path == CONSOLE_PATH or raw_path.startswith(f"{CONSOLE_PATH}/"):
                status = self._console(raw_path, request_id)
            else:
                status = self._api(raw_path, request_id)
        except TimeoutError:  # the client stopped sending within the body: it is disconnected
            status = self._send_protocol_error(
                HTTPStatus.REQUEST_TIMEOUT,
                f"the request stopped: nothing came for {self.server.idle_timeout:g} seconds",
            )
        except ConnectionError:  # it left within its request: nothing was answered
            status = None
            self._client_left()
        except Exception as exc:  # a bug here must still answer, in the error shape, and never kill the server
            self.server.log(traceback.format_exc().rstrip())
            status = self._send_error(exc, request_id, close=True)
        finally:
            self._log_request(status, request_id)

    def _is_upload(self, raw_path: str) -> bool:
        return self.command == "PUT" and raw_path.startswith(UPLOAD_ROUTE)

    def _is_download(self, raw_path: str) -> bool:
        return self.command == "GET" and raw_path.startswith(DOWNLOAD_ROUTE)

    def _log_request(self, status: int | None, request_id: str) -> None:
        """The request's one log line, once. `_send` writes it before the response, so a client that has its
        answer can already read the line (tests do); `_handle` writes it if nothing was sent."""
        if self._logged:
            return
        self._logged = True
        method = path = None  # what could not be parsed is not shown: it may be huge, or hold an upload token
        if self._parsed:
            raw_path = urlsplit(self.path).path
            method, path = self.command, _without_token(raw_path)
        elapsed = (time.perf_counter() - self._started) * 1000
        self.server.serve_log.request(method, path, status, elapsed, request_id, disconnected=self._disconnected)

    def _client_left(self) -> None:
        self._disconnected = True
        self.close_connection = True

    def _client_gone(self) -> bool:
        """Whether the client has closed or reset its connection: its side reads as the end of the stream.
        Bytes waiting (a next request, a body not read) or none yet mean it is still there. A client that
        only shut down its sending side counts as gone too, as most servers count it."""
        timeout = self.connection.gettimeout()
        self.connection.settimeout(0)  # a look, never a wait
        try:
            return not self.connection.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except ConnectionError:
            return True
        finally:
            self.connection.settimeout(timeout)

    # --- the API -----------------------------------------------------------------------------------

    def _api(self, raw_path: str, request_id: str) -> int:
        try:
            body = self._read_body(self.server.max_body_bytes)
        except CitewiseError as exc:
            return self._send_error(exc, request_id, close=True)
        if self.command == "GET" and raw_path == DOCS_PATH:
            return self._send(200, SWAGGER_UI.encode(), [("Content-Type", "text/html; charset=utf-8")], request_id)
        if self.command == "GET" and raw_path in DOCS_ASSETS:
            name, content_type = DOCS_ASSETS[raw_path]
            cached = [("Content-Type", content_type), ("Cache-Control", "public, max-age=86400")]
            return self._send(200, docs_asset(name), cached, request_id)
        if (
            self.command == "OPTIONS"
            and self.headers.get("Access-Control-Request-Method")
            and allowed_methods(raw_path)
        ):
            origin = cors.allowed_origin(self.headers.get("Origin"), self.server.cors_origins)
            return self._send(204, b"", list(cors.preflight_headers(origin).items()), request_id)
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
            claims = self._claims(route) if route.authenticated else None
        except UnauthorizedError as exc:
            # As the stack's gateway responses answer every 401: where the MCP endpoint's metadata is.
            return self._send_error(exc, request_id, extra_headers={"WWW-Authenticate": challenge(self.server.url)})
        event = rest_event(
            route.method,
            route.path,
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
        if route.streams and wants_stream(self.headers.get("Accept"), _asks_for_stream(body)):
            return self._send_stream(
                self.server.invoke_stream(route.function, event, _fairness_key(claims)), request_id
            )
        try:
            response = self.server.invoke(route.function, event, _fairness_key(claims))
        except FunctionTimeoutError as exc:  # as API Gateway answers once its integration timeout passes
            return self._send_error(exc, request_id)
        if route.path == REFRESH_ROUTE and self.server.refreshes is not None:
            self.server.refreshes.wake()  # a refresh asked now starts now, not at the loop's next tick
        return self._send_proxy_response(response, request_id)

    def _send_stream(self, chunks: Generator[bytes, None, None], request_id: str) -> int:
        """A streamed Lambda proxy response, as API Gateway sends one with `ResponseTransferMode.STREAM`: the
        status and headers once they have come, then each piece of the body as it comes (chunked). A client
        that leaves closes `chunks`, which stops the handler and, with it, the model call."""
        try:
            head = b""
            while DELIMITER not in head:
                head += next(chunks)
            metadata, _, rest = head.partition(DELIMITER)
            prelude = http_response(json.loads(metadata))
            status, headers = prelude.status, prelude.headers
        except (StopIteration, ValueError):
            chunks.close()
            self.server.log(f"malformed streamed Lambda response (request {request_id})")
            return self._send_json(502, error_body(Exception(), request_id)[1], request_id)
        except FunctionTimeoutError as exc:
            return self._send_error(exc, request_id)
        except HandlerError:
            return self._send_json(502, error_body(Exception(), request_id)[1], request_id)
        self.send_response_only(status)
        self.send_header("Date", self.date_time_string())
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("x-amzn-RequestId", request_id)
        self.send_header("Transfer-Encoding", "chunked")
        self._log_request(status, request_id)
        try:
            self.end_headers()
            for piece in itertools.chain([rest] if rest else [], chunks):
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except ConnectionError:
            self.close_connection = True
            self.server.log(f"request {request_id}: the client left a streamed answer; its generation was stopped")
        except (FunctionTimeoutError, HandlerError):
            self.close_connection = True  # the body stops mid-way, as API Gateway's does
            self.server.log(f"request {request_id}: the streamed answer ended early")
        finally:
            chunks.close()
        return status

    def _claims(self, route: Route) -> dict[str, str]:
        """The claims of the request's token, checked as API Gateway's Cognito authorizer checks them on
        `route`: an ID token where the route has no OAuth scopes, an access token granting one of them
        where it has."""
        header = self.headers.get("Authorization", "").strip()
        if not header:
            raise UnauthorizedError("no Authorization header: send 'Bearer <token>' (get one with `citewise token`)")
        scheme, _, token = header.partition(" ")
        if not token:
            token = scheme  # a bare token, as API Gateway's Cognito authorizer also accepts
        elif scheme.lower() != "bearer":
            raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
        claims = verify_token(self.server.token_key, token.strip(), kind="access" if route.scopes else "id")
        if route.scopes and not set(claims["scope"].split()) & set(route.scopes):
            raise UnauthorizedError(f"the token grants none of this route's scopes ({' '.join(route.scopes)})")
        return authorizer_claims(claims)

    def _token(self, request_id: str) -> int:
        """The token endpoint (RFC 6749 client-credentials grant, as Cognito's): client authentication by
        HTTP Basic or by `client_id` and `client_secret` in the form; `scope` optional (every scope the
        client may have when absent). Errors are OAuth's JSON (`invalid_client`, `invalid_scope`, ...)."""
        try:
            form = parse_qs(self._read_body(MAX_TOKEN_REQUEST_BYTES).decode("utf-8", "replace"))
        except CitewiseError:
            return self._send_json(400, {"error": "invalid_request"}, request_id, close=True)
        fields = {name: values[0] for name, values in form.items() if len(values) == 1}
        if fields.get("grant_type") != "client_credentials":
            return self._send_json(400, {"error": "unsupported_grant_type"}, request_id)
        client_id, secret = _client_authentication(self.headers.get("Authorization", ""), fields)
        try:
            allowed = self.server.credentials.authenticate(client_id, secret)
        except UnauthorizedError:
            return self._send(
                401,
                _json({"error": "invalid_client"}).encode(),
                [("Content-Type", "application/json"), ("WWW-Authenticate", 'Basic realm="citewise"')],
                request_id,
            )
        requested = fields.get("scope", allowed.oauth_scope).split()
        if not requested or any(scope != allowed.oauth_scope for scope in requested):
            return self._send_json(400, {"error": "invalid_scope"}, request_id)
        ttl = self.server.settings.credential_token_minutes * 60
        token = mint_access_token(self.server.token_key, client_id=client_id, scope=" ".join(requested), ttl=ttl)
        body = {"access_token": token, "expires_in": ttl, "token_type": "Bearer"}
        return self._send(
            200, _json(body).encode(), [("Content-Type", "application/json"), ("Cache-Control", "no-store")], request_id
        )

    def _send_proxy_response(self, response: Any, request_id: str) -> int:
        """The HTTP response of a Lambda proxy response; a malformed one is a 502, as API Gateway gives."""
        try:
            mapped = http_response(response)
        except MalformedProxyResponseError:
            self.server.log(f"malformed Lambda proxy response (request {request_id})")
            _, body = error_body(Exception(), request_id)
            return self._send_json(502, body, request_id)
        return self._send(mapped.status, mapped.body, mapped.headers, request_id, proxied=True)

    # --- the web console (citewise_local.webconsole) --------------------------------------------------

    def _console(self, raw_path: str, request_id: str) -> int:
        """The console's files and `config.json` (GET), and sign-in with a one-time code (POST session)."""
        try:
            body = self._read_body(MAX_SESSION_REQUEST_BYTES)
        except CitewiseError as exc:
            return self._send_error(exc, request_id, close=True)
        headers = list(SECURITY_HEADERS.items())
        if raw_path == SESSION_PATH:
            if self.command != "POST":
                return self._send_error(MethodNotAllowedError(self.command, ("POST",)), request_id)
            try:
                session = self.server.sign_ins.redeem(_sign_in_code(body))
            except CitewiseError as exc:
                return self._send_error(exc, request_id)
            answer = [("Content-Type", "application/json"), ("Cache-Control", "no-store"), *headers]
            return self._send(200, _json(session).encode(), answer, request_id)
        if self.command not in ("GET", "HEAD"):
            return self._send_error(MethodNotAllowedError(self.command, ("GET", "HEAD")), request_id)
        if raw_path == CONSOLE_PATH:  # relative asset URLs resolve under the folder, not beside it
            return self._send(308, b"", [("Location", f"{CONSOLE_PATH}/"), *headers], request_id)
        name = raw_path[len(CONSOLE_PATH) + 1 :]
        if name == "config.json":
            config = _json(console_config(self.server.url)).encode()
            return self._send(
                200, config, [("Content-Type", "application/json"), ("Cache-Control", "no-cache"), *headers], request_id
            )
        files = console_files()
        if name not in files:
            missing = (
                "no such console file" if files else "the console is not built into this install: run `make console`"
            )
            return self._send_error(NotFoundError(missing), request_id)
        data, content_type = files[name]
        return self._send(
            200, data, [("Content-Type", content_type), ("Cache-Control", cache_control(name)), *headers], request_id
        )

    # --- uploads ------------------------------------------------------------------------------------

    def _upload(self, raw_path: str, request_id: str) -> int:
        """A presigned-PUT stand-in: store the body if its grant allows it, answer as S3, notify ingest."""
        token = raw_path[len(UPLOAD_ROUTE) :]
        blobs = self.server.blobs
        try:
            data = self._read_body(blobs.max_bytes)
            grant = blobs.verify(token)
            version = blobs.redeem(token, data, dict(self.headers.items()))
        except CitewiseError as exc:
            return self._send_s3_error(exc, request_id, close=isinstance(exc, PayloadTooLargeError))
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        record = s3_record(
            "ObjectCreated:Put",
            object_key(grant.tenant_id, grant.path),
            size=len(data),
            etag=etag,
            sequencer=self.server.sequencer.next(),
            event_time=datetime.now(UTC),
            source_ip=self.client_address[0],
            request_id=request_id,
        )
        self.server.notify(record)
        # S3 names the version written on a versioned bucket (the stack's is): what ingestion records.
        headers = [("ETag", f'"{etag}"'), ("x-amz-version-id", version), ("x-amz-request-id", request_id)]
        return self._send(200, b"", headers, request_id)

    def _download(self, raw_path: str, request_id: str) -> int:
        """A presigned-GET stand-in: the granted version's bytes, served so no stored page can run here."""
        try:
            data, how = self.server.blobs.download(raw_path[len(DOWNLOAD_ROUTE) :])
        except CitewiseError as exc:
            return self._send_s3_error(exc, request_id, close=False)
        headers = [
            ("Content-Type", how.content_type),
            ("Content-Disposition", how.content_disposition),
            ("Cache-Control", "private, no-store"),
            ("X-Content-Type-Options", "nosniff"),
            # This origin also serves the API: a stored page must never run as one of its pages.
            ("Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'"),
        ]
        return self._send(200, data, headers, request_id)

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
        body = self.rfile.read(length) if length else b""
        if len(body) < length:  # the stream ended first: half a body is no request to answer
            raise ConnectionError(f"the connection closed after {len(body)} of the body's {length} bytes")
        return body

    def _send_error(
        self, error: Exception, request_id: str, *, close: bool = False, extra_headers: dict[str, str] | None = None
    ) -> int:
        status, body = error_body(error, request_id)
        headers = [
            ("Content-Type", "application/json"),
            *(error.headers() if isinstance(error, CitewiseError) else {}).items(),
            *(extra_headers or {}).items(),
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
        proxied: bool = False,
    ) -> int:
        """Send one response; `proxied`: a function's, whose CORS headers are the function's own (API
        Gateway adds none to a proxy response), else the server's, which gets them here."""
        self.send_response_only(status)
        self.send_header("Date", self.date_time_string())
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        if not proxied and not any(name.lower() == "access-control-allow-origin" for name, _ in headers):
            # A request line too broken to parse leaves no headers to read.
            request_headers = getattr(self, "headers", None)
            sent_from = request_headers.get("Origin") if request_headers is not None else None
            origin = cors.allowed_origin(sent_from, self.server.cors_origins)
            for name, value in cors.origin_headers(origin).items():
                self.send_header(name, value)
        self.send_header("x-amzn-RequestId", request_id)
        self.send_header("Content-Length", str(len(data)))
        if close:
            # The unread body (or what is left of the stream) cannot be trusted as the next request.
            self.send_header("Connection", "close")
        # Logged before anything goes out: a client holding the answer (an empty body is all headers) can
        # already read the line. So whether the client is still there is looked at first.
        if self._client_gone():
            self._client_left()
        self._log_request(status, request_id)
        if self._disconnected:
            return status
        try:
            self.end_headers()
            if self.command != "HEAD":  # a HEAD answer has the headers of the body it does not carry
                self.wfile.write(data)
        except ConnectionError:  # it left while the answer was on its way, after the request's line
            self.close_connection = True
            self.server.log(f"request {request_id}: the client disconnected while its answer was sent")
        return status


_S3_CODES: tuple[tuple[type[CitewiseError], str], ...] = (
    (ForbiddenError, "AccessDenied"),
    (NotFoundError, "NoSuchVersion"),
    (PayloadTooLargeError, "EntityTooLarge"),
    (PreconditionFailedError, "PreconditionFailed"),
    (ValidationError, "InvalidArgument"),
)


def _without_token(raw_path: str) -> str:
    """The path as logged: an upload or download URL's token is a credential, never written to a log."""
    for route in (UPLOAD_ROUTE, DOWNLOAD_ROUTE):
        if raw_path.startswith(route):
            return route + "..."
    return raw_path


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _client_authentication(authorization: str, fields: dict[str, str]) -> tuple[str, str]:
    """(client id, secret) of a token request: HTTP Basic (RFC 6749 2.3.1, each part form-encoded), else the
    form's `client_id` and `client_secret`; empty strings when neither is there (refused as invalid_client)."""
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() == "basic" and encoded:
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return "", ""
        client_id, _, secret = decoded.partition(":")
        return unquote_plus(client_id), unquote_plus(secret)
    return fields.get("client_id", ""), fields.get("client_secret", "")


def _sign_in_code(body: bytes) -> str:
    """The `code` of a console sign-in request, `{"code": "..."}`."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("code"), str):
        raise ValidationError('send {"code": "<the code of the sign-in link>"} as JSON')
    return str(parsed["code"])


def _asks_for_stream(body: bytes) -> bool:
    """Whether a JSON request body holds `"stream": true` (anything else is the handler's to judge)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("stream") is True


def _fairness_key(claims: dict[str, str] | None) -> Hashable:
    """Whom an invocation counts against in the pool's fairness limit: the tenant, a program's credential
    (whose tenant only its record names), or the platform operator (who has none: counted apart from
    every tenant); None for a public route."""
    if claims is None:
        return None
    if TENANT_CLAIM not in claims and "client_id" in claims:
        return ("credential", claims["client_id"])
    return claims.get(TENANT_CLAIM) or ("operator", claims.get("sub"))
