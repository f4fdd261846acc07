"""The local server's route matching, and the Lambda emulator it shares with the tests: claims as API
Gateway renders them, and the S3 / SQS / API Gateway events, checked against Powertools' models of the
real events and against the recorded ones in tests/events."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote_plus

import pytest
from aws_lambda_powertools.utilities.parser.models import (
    APIGatewayProxyEventModel,
    S3SqsEventNotificationModel,
)

from citewise.api.routes import ROUTES, Route, allowed_methods
from citewise.domain.errors import ValidationError
from citewise.domain.tenancy import caller_from_claims
from citewise.ports.blobstore import key_to_location, object_key
from citewise_local.emulator import (
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
from citewise_local.server import match_route


@pytest.mark.parametrize(
    ("method", "path", "expected", "parameters"),
    [
        ("POST", "/v1/query", "/v1/query", {}),
        ("GET", "/v1/documents", "/v1/documents", {}),
        ("GET", "/v1/documents/abc123", "/v1/documents/{id}", {"id": "abc123"}),
        ("DELETE", "/v1/documents/a%20b%2Fc", "/v1/documents/{id}", {"id": "a b/c"}),
        ("GET", "/v1/openapi.json", "/v1/openapi.json", {}),
    ],
)
def test_routes_match_with_decoded_parameters(
    method: str, path: str, expected: str, parameters: dict[str, str]
) -> None:
    matched = match_route(method, path)
    assert matched is not None
    route, found = matched
    assert (route.method, route.path, found) == (method, expected, parameters)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/query"),  # known path, other method
        ("PUT", "/v1/documents/abc"),
        ("GET", "/v1/documents/"),  # empty parameter
        ("GET", "/v1/documents/abc/extra"),
        ("GET", "/v1/nothing"),
        ("GET", "/"),
    ],
)
def test_unknown_paths_and_methods_match_nothing(method: str, path: str) -> None:
    assert match_route(method, path) is None


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/query", ("POST",)),
        ("/v1/documents", ("GET",)),
        ("/v1/documents/abc", ("DELETE", "GET")),
        ("/v1/documents/", ()),
        ("/v1/nothing", ()),
    ],
)
def test_the_methods_a_path_allows_are_those_its_routes_declare(path: str, allowed: tuple[str, ...]) -> None:
    assert allowed_methods(path) == allowed


def test_every_route_of_the_table_is_reachable() -> None:
    for route in ROUTES:
        path = route.path.replace("{id}", "x1")
        matched = match_route(route.method, path)
        assert matched is not None and matched[0] == route


def test_claims_are_rendered_as_api_gateway_renders_them() -> None:
    # Given decoded token claims (numbers, a list, a boolean)
    claims = {
        "sub": "alice",
        "custom:tenant_id": "acme",
        "cognito:groups": ["admins", "readers"],
        "email_verified": True,
        "iat": 1469814773,
        "exp": 1469818373,
    }
    rendered = authorizer_claims(claims)
    # Then every value is a string, groups comma-joined and times as dates
    assert rendered == {
        "sub": "alice",
        "custom:tenant_id": "acme",
        "cognito:groups": "admins,readers",
        "email_verified": "true",
        "iat": "Fri Jul 29 17:52:53 UTC 2016",
        "exp": "Fri Jul 29 18:52:53 UTC 2016",
    }
    # And the tenancy module reads the same caller from them as from the token
    caller = caller_from_claims(rendered)
    assert (caller.tenant_id, caller.user_id, caller.groups) == ("acme", "alice", ("admins", "readers"))


@pytest.mark.parametrize("exp", [10**20, -(10**20), 1e300])
def test_a_time_claim_that_is_no_date_stays_a_number_instead_of_overflowing(exp: float) -> None:
    rendered = authorizer_claims({"sub": "alice", "exp": exp, "iat": 1469814773})
    assert rendered["exp"] == str(exp)
    assert rendered["iat"] == "Fri Jul 29 17:52:53 UTC 2016"


def _event(**overrides: object) -> dict[str, object]:
    arguments: dict[str, object] = {
        "raw_path": "/v1/documents/a%20b",
        "query": "limit=5&tag=x&tag=y&empty=",
        "headers": [("Host", "127.0.0.1:8080"), ("User-Agent", "tests/1"), ("X-Twice", "1"), ("X-Twice", "2")],
        "body": b"",
        "path_parameters": {"id": "a b"},
        "claims": {"sub": "alice", "custom:tenant_id": "acme"},
        "source_ip": "127.0.0.1",
        "request_id": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
        "received": datetime(2026, 3, 4, 19, 15, 17, 135000, tzinfo=UTC),
        "domain_name": "127.0.0.1",
    }
    route = Route("GET", "/v1/documents/{id}", "documents")
    return rest_event(route.method, route.path, **(arguments | overrides))  # type: ignore[arg-type]


def test_the_rest_event_has_the_shape_api_gateway_sends() -> None:
    event = _event()
    # Then Powertools' model of the real event accepts it
    model = APIGatewayProxyEventModel.model_validate(event)
    assert model.requestContext.authorizer is not None
    assert model.requestContext.authorizer.claims == {"sub": "alice", "custom:tenant_id": "acme"}
    # And each part is where API Gateway puts it
    assert event["resource"] == "/v1/documents/{id}"
    assert event["path"] == "/v1/documents/a%20b"
    assert event["pathParameters"] == {"id": "a b"}
    assert event["queryStringParameters"] == {"limit": "5", "tag": "y", "empty": ""}
    assert event["multiValueQueryStringParameters"] == {"limit": ["5"], "tag": ["x", "y"], "empty": [""]}
    assert event["headers"]["X-Twice"] == "2"  # type: ignore[index]
    assert event["multiValueHeaders"]["X-Twice"] == ["1", "2"]  # type: ignore[index]
    assert event["body"] is None and event["isBase64Encoded"] is False
    assert event["stageVariables"] is None
    context = event["requestContext"]
    assert isinstance(context, dict)
    assert context["path"] == "/local/v1/documents/a%20b"
    assert context["resourcePath"] == "/v1/documents/{id}"
    assert context["httpMethod"] == "GET"
    assert context["stage"] == "local"
    assert context["requestTimeEpoch"] == 1772651717135
    assert context["requestTime"] == "04/Mar/2026:19:15:17 +0000"
    assert context["identity"]["sourceIp"] == "127.0.0.1"
    assert context["identity"]["userAgent"] == "tests/1"


def test_an_unauthenticated_route_has_no_authorizer_and_absent_parts_are_null() -> None:
    event = _event(claims=None, query="", path_parameters={})
    APIGatewayProxyEventModel.model_validate(event)
    assert "authorizer" not in event["requestContext"]  # type: ignore[operator]
    assert event["queryStringParameters"] is None
    assert event["multiValueQueryStringParameters"] is None
    assert event["pathParameters"] is None


def test_a_body_travels_as_text_or_else_base64() -> None:
    text = _event(body='{"question": "où?"}'.encode())
    assert (text["body"], text["isBase64Encoded"]) == ('{"question": "où?"}', False)
    binary = _event(body=b"\xff\xfe\x00")
    assert (binary["body"], binary["isBase64Encoded"]) == ("//4A", True)


def test_the_s3_notification_in_an_sqs_message_has_the_real_shape() -> None:
    # Given the record of an upload whose path needs URL-encoding
    record = s3_record(
        "ObjectCreated:Put",
        object_key("acme", "reports/Q1 plan+notes.pdf"),
        size=1234,
        etag="0cc175b9c0f1b6a831c399e269772661",
        sequencer="0000000000000000AB",
        event_time=datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        source_ip="127.0.0.1",
        request_id="req-1",
    )
    message = QueuedMessage("m-1", json.dumps({"Records": [record]}), 1_700_000_000_000)
    event = sqs_event([sqs_record(message, receive_count=2, first_receive_ms=1_700_000_000_500)])
    # Then Powertools' model of S3 notifications delivered by SQS accepts it
    parsed = S3SqsEventNotificationModel.model_validate(event)
    delivered = parsed.Records[0]
    s3 = delivered.body.Records[0]
    assert s3.eventName == "ObjectCreated:Put"
    assert s3.s3.bucket.name == "local"
    assert s3.s3.object is not None
    assert s3.s3.object.key == "tenants/acme/reports/Q1+plan%2Bnotes.pdf"
    assert s3.s3.object.size == 1234
    assert s3.s3.object.eTag == "0cc175b9c0f1b6a831c399e269772661"
    assert s3.s3.object.versionId is None
    assert s3.eventTime == datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert delivered.attributes.ApproximateReceiveCount == "2"
    assert delivered.messageId == "m-1"
    # And the key decodes back to the tenant and path, as the ingest handler reads it
    assert key_to_location(s3.s3.object.key) == ("acme", "reports/Q1 plan+notes.pdf")


def test_an_s3_record_refuses_a_path_outside_the_layout() -> None:
    with pytest.raises(ValidationError):
        s3_record(
            "ObjectCreated:Put",
            object_key("acme", "../escape"),
            size=1,
            etag="x",
            sequencer="1",
            event_time=datetime.now(UTC),
            source_ip="127.0.0.1",
            request_id="r",
        )


def test_a_removed_object_s_record_has_no_size_or_etag_and_a_created_one_needs_both() -> None:
    def record(event_name: Literal["ObjectCreated:Put", "ObjectRemoved:Delete"], size: int | None) -> dict[str, Any]:
        return s3_record(
            event_name,
            object_key("acme", "it.md"),
            size=size,
            sequencer="1",
            event_time=datetime.now(UTC),
            source_ip="127.0.0.1",
            request_id="r",
        )

    removed = record("ObjectRemoved:Delete", None)
    assert removed["s3"]["object"] == {"key": "tenants/acme/it.md", "sequencer": "1"}
    message = QueuedMessage("m-1", json.dumps({"Records": [removed]}), 1_700_000_000_000)
    parsed = S3SqsEventNotificationModel.model_validate(
        sqs_event([sqs_record(message, receive_count=1, first_receive_ms=1)])
    )
    assert parsed.Records[0].body.Records[0].eventName == "ObjectRemoved:Delete"
    with pytest.raises(ValueError, match="size and ETag"):
        record("ObjectCreated:Put", 1)


def test_each_receive_has_its_own_receipt_handle_and_count() -> None:
    message = QueuedMessage("m-1", "{}", 1)
    first, second = (sqs_record(message, receive_count=n, first_receive_ms=2) for n in (1, 2))
    assert first["receiptHandle"] != second["receiptHandle"]
    assert (first["attributes"]["ApproximateReceiveCount"], second["attributes"]["ApproximateReceiveCount"]) == (
        "1",
        "2",
    )
    assert first["md5OfBody"] == "99914b932bd37a50b983c5e7c90ae93b"  # MD5 of "{}"


def test_sequencers_are_fixed_width_and_increase_even_when_the_clock_does_not() -> None:
    frozen = Sequencer(clock=lambda: 5)
    values = [frozen.next() for _ in range(3)]
    assert values == ["000000000000000005", "000000000000000006", "000000000000000007"]
    real = Sequencer()
    later = [real.next() for _ in range(50)]
    assert later == sorted(later) and len(set(later)) == 50
    assert all(len(value) == 18 for value in later)
    # A restarted server starts from the clock, after what an earlier one issued
    time.sleep(0.001)
    assert Sequencer().next() > later[-1]


# --- the emulator against the recorded events --------------------------------------------------------

EVENTS = Path(__file__).resolve().parents[1] / "events"


def recorded(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


def shape(value: Any) -> Any:
    """The keys of `value` at every level of nesting (what a handler could look up), without the values."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return type(value).__name__ if value is not None else None


