"""Drive the real `functions/*/handler.py` with JSON events, on the local stack or on the AWS adapters.

The events come from the Lambda emulator `citewise serve` uses (`citewise_local.emulator`), so the tests
drive the handlers exactly as the local server does; identities (claims) and the notifications replayed
as recorded come from tests/events. The AWS stack is S3 and DynamoDB under moto, OpenSearch on the real
node (a fresh index per test; the HTTP double where a test injects a fault or needs Serverless's
behaviour; in search mode s3vectors the S3 Vectors double), and the hashing embedder with the extractive
synthesizer (moto has no Bedrock that answers; the Bedrock adapters have their own Stubber tests). Every
handler module is loaded fresh after the environment is set, as a cold start would.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, urlencode

import requests
from opensearchpy import OpenSearch

from citewise.api.routes import match_route
from citewise.api.streaming import DELIMITER
from citewise.domain.errors import CitewiseError
from citewise.ports.blobstore import parse_key
from citewise.runtime.settings import load_settings
from citewise_local import emulator
from citewise_local.backend import local_blob_store
from citewise_local.emulator import LambdaContext, http_response
from tests.doubles.opensearch_server import FakeOpenSearch
from tests.doubles.s3vectors import FakeS3Vectors
from tests.integration.handlers.iam import RoleCheck

ROOT = Path(__file__).resolve().parents[3]
EVENTS = ROOT / "tests" / "events"
BUCKET = "citewise-docs"
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def event_file(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


def load_handler(function: str, name: str = "lambda_handler") -> Handler:
    """Import `functions/<function>/handler.py` as a new module: a cold start with today's environment;
    its `name` (`stream_handler`: the streamed one)."""
    spec = importlib.util.spec_from_file_location(
        f"handler_{function}_{uuid.uuid4().hex}", ROOT / "functions" / function / "handler.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler: Handler = getattr(module, name)
    return handler


def claims(tenant: str | None = "acme", user: str = "alice", groups: str | None = None) -> dict[str, str]:
    """Cognito claims as API Gateway's authorizer passes them (every value a string)."""
    template = event_file("apigw_cognito.json")["requestContext"]["authorizer"]["claims"]
    rendered = {**template, "sub": user, "cognito:username": user}
    rendered.pop("cognito:groups")
    if groups is not None:
        rendered["cognito:groups"] = groups
    if tenant is None:
        rendered.pop("custom:tenant_id")
    else:
        rendered["custom:tenant_id"] = tenant
    return rendered


def api_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    query: dict[str, str] | None = None,
    identity: dict[str, str] | None = None,
    iam_arn: str | None = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    """The REST proxy event API Gateway sends for `method path` (its resource from the route table, else
    the path itself), with Cognito claims `identity` or the SigV4 caller `iam_arn`; `body` is sent as
    it is if a string, else as JSON."""
    matched = match_route(method, path)
    resource, parameters = (matched[0].path, matched[1]) if matched is not None else (path, {})
    data = b"" if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
    return emulator.rest_event(
        method,
        resource,
        raw_path=path,
        query=urlencode(query or {}),
        headers=[("Accept", "application/json"), ("Content-Type", content_type), ("User-Agent", "citewise-tests")],
        body=data,
        path_parameters=parameters,
        claims=identity if iam_arn is None else None,
        iam_arn=iam_arn,
    )


def sqs_event(*notifications: dict[str, Any] | str) -> dict[str, Any]:
    """An SQS batch whose records carry these S3 notifications (or raw bodies)."""
    sent_ms = int(time.time() * 1000)
    return emulator.sqs_event(
        emulator.sqs_record(
            emulator.QueuedMessage(str(uuid.uuid4()), n if isinstance(n, str) else json.dumps(n), sent_ms)
        )
        for n in notifications
    )


def s3_notification(kind: str, key: str, *, size: int = 0, etag: str = "", sequencer: str = "1") -> dict[str, Any]:
    """An S3 notification of one record for `key` (raw; URL-encoded as S3 does), in the test bucket."""
    return {"Records": [emulator.s3_record(kind, key, size=size, etag=etag, sequencer=sequencer, bucket=BUCKET)]}


def recorded_notification(name: str, key: str, *, version_id: str | None = None) -> dict[str, Any]:
    """The S3 notification in the recorded SQS event `name`, retargeted at `key` (URL-encoded as S3 does)
    and `version_id` (dropped when None, as on an unversioned bucket); the rest keeps the recorded shape."""
    notification: dict[str, Any] = json.loads(event_file(name)["Records"][0]["body"])
    obj = notification["Records"][0]["s3"]["object"]
    obj["key"] = quote_plus(key, safe="/")
    obj.pop("versionId", None)
    if version_id is not None:
        obj["versionId"] = version_id
    return notification


