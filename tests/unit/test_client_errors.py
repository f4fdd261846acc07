"""How `citewise.client` reads a failed response: the API's JSON error body, S3's XML error of an upload
PUT, or anything else by its status; and which errors are worth retrying."""

from __future__ import annotations

import json

import pytest

from citewise.client import CitewiseClient, CitewiseClientError, _api_error, guess_content_type


def test_the_api_error_body_gives_code_message_details_and_request_id() -> None:
    body = {"error": {"code": "CONFLICT", "message": "taken", "details": {"id": "x"}, "request_id": "r-1"}}
    error = _api_error(409, json.dumps(body).encode(), "application/json")
    assert (error.code, error.message, error.status, error.details, error.request_id) == (
        "CONFLICT",
        "taken",
        409,
        {"id": "x"},
        "r-1",
    )
    assert str(error) == "CONFLICT: taken (request r-1)" and not error.retryable


def test_an_s3_xml_error_of_an_upload_put_is_read_as_s3_wrote_it() -> None:
    xml = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>'
        b"<Message>the path changed</Message><RequestId>s3-7</RequestId></Error>"
    )
    error = _api_error(412, xml, "application/xml")
    assert (error.code, error.message, error.status, error.request_id) == (
        "PreconditionFailed",
        "the path changed",
        412,
        "s3-7",
    )


@pytest.mark.parametrize(("status", "retryable"), [(502, True), (429, True), (400, False)])
def test_any_other_body_keeps_its_status(status: int, retryable: bool) -> None:
    error = _api_error(status, b"<html>Bad Gateway</html>", "text/html")
    assert (error.code, error.status, error.retryable) == (f"HTTP_{status}", status, retryable)
    assert isinstance(error, CitewiseClientError) and error.request_id is None


def test_the_base_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        CitewiseClient("ftp://example.com", "t")


def test_content_types_come_from_the_extension() -> None:
    assert [guess_content_type(n) for n in ("a.md", "b.PDF", "c.unknownext")] == [
        "text/markdown",
        "application/pdf",
        "application/octet-stream",
    ]