def replayed(real: dict[str, Any], **identity: Any) -> dict[str, Any]:
    """The emulator's event for the request of the recorded event `real`, from the caller `identity`."""
    return rest_event(
        real["httpMethod"],
        real["resource"],
        raw_path=real["path"],
        headers=list(real["headers"].items()),
        body=real["body"].encode(),
        stage=real["requestContext"]["stage"],
        **identity,
    )


def test_a_cognito_request_has_the_recorded_events_parts_where_it_has_them() -> None:
    # Given the recorded event of a Cognito-authenticated POST /v1/query and the emulator's for the same
    real = recorded("apigw_cognito.json")
    emulated = replayed(real, claims=real["requestContext"]["authorizer"]["claims"])
    # Then both have the same parts at every level (values aside), and the same request
    assert shape(emulated) == shape(real)
    for part in ("resource", "path", "httpMethod", "headers", "multiValueHeaders", "body", "isBase64Encoded"):
        assert emulated[part] == real[part], part
    assert emulated["requestContext"]["authorizer"] == real["requestContext"]["authorizer"]
    assert emulated["requestContext"]["path"] == real["requestContext"]["path"]


def test_an_iam_request_names_its_sigv4_caller_as_the_recorded_event_does() -> None:
    # Given the recorded event of a SigV4-signed POST /v1/search and the emulator's for the same caller
    real = recorded("apigw_iam.json")
    emulated = replayed(real, iam_arn=real["requestContext"]["identity"]["userArn"])
    # Then the parts match the recording (an IAM request has no authorizer), and so does who called
    assert shape(emulated) == shape(real)
    assert "authorizer" not in emulated["requestContext"]
    identity, real_identity = emulated["requestContext"]["identity"], real["requestContext"]["identity"]
    assert (identity["userArn"], identity["accountId"]) == (real_identity["userArn"], real_identity["accountId"])
    assert identity["cognitoIdentityId"] is None and identity["accessKey"] is not None
    APIGatewayProxyEventModel.model_validate(emulated)
    # And without a caller there is no identity at all
    anonymous = rest_event("GET", "/v1/health", raw_path="/v1/health")["requestContext"]["identity"]
    assert (anonymous["userArn"], anonymous["accountId"], anonymous["accessKey"]) == (None, None, None)


