"""A small typed client of the v1 REST API, on the standard library's `urllib` (nothing to install).

```python
from citewise.client import CitewiseClient

client = CitewiseClient("http://127.0.0.1:8080", token)
document = client.upload_and_wait("handbook/onboarding.md")  # presign, PUT, wait for INDEXED or FAILED
answer = client.query("How do I get a laptop?")
print(answer.answer, [c.quote for c in answer.citations])
```

It returns the API's own models (`QueryResponse`, `Document`, ...), so a field the API adds is there
without a client change. Every failure is a `CitewiseClientError` carrying the API's `code`, `message`,
`details` and `request_id` (the id that finds the request in the logs); failures that never reached
the API have codes of their own (`CONNECTION_ERROR`, `TIMEOUT`) and no request id.

Redirects are followed as `urllib` follows them, but the bearer token only ever goes to the origin
(scheme, host and port) it was meant for: a redirect to another origin, an https -> http downgrade
included, is followed without it (`_OriginBoundRedirects`).

It is part of the `citewise` package so `from citewise.client import ...` works wherever citewise is
installed, but Lambda never runs it: the layer bundling leaves it out (docs/architecture.md).
"""

from __future__ import annotations

import json
import mimetypes
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.client import HTTPMessage
from pathlib import Path
from typing import IO, Any, TypeVar

import pydantic

from citewise.api.schemas import Health, QueryResponse, SearchResponse
from citewise.api.sources import SourceList
from citewise.domain.metadata import SIDECAR_SUFFIX
from citewise.domain.models import Document, DocumentStatus, Filter
from citewise.domain.sources import Source, SourceSpec
from citewise.domain.tenant_settings import TenantSettings
from citewise.ingest.layout import DocumentText
from citewise.ports.blobstore import PresignedDownload, PresignedUpload
from citewise.ports.conversations import Conversation, ConversationPage
from citewise.ports.feedback import FeedbackReceipt, FeedbackRequest, SourceStats
from citewise.ports.registry import DocumentPage

