"""The Lambda emulator: what AWS hands citewise's functions, and what API Gateway makes of their answers.

One copy, for `citewise serve` (which turns real HTTP requests and uploads into these events for the
real handlers) and for the tests (which drive the same handlers with the same events, on moto or the
local stack), so the shapes the server sends are the shapes the tests check:

- `rest_event`: an API Gateway REST proxy event (payload v1) for any method, resource and body, with the
  Cognito authorizer's claims (`authorizer_claims` renders token claims as API Gateway does) or the
  SigV4 caller of IAM auth in `requestContext.identity`, or neither;
- `http_response`: a Lambda proxy response back as an HTTP status, headers and body, as API Gateway maps
  it (a malformed one is `MalformedProxyResponse`, which API Gateway answers 502);
- `LambdaContext`: the context object a handler (and Powertools) reads;
- `s3_record`, `sqs_record`, `sqs_event`, `Sequencer`: S3 event notifications as the SQS event source
  mapping delivers them to the ingest function.

Pure functions of plain values, standard library only: the execution environments of `citewise serve`
(`citewise_local.lambdaenv`) import `LambdaContext` from here, and their start stays cheap.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote_plus

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
MEMORY_MB = 1024
API_TIMEOUT_S = 24.0
"""The API functions' Lambda timeout (the stack's default): 5 s under API Gateway's 29 s integration timeout."""
INGEST_TIMEOUT_S = 300.0
"""The ingest function's Lambda timeout (the stack's default): one document's ingestion at most."""
STAGE = "local"
API_ID = "citewise-local"
BUCKET = "local"
QUEUE_NAME = "citewise-local-ingest"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{QUEUE_NAME}"

# The claims API Gateway's Cognito authorizer renders as dates (`auth_time` stays a number, as recorded
# in tests/events/apigw_cognito.json); values beyond what a datetime holds stay numbers.
_DATE_CLAIMS = ("exp", "iat")
_MIN_EPOCH = datetime.min.replace(tzinfo=UTC).timestamp()
_MAX_EPOCH = datetime.max.replace(tzinfo=UTC).timestamp()


# --- the Lambda context -------------------------------------------------------------------------------


@dataclass
class LambdaContext:
    """What a handler (and Powertools) reads from the Lambda context object."""

    function_name: str = "citewise"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timeout_s: float = 30.0
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
        # The monotonic clock is the machine's, so the deadline holds in an environment's process too.
        self._deadline = time.monotonic() + self.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout (`citewise serve` stops the invocation then)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


# --- API Gateway (REST API, Lambda proxy integration) ---------------------------------------------------


def authorizer_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """Token claims as API Gateway's Cognito authorizer hands them to a REST integration: every value
    a string, lists comma-joined, booleans in lower case, `exp` and `iat` as dates."""
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
    method: str,
    resource: str,
    *,
    raw_path: str,
    query: str = "",
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    path_parameters: Mapping[str, str] | None = None,
    claims: Mapping[str, str] | None = None,
    iam_arn: str | None = None,
    source_ip: str = "127.0.0.1",
    request_id: str | None = None,
    received: datetime | None = None,
    domain_name: str = "localhost",
    stage: str = STAGE,
) -> dict[str, Any]:
    """The API Gateway REST proxy event (payload v1) of one request to `resource` (the route's template,
    such as `/v1/documents/{id}`) at `raw_path`.

    As API Gateway does: `path` stays percent-encoded while path and query parameters are decoded;
    `headers` and `queryStringParameters` keep the last of repeated values, the `multiValue` forms all;
    absent parts are null; a body that is not UTF-8 travels base64-encoded. `claims` (already rendered,
    see `authorizer_claims`) go to `requestContext.authorizer.claims` as the Cognito authorizer puts
    them; `iam_arn` is the SigV4 caller API Gateway names in `requestContext.identity` under IAM auth.
    """
    request_id = request_id or str(uuid.uuid4())
    received = received or datetime.now(UTC)
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
    request_context: dict[str, Any] = {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": domain_name,
        "domainPrefix": domain_name.split(".", 1)[0],
        "extendedRequestId": request_id,
        "httpMethod": method,
        "identity": _identity(source_ip, next((v for n, v in headers if n.lower() == "user-agent"), None), iam_arn),
        "path": f"/{stage}{raw_path}",
        "protocol": "HTTP/1.1",
        "requestId": request_id,
        "requestTime": received.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "requestTimeEpoch": int(received.timestamp() * 1000),
        "resourceId": hashlib.sha256(resource.encode()).hexdigest()[:6],
        "resourcePath": resource,
        "stage": stage,
    }
    if claims is not None:
        request_context["authorizer"] = {"claims": dict(claims)}
    return {
        "resource": resource,
        "path": raw_path,
        "httpMethod": method,
        "headers": single_headers,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": dict(pairs) or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": dict(path_parameters or {}) or None,
        "stageVariables": None,
        "requestContext": request_context,
        "body": text,
        "isBase64Encoded": encoded,
    }