def lambda_sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """ReceiveMessage's messages (all attributes requested) in the shape the Lambda SQS event source
    mapping hands to the function."""
    records = []
    for message in messages:
        attributes = message["Attributes"]
        queued = emulator.QueuedMessage(message["MessageId"], message["Body"], int(attributes["SentTimestamp"]))
        records.append(
            emulator.sqs_record(
                queued,
                receive_count=int(attributes["ApproximateReceiveCount"]),
                first_receive_ms=int(attributes["ApproximateFirstReceiveTimestamp"]),
                receipt_handle=message["ReceiptHandle"],
                queue_arn=queue_arn,
            )
        )
    return emulator.sqs_event(records)


class CurrentStdout:
    """Writes to whatever `sys.stdout` is at the time of the write.

    Powertools' Logger binds its stream once, when `citewise.runtime.observability` is first imported (by
    whichever test loads a handler first); pointing it here lets a later test's `capsys` see the logs
    together with the EMF metrics, which Powertools prints to the current stdout, as Lambda would.
    """

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@dataclass(frozen=True)
class Output:
    """One invocation's stdout split into structured log records and EMF metric blobs."""

    text: str
    logs: list[dict[str, Any]]
    metrics: list[dict[str, Any]]

    @classmethod
    def parse(cls, text: str) -> Output:
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        return cls(
            text,
            logs=[line for line in lines if "_aws" not in line],
            metrics=[line for line in lines if "_aws" in line],
        )

    def metric(self, name: str) -> list[float]:
        """Every value emitted for metric `name` (in any namespace), in order."""
        return [value for blob in self.metrics for value in blob.get(name, [])]

    def namespaces(self, name: str) -> set[str]:
        """The namespaces metric `name` was declared in."""
        return {
            directive["Namespace"]
            for blob in self.metrics
            for directive in blob["_aws"]["CloudWatchMetrics"]
            if any(metric["Name"] == name for metric in directive["Metrics"])
        }

    def messages(self, message: str) -> list[dict[str, Any]]:
        """The log records with this message."""
        return [record for record in self.logs if record.get("message") == message]