_Model = TypeVar("_Model", bound=pydantic.BaseModel)
FINAL_STATES = frozenset({DocumentStatus.INDEXED, DocumentStatus.FAILED})
DEFAULT_CONTENT_TYPE = "application/octet-stream"
# The parsers pick the format by extension first; these are for the types `mimetypes` may not know.
_CONTENT_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".json": "application/json"}
# As `urllib.request.Request` stores header names (`str.capitalize`), so `remove_header` finds it.
_AUTHORIZATION = "Authorization"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class CitewiseClientError(Exception):
    """An API error (`status` is its HTTP status), or a failure to reach the API (`status` None).

    `code` is stable and meant for programs (`VALIDATION_ERROR`, `NOT_FOUND`, ... as in docs/api.md, S3's
    own code such as `PreconditionFailed` for an upload PUT, `CONNECTION_ERROR`, `TIMEOUT`); `message` is
    for people; `request_id` is the id to look up in the server's logs.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.code = code
        self.message = message
        self.status = status
        self.details = dict(details or {})
        self.request_id = request_id

    @property
    def retryable(self) -> bool:
        """True when the same call may succeed later: throttling, a backend failure, no connection."""
        return self.status is None or self.status == 429 or self.status >= 500


@dataclass(frozen=True)
class Uploaded:
    """A stored upload: the document it is (or, for a sidecar, belongs to) and the version stored."""

    document_id: str
    path: str
    version: str
    sidecar: bool


class CitewiseClient:
    """The v1 API at `base_url` (e.g. `http://127.0.0.1:8080` or the stack's `ApiUrl`), as the user whose
    bearer `token` it sends (a Cognito ID token, or `citewise token`'s output locally)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"the API URL must be http(s)://host[:port][/stage], not {base_url!r}")
        if "@" in parsed.netloc:
            # Credentials in the URL would travel in every error message that names the host.
            raise ValueError("the API URL must not carry a user or password: the token authenticates")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._token = token
        self._opener = urllib.request.build_opener(_OriginBoundRedirects)

    # --- query --------------------------------------------------------------------------------------

    def query(
        self,
        question: str,
        *,
        top_k: int | None = None,
        filters: Filter | Mapping[str, Any] | None = None,
        min_score: float | None = None,
        max_sources: int | None = None,
        route: bool | None = None,
        conversation_id: str | None = None,
    ) -> QueryResponse:
        """An answer with `[n]` markers and citations (POST /v1/query); unset options take the API's defaults.
        `conversation_id` (an earlier answer's `conversation.conversation_id`) asks it as a follow-up there."""
        body = _query_body(question, top_k, filters, min_score, max_sources, route, conversation_id)
        return self._call("POST", "/v1/query", QueryResponse, body=body)

    def query_stream(
        self,
        question: str,
        *,
        top_k: int | None = None,
        filters: Filter | Mapping[str, Any] | None = None,
        min_score: float | None = None,
        max_sources: int | None = None,
        route: bool | None = None,
        conversation_id: str | None = None,
    ) -> Iterator[StreamEvent]:
        """The answer as it is written (POST /v1/query with `Accept: text/event-stream`): `sources`, `text`,
        `citation` events, then `answer`, whose `answer()` is what `query` returns. An `error` event is raised
        as `CitewiseClientError`. Leaving the loop (or closing the iterator) closes the connection, which
        stops the answer's generation on the server (the conversation, if any, records the turn interrupted)."""
        body = json.dumps(
            _query_body(question, top_k, filters, min_score, max_sources, route, conversation_id)
        ).encode()
        headers = {
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            _AUTHORIZATION: f"Bearer {self._token}",
        }
        url = self.base_url + "/v1/query"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - http(s) only
        try:
            response = self._opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            raise _api_error(exc.code, exc.read(), exc.headers.get("Content-Type", "")) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise CitewiseClientError("CONNECTION_ERROR", f"cannot reach {_host(url)}: {reason}") from exc
        with response:
            for event in _server_sent_events(response):
                if event.event == "error":
                    raise _api_error(500, json.dumps(event.data).encode(), "application/json")
                yield event

    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        filters: Filter | Mapping[str, Any] | None = None,
        min_score: float | None = None,
        max_sources: int | None = None,
        route: bool | None = None,
    ) -> SearchResponse:
        """Ranked chunks only (POST /v1/search)."""
        body = _search_body(query, top_k, filters, min_score, max_sources, route)
        return self._call("POST", "/v1/search", SearchResponse, body=body)

    # --- conversations ------------------------------------------------------------------------------

    def list_conversations(self, *, limit: int | None = None, cursor: str | None = None) -> ConversationPage:
        """One page of your conversations, newest first; pass `next_cursor` back for the next."""
        query = urllib.parse.urlencode({k: str(v) for k, v in {"limit": limit, "cursor": cursor}.items() if v})
        return self._call("GET", "/v1/conversations" + (f"?{query}" if query else ""), ConversationPage)

    def get_conversation(self, conversation_id: str) -> Conversation:
        """One of your conversations with its turns, oldest first."""
        return self._call("GET", f"/v1/conversations/{_segment(conversation_id)}", Conversation)

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete one of your conversations and its turns."""
        self._request("DELETE", f"/v1/conversations/{_segment(conversation_id)}")

    # --- feedback -----------------------------------------------------------------------------------

    def feedback(
        self, response_id: str, *, helpful: bool, citation: int | None = None, comment: str | None = None
    ) -> FeedbackReceipt:
        """Say whether your answer `response_id` (`answer.conversation.response_id`), or its citation [n],
        helped; again on the same answer and citation replaces it."""
        request = FeedbackRequest(response_id=response_id, citation=citation, helpful=helpful, comment=comment)
        return self._call("POST", "/v1/feedback", FeedbackReceipt, body=request.model_dump(exclude_none=True))

    def source_stats(self, source_id: str) -> SourceStats:
        """How helpful the tenant's users found the citations of a source."""
        return self._call("GET", f"/v1/sources/{_segment(source_id)}/stats", SourceStats)

    # --- documents ----------------------------------------------------------------------------------

    def list_documents(
        self,
        *,
        status: DocumentStatus | str | None = None,
        source: str | None = None,
        path_prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> DocumentPage:
        """One page of the documents you can read, by path; pass `next_cursor` back for the next."""
        params = {"status": status, "source": source, "path_prefix": path_prefix, "limit": limit, "cursor": cursor}
        query = urllib.parse.urlencode({k: str(v) for k, v in params.items() if v is not None})
        return self._call("GET", "/v1/documents" + (f"?{query}" if query else ""), DocumentPage)

    def get_document(self, document_id: str) -> Document:
        """One document: status, version, counts, attributes, last error."""
        return self._call("GET", f"/v1/documents/{_segment(document_id)}", Document)

    def document_text(self, document_id: str, *, offset: int = 0, limit: int | None = None) -> DocumentText:
        """A window of the document's parsed text with its pages, sections and chunk spans: where a
        citation's `chunk_id` and `quote` are (follow `next_offset` for the next window)."""
        params = {"offset": offset} | ({"limit": limit} if limit is not None else {})
        query = urllib.parse.urlencode(params)
        return self._call("GET", f"/v1/documents/{_segment(document_id)}/text?{query}", DocumentText)

    def document_content(self, document_id: str) -> PresignedDownload:
        """A short-lived URL of the document's original file, at the version that was indexed."""
        return self._call("GET", f"/v1/documents/{_segment(document_id)}/content", PresignedDownload)

    def delete_document(self, document_id: str) -> None:
        """Remove a document: its stored object, its chunks and its record (owner or tenant admin)."""
        self._request("DELETE", f"/v1/documents/{_segment(document_id)}")

    # --- uploads ------------------------------------------------------------------------------------

    def create_upload(
        self,
        filename: str,
        size: int,
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        visibility: str = "shared",
        metadata: Mapping[str, str] | None = None,
    ) -> PresignedUpload:
        """A presigned PUT for `filename` (its path in your tenant) of exactly `size` bytes."""
        body = {
            "filename": filename,
            "content_type": content_type,
            "size": size,
            "visibility": visibility,
            "metadata": dict(metadata or {}),
        }
        return self._call("POST", "/v1/uploads", PresignedUpload, body=body)

    def upload(
        self,
        file: Path | str,
        *,
        filename: str | None = None,
        content_type: str | None = None,
        visibility: str = "shared",
        metadata: Mapping[str, str] | None = None,
    ) -> Uploaded:
        """Presign and PUT one file (stored as `filename`, default its name in NFC); ingestion then runs on
        its own."""
        path = Path(file)
        data = path.read_bytes()
        # The API takes names in NFC only; a file system may hand the name decomposed (macOS does).
        name = filename or unicodedata.normalize("NFC", path.name)
        grant = self.create_upload(
            name,
            len(data),
            content_type=content_type or guess_content_type(name),
            visibility=visibility,
            metadata=metadata,
        )
        headers = self._send(grant.method, grant.url, data, dict(grant.headers), authorized=False)
        # The version ingestion records: S3's VersionId on a versioned bucket (and `citewise serve`),
        # else the ETag without its quotes, as the S3 adapter reads it.
        version = headers.get("x-amz-version-id") or (headers.get("etag") or "").strip('"')
        return Uploaded(grant.document_id, grant.path, version, name.endswith(SIDECAR_SUFFIX))

    def wait(
        self,
        uploaded: Uploaded,
        *,
        timeout: float = 300.0,
        on_status: Callable[[Document], None] | None = None,
        poll: float = 0.25,
    ) -> Document:
        """Poll the document until the uploaded version is INDEXED or FAILED (TIMEOUT error after `timeout`
        seconds); `on_status` sees each state read. A sidecar has no ingestion of its own to wait for
        (ValueError): it applies when its document is next ingested."""
        if uploaded.sidecar:
            raise ValueError(f"{uploaded.path} is a sidecar: it has no ingestion of its own to wait for")
        deadline = time.monotonic() + timeout
        interval = poll
        while True:
            document = self._recorded(uploaded.document_id)
            if document is not None and on_status is not None:
                on_status(document)
            if document is not None and document.version == uploaded.version and document.status in FINAL_STATES:
                return document
            left = deadline - time.monotonic()
            if left <= 0:
                state = document.status.value if document is not None else "not recorded yet"
                raise CitewiseClientError(
                    "TIMEOUT",
                    f"{uploaded.path} was not ingested within {timeout:g} s (still {state})",
                    details={"document_id": uploaded.document_id, "status": state},
                )
            time.sleep(min(interval, left))
            interval = min(interval * 1.5, 2.0)

    def _recorded(self, document_id: str) -> Document | None:
        """The document, or None while ingestion has not recorded it (the notification is on its way)."""
        try:
            return self.get_document(document_id)
        except CitewiseClientError as exc:
            if exc.code == "NOT_FOUND":
                return None
            raise

    def upload_and_wait(self, file: Path | str, *, timeout: float = 300.0, **options: Any) -> Document:
        """`upload`, then `wait`: the document as ingestion left it, INDEXED or FAILED with its `error`."""
        return self.wait(self.upload(file, **options), timeout=timeout)

    # --- web sources --------------------------------------------------------------------------------

    def create_source(self, spec: SourceSpec) -> Source:
        """Register a web source (tenant `admin` group); its first refresh runs at the schedule's next tick."""
        return self._call("POST", "/v1/sources", Source, body=spec.model_dump(mode="json", exclude_none=True))

    def list_sources(self) -> list[Source]:
        """Your tenant's web sources, oldest first, each with its last refresh and the one running."""
        return self._call("GET", "/v1/sources", SourceList).items

    def get_source(self, source_id: str) -> Source:
        """One web source: its registration, last refresh and the refresh running (with its progress)."""
        return self._call("GET", f"/v1/sources/{_segment(source_id)}", Source)

    def refresh_source(self, source_id: str) -> Source:
        """Queue a refresh now (tenant `admin` group); CONFLICT (`REFRESH_RUNNING`) while one runs. Follow its
        progress with `get_source`."""
        return self._call("POST", f"/v1/sources/{_segment(source_id)}/refresh", Source)

    def delete_source(self, source_id: str) -> None:
        """Remove a web source and every document it brought (tenant `admin` group)."""
        self._request("DELETE", f"/v1/sources/{_segment(source_id)}")

    # --- the tenant's settings and the service ------------------------------------------------------

    def get_settings(self) -> TenantSettings:
        """Your tenant's settings document (ranking signals, routing time zone and aliases)."""
        return self._call("GET", "/v1/settings", TenantSettings)

    def put_settings(self, settings: TenantSettings) -> TenantSettings:
        """Replace your tenant's settings (tenant `admin` group); returns what was stored."""
        body = settings.model_dump(mode="json", exclude_none=True, exclude={"updated_at", "updated_by"})
        return self._call("PUT", "/v1/settings", TenantSettings, body=body)

    def health(self) -> Health:
        """Liveness of the API (no authentication, no backend called)."""
        return self._call("GET", "/v1/health", Health)

    # --- plumbing -----------------------------------------------------------------------------------

    def _call(self, method: str, path: str, model: type[_Model], *, body: Any = None) -> _Model:
        """The API's answer to `method path` read as `model`."""
        text = self._request(method, path, body)
        try:
            return model.model_validate_json(text)
        except pydantic.ValidationError as exc:
            raise CitewiseClientError(
                "UNEXPECTED_RESPONSE", f"{method} {path} answered a body that is not a {model.__name__}: {exc}"
            ) from exc

    def _request(self, method: str, path: str, body: Any = None) -> str:
        """The body of the API's answer to `method path` with `body` as JSON."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        return self._send(method, self.base_url + path, data, headers, authorized=True, keep_body=True)["body"]

    def _send(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: dict[str, str],
        *,
        authorized: bool,
        keep_body: bool = False,
    ) -> dict[str, str]:
        """The response headers (lower-cased), and with `keep_body` the body under the key `body`."""
        if authorized:
            headers = {**headers, _AUTHORIZATION: f"Bearer {self._token}"}
        request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310 - http(s) only
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                body = response.read() if keep_body else b""
                answer = {name.lower(): value for name, value in response.headers.items()}
        except urllib.error.HTTPError as exc:
            raise _api_error(exc.code, exc.read(), exc.headers.get("Content-Type", "")) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise CitewiseClientError("CONNECTION_ERROR", f"cannot reach {_host(url)}: {reason}") from exc
        if keep_body:
            answer["body"] = body.decode("utf-8")
        return answer


@dataclass(frozen=True)
class StreamEvent:
    """One event of a streamed answer (docs/api.md): `event` is `sources`, `text`, `citation` or `answer`,
    `data` its JSON object."""

    event: str
    data: dict[str, Any]

    def answer(self) -> QueryResponse:
        """The `answer` event's data: exactly the body `CitewiseClient.query` reads."""
        if self.event != "answer":
            raise ValueError(f"a {self.event} event holds no answer")
        return QueryResponse.model_validate(self.data)


def _server_sent_events(response: IO[bytes]) -> Iterator[StreamEvent]:
    """The events of a `text/event-stream` body as its lines arrive (`event:` and `data:` fields; a blank
    line ends an event)."""
    name, data = "message", []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            continue
        if data:
            yield StreamEvent(name, json.loads("\n".join(data)))
        name, data = "message", []


class _OriginBoundRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handling, except that the Authorization header never leaves its origin.

    urllib copies every header of a request onto the one a redirect makes, so a 301/302/303 (a POST
    becomes a GET) or a 307/308 of a GET would hand the bearer token to whatever origin the `Location`
    names. Within the origin the token stays (an API may move a route); across origins, an https ->
    http downgrade included, the redirected request goes without it.
    """

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        """The request urllib would make for the redirect, without the token if the origin changes."""
        redirected = super().redirect_request(req, fp, code, msg, headers, newurl)
        if redirected is not None and _origin(redirected.full_url) != _origin(req.full_url):
            redirected.remove_header(_AUTHORIZATION)
        return redirected


def _origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin as browsers define it: scheme, host and port (the scheme's default if none)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is no number: an origin of its own, equal to none
        port = -1
    return scheme, parts.hostname or "", port


def _host(url: str) -> str:
    """`host[:port]` of a URL for messages: never the user or password a URL may carry."""
    parts = urllib.parse.urlsplit(url)
    return parts.netloc.rpartition("@")[2]


def guess_content_type(filename: str) -> str:
    """The media type of a file name: the parser goes by the extension anyway; S3 stores this one."""
    suffix = Path(filename).suffix.lower()
    return _CONTENT_TYPES.get(suffix) or mimetypes.guess_type(filename)[0] or DEFAULT_CONTENT_TYPE


def _search_body(
    query: str,
    top_k: int | None,
    filters: Filter | Mapping[str, Any] | None,
    min_score: float | None,
    max_sources: int | None,
    route: bool | None,
) -> dict[str, Any]:
    if isinstance(filters, Filter):
        filters = filters.model_dump(mode="json", by_alias=True, exclude_none=True)
    options = {"top_k": top_k, "filters": filters, "min_score": min_score, "max_sources": max_sources, "route": route}
    return {"query": query, **{key: value for key, value in options.items() if value is not None}}


def _query_body(
    question: str,
    top_k: int | None,
    filters: Filter | Mapping[str, Any] | None,
    min_score: float | None,
    max_sources: int | None,
    route: bool | None,
    conversation_id: str | None,
) -> dict[str, Any]:
    body = _search_body(question, top_k, filters, min_score, max_sources, route)
    return body | ({"conversation_id": conversation_id} if conversation_id is not None else {})


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _api_error(status: int, body: bytes, content_type: str) -> CitewiseClientError:
    """The error a failed response carries: the API's JSON body, S3's XML error, or the bare status."""
    text = body.decode("utf-8", errors="replace")
    if "xml" in content_type:
        try:
            root = ElementTree.fromstring(text)  # noqa: S314 - a response to our own PUT, no entities
            return CitewiseClientError(
                root.findtext("Code") or f"HTTP_{status}",
                root.findtext("Message") or text,
                status=status,
                request_id=root.findtext("RequestId"),
            )
        except ElementTree.ParseError:
            pass
    try:
        error = json.loads(text)["error"]
        return CitewiseClientError(
            str(error["code"]),
            str(error.get("message", "")),
            status=status,
            details=error.get("details") or {},
            request_id=error.get("request_id"),
        )
    except (ValueError, KeyError, TypeError):
        return CitewiseClientError(f"HTTP_{status}", text[:200] or f"HTTP {status}", status=status)