def _identity(source_ip: str, user_agent: str | None, iam_arn: str | None) -> dict[str, Any]:
    """`requestContext.identity`: who called, as API Gateway saw it (a SigV4 caller only under IAM auth)."""
    principal = iam_arn.rsplit("/", 1)[-1] if iam_arn else None
    return {
        "accessKey": "ASIACITEWISELOCAL" if iam_arn else None,
        "accountId": iam_arn.split(":")[4] if iam_arn and iam_arn.count(":") >= 5 else None,
        "caller": principal,
        "cognitoAuthenticationProvider": None,
        "cognitoAuthenticationType": None,
        "cognitoIdentityId": None,
        "cognitoIdentityPoolId": None,
        "principalOrgId": None,
        "sourceIp": source_ip,
        "user": principal,
        "userAgent": user_agent,
        "userArn": iam_arn,
    }


class MalformedProxyResponseError(ValueError):
    """A Lambda proxy response API Gateway cannot map (no integer `statusCode`): it answers 502."""


@dataclass(frozen=True)
class HttpResponse:
    """An HTTP response as API Gateway sends it for a Lambda proxy response."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON; None when it is empty."""
        return json.loads(self.body) if self.body else None


def http_response(response: Any) -> HttpResponse:
    """The HTTP response of a Lambda proxy response: `body` base64-decoded when `isBase64Encoded`, and
    `headers` merged into `multiValueHeaders` (a name in both keeps the multi values), as API Gateway
    does. MalformedProxyResponseError if it is not a proxy response."""
    if not isinstance(response, dict) or not isinstance(response.get("statusCode"), int):
        raise MalformedProxyResponseError("the function's answer is not a Lambda proxy response")
    text = response.get("body") or ""
    data = base64.b64decode(text) if response.get("isBase64Encoded") else str(text).encode()
    multi: dict[str, list[str]] = response.get("multiValueHeaders") or {}
    multi_names = {name.lower() for name in multi}
    headers = [(name, str(value)) for name, value in (response.get("headers") or {}).items()]
    headers = [(name, value) for name, value in headers if name.lower() not in multi_names]
    headers += [(name, str(value)) for name, values in multi.items() for value in values]
    return HttpResponse(response["statusCode"], headers, data)


# --- S3 notifications through SQS -----------------------------------------------------------------------


def s3_record(
    event_name: str,
    key: str,
    *,
    sequencer: str,
    size: int | None = None,
    etag: str | None = None,
    version_id: str | None = None,
    event_time: datetime | None = None,
    source_ip: str = "127.0.0.1",
    request_id: str | None = None,
    bucket: str = BUCKET,
) -> dict[str, Any]:
    """One record of an S3 event notification (`ObjectCreated:*`, `ObjectRemoved:*`) for `key`, which is
    URL-encoded here as S3 sends it (`quote_plus`, `/` kept). A created object's record has its `size`
    and `eTag`; a removed object's has neither, as S3's has not. `versionId` only on a versioned bucket."""
    created = event_name.startswith("ObjectCreated:")
    if created and (size is None or etag is None):
        raise ValueError("the record of a created object needs its size and ETag")
    event_time = event_time or datetime.now(UTC)
    request_id = request_id or uuid.uuid4().hex.upper()[:16]
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": REGION,
        "eventTime": event_time.strftime("%Y-%m-%dT%H:%M:%S.") + f"{event_time.microsecond // 1000:03d}Z",
        "eventName": event_name,
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
                "key": quote_plus(key, safe="/"),
                **({"size": size, "eTag": etag} if created else {}),
                **({"versionId": version_id} if version_id is not None else {}),
                "sequencer": sequencer,
            },
        },
    }


@dataclass(frozen=True)
class QueuedMessage:
    """A message on an SQS queue: its id, body (an S3 notification as JSON) and send time."""

    message_id: str
    body: str
    sent_ms: int


def sqs_record(
    message: QueuedMessage,
    *,
    receive_count: int = 1,
    first_receive_ms: int | None = None,
    receipt_handle: str | None = None,
    queue_arn: str = QUEUE_ARN,
) -> dict[str, Any]:
    """The record of the `receive_count`-th receive of `message` in an SQS event."""
    return {
        "messageId": message.message_id,
        # A new receipt handle per receive, as SQS gives.
        "receiptHandle": receipt_handle or _b64(f"{message.message_id}/{receive_count}".encode()),
        "body": message.body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": str(message.sent_ms),
            "SenderId": "AROACITEWISELOCALS3",
            "ApproximateFirstReceiveTimestamp": str(first_receive_ms or message.sent_ms),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(message.body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": queue_arn.split(":")[3],
    }


def sqs_event(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The event of one batch the SQS event source mapping hands the function (records of `sqs_record`)."""
    return {"Records": list(records)}


class Sequencer:
    """S3-like event sequencers: fixed-width upper-case hex that only increases, also across restarts
    (they start from the clock), as S3's do for one key. Nothing in citewise orders events by them (the
    ingest function reconciles each event with the object's current state); they keep the shape real."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            self._last = max(self._last + 1, self._clock())
            return f"{self._last:018X}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