def test_an_s3_notification_through_sqs_has_the_recorded_events_parts() -> None:
    # Given the recorded SQS delivery of an ObjectCreated:Put on a versioned bucket, and the emulator's
    real = recorded("sqs_s3_put.json")
    [real_s3] = json.loads(real["Records"][0]["body"])["Records"]
    obj = real_s3["s3"]["object"]
    record = s3_record(
        real_s3["eventName"],
        unquote_plus(obj["key"]),
        size=obj["size"],
        etag=obj["eTag"],
        version_id=obj["versionId"],
        sequencer=obj["sequencer"],
        bucket=real_s3["s3"]["bucket"]["name"],
    )
    message = QueuedMessage("m-1", json.dumps({"Records": [record]}), 1_795_439_126_223)
    event = sqs_event([sqs_record(message, queue_arn=real["Records"][0]["eventSourceARN"])])
    # Then the SQS record, the S3 record and the object carry the same parts as the recording
    [delivered] = event["Records"]
    assert shape({k: v for k, v in delivered.items() if k != "body"}) == shape(
        {k: v for k, v in real["Records"][0].items() if k != "body"}
    )
    assert shape(record) == shape(real_s3)
    assert record["s3"]["object"] == obj
    assert delivered["eventSourceARN"] == real["Records"][0]["eventSourceARN"]