@dataclass
class Stack:
    """The backend the handlers run on, and what a test needs to act like S3 and its clients."""

    kind: str
    s3: Any = None
    opensearch: FakeOpenSearch | None = None  # the double, when the stack runs on it
    vectors: FakeS3Vectors | None = None  # the S3 Vectors double, in search mode s3vectors
    search_index: tuple[OpenSearch, str] | None = None  # the real node's client and the stack's index
    roles: RoleCheck | None = None
    """On the AWS stack: holds every AWS call of a handler (its cold start too) to its function's role."""
    handlers: dict[str, Handler] = field(default_factory=dict)

    def indexed_doc_ids(self) -> set[str]:
        """The doc ids of every chunk the AWS stack's index holds (OpenSearch's, the double's or the node's; or
        every tenant's S3 Vectors index)."""
        if self.opensearch is not None:
            return {source["doc_id"] for index in self.opensearch.indices.values() for source in index.live.values()}
        if self.vectors is not None:
            return {
                str(metadata["doc_id"])
                for bucket in self.vectors.buckets.values()
                for index in bucket.indexes.values()
                for _, metadata in index.vectors.values()
                if metadata.get("#kind") == "chunk"
            }
        assert self.search_index is not None, "the local stack has no OpenSearch"
        client, name = self.search_index
        client.indices.refresh(index=name)
        body = {"size": 0, "aggs": {"docs": {"terms": {"field": "doc_id", "size": 10000}}}}
        return {bucket["key"] for bucket in client.search(index=name, body=body)["aggregations"]["docs"]["buckets"]}

    def handler(self, function: str) -> Handler:
        if function not in self.handlers:
            with self._as(function):
                loaded = load_handler(function)

            def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
                with self._as(function):
                    return loaded(event, context)

            self.handlers[function] = invoke
        return self.handlers[function]

    def _as(self, function: str) -> AbstractContextManager[None]:
        return self.roles.running(function) if self.roles is not None else nullcontext()

    def api(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """Call the API function that serves `path`; returns (status, parsed JSON body or None)."""
        matched = match_route(method, path)
        function = matched[0].function if matched is not None else "documents"
        response = http_response(self.handler(function)(api_event(method, path, **kwargs), LambdaContext()))
        return response.status, response.json()

    def stream(self, path: str, **kwargs: Any) -> tuple[dict[str, Any], bytes]:
        """POST `path` to the query function's streamed handler, as API Gateway's STREAM integration invokes
        it: (the metadata before the delimiter, the body's bytes)."""
        with self._as("query"):
            streamer = load_handler("query", "stream_handler")
            raw = b"".join(streamer(api_event("POST", path, **kwargs), LambdaContext()))
        metadata, delimiter, body = raw.partition(DELIMITER)
        assert delimiter, "no delimiter after the metadata"
        return json.loads(metadata), body

    def put_upload(self, upload: dict[str, Any], data: bytes) -> None:
        """PUT `data` to a presigned upload as a client would (to moto's S3, or to the local store)."""
        status = self.send_upload(upload, data)
        assert status == 200, status

    def send_upload(self, upload: dict[str, Any], data: bytes) -> int:
        """PUT `data` to a presigned upload; the HTTP status S3 (or the local server) answers."""
        if self.kind == "aws":
            return requests.put(upload["url"], data=data, headers=upload["headers"], timeout=10).status_code
        token = upload["url"].rsplit("/", 1)[1]
        try:
            local_blob_store(load_settings()).redeem(token, data, upload["headers"])
        except CitewiseError as exc:
            return exc.http_status
        return 200

    def download(self, download: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
        """GET a presigned download as a browser would: the status, body and (lower-cased) headers."""
        if self.kind == "aws":
            response = requests.get(download["url"], timeout=10)
            return response.status_code, response.content, {k.lower(): v for k, v in response.headers.items()}
        try:
            data, how = local_blob_store(load_settings()).download(download["url"].rsplit("/", 1)[1])
        except CitewiseError as exc:
            return exc.http_status, b"", {}
        return 200, data, {"content-type": how.content_type, "content-disposition": how.content_disposition}

    def put_object(
        self, key: str, data: bytes, *, content_type: str = "text/markdown", owner: str | None = None
    ) -> str:
        """Write an object straight to the bucket (or the local store) as any S3 client might, with no
        precondition; `owner` as the user metadata a presigned upload would carry. Its version."""
        if self.kind == "aws":
            metadata = {"owner": owner} if owner is not None else {}
            response = self.s3.put_object(
                Bucket=BUCKET, Key=key, Body=data, ContentType=content_type, Metadata=metadata
            )
            return str(response["VersionId"])
        tenant_id, path = parse_key(key)
        return local_blob_store(load_settings()).put(tenant_id, path, data, content_type=content_type, owner=owner)

    def read_object(self, key: str) -> bytes:
        """The current bytes of an object in the bucket (or the local store)."""
        if self.kind == "aws":
            return bytes(self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        return local_blob_store(load_settings()).get(*parse_key(key)).load()

    def delete_object(self, key: str, *, version_id: str | None = None) -> None:
        """Delete an object (a delete marker on the versioned bucket), or one version of it on AWS."""
        if self.kind == "aws":
            self.s3.delete_object(Bucket=BUCKET, Key=key, **({"VersionId": version_id} if version_id else {}))
        else:
            local_blob_store(load_settings()).delete(*parse_key(key))

    def ingest(self, *notifications: dict[str, Any] | str) -> dict[str, Any]:
        """Run the ingest function on one SQS batch; returns its partial-failure response."""
        return self.handler("ingest")(sqs_event(*notifications), LambdaContext())

    def upload_and_ingest(self, token_claims: dict[str, str], filename: str, data: bytes, **fields: Any) -> str:
        """The whole upload flow: ask for a URL, PUT the bytes, deliver the S3 event. Returns the doc id."""
        request = {"filename": filename, "content_type": _content_type(filename), "size": len(data), **fields}
        status, upload = self.api("POST", "/v1/uploads", body=request, identity=token_claims)
        assert status == 200, upload
        self.put_upload(upload, data)
        key = f"tenants/{token_claims['custom:tenant_id']}/{filename}"
        assert self.ingest(s3_notification("ObjectCreated:Put", key, size=len(data))) == {"batchItemFailures": []}
        return str(upload["document_id"])


def _content_type(filename: str) -> str:
    return {"md": "text/markdown", "txt": "text/plain", "html": "text/html", "pdf": "application/pdf"}.get(
        filename.rsplit(".", 1)[-1], ""
    )