def test_a_proxy_response_becomes_the_http_response_api_gateway_sends() -> None:
    # Given a proxy response with a base64 body and a header both single and multi-valued
    response = {
        "statusCode": 201,
        "headers": {"Content-Type": "application/octet-stream", "Allow": "GET"},
        "multiValueHeaders": {"allow": ["GET", "DELETE"], "Set-Cookie": ["a=1", "b=2"]},
        "body": "//4A",
        "isBase64Encoded": True,
    }
    mapped = http_response(response)
    # Then the body is decoded and a name in both header forms keeps the multi values
    assert (mapped.status, mapped.body) == (201, b"\xff\xfe\x00")
    assert mapped.headers == [
        ("Content-Type", "application/octet-stream"),
        ("allow", "GET"),
        ("allow", "DELETE"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
    ]
    # And a JSON body reads back as JSON, an empty one as None
    assert http_response({"statusCode": 200, "body": '{"ok": true}'}).json() == {"ok": True}
    assert http_response({"statusCode": 204, "body": None}).json() is None


@pytest.mark.parametrize("response", [None, "text", {"body": "{}"}, {"statusCode": "200"}])
def test_an_answer_that_is_no_proxy_response_is_malformed(response: Any) -> None:
    with pytest.raises(MalformedProxyResponseError):
        http_response(response)
