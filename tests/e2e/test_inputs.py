"""No input is a 5xx over HTTP either: `citewise serve` answers bad bodies, methods, media types and tokens
with a 4xx in the one error shape, as the handlers behind it do."""

from __future__ import annotations

import subprocess
import time
import uuid
from typing import Any

import jwt
import pytest

from citewise_local.auth import ISSUER, TOKEN_PURPOSE, local_key
from tests.e2e.helpers import Api, Reply, citewise_script


def _token(api: Api) -> str:
    return api.token(f"t-{uuid.uuid4().hex[:12]}", "alice")


def _error(reply: Reply, status: int, code: str) -> dict[str, Any]:
    assert reply.status == status, reply.body
    assert reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert (error["code"], error["request_id"]) == (code, reply.headers["x-amzn-requestid"])
    return dict(error)


def _signed(api: Api, **claims: Any) -> str:
    """A token signed with the server's own key, holding claims `citewise token` never writes."""
    now = int(time.time())
    base = {"sub": "alice", "custom:tenant_id": "acme", "token_use": "id", "iss": ISSUER, "iat": now, "exp": now + 60}
    return jwt.encode(base | claims, local_key(api.home, TOKEN_PURPOSE), algorithm="HS256")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/query", "POST"),
        ("PATCH", f"/v1/documents/{'0' * 32}", "DELETE, GET"),
        ("POST", "/v1/health", "GET"),
    ],
)
def test_an_undeclared_method_on_a_known_path_is_405_with_allow(api: Api, method: str, path: str, allowed: str) -> None:
    reply = api.request(method, path, token=_token(api), json_body={"query": "x"})
    error = _error(reply, 405, "METHOD_NOT_ALLOWED")
    assert reply.headers["allow"] == allowed
    assert error["details"]["allowed"] == allowed.split(", ")


@pytest.mark.parametrize("content_type", ["Application/JSON", "APPLICATION/JSON; Charset=utf-8"])
def test_json_is_json_in_any_letter_case(api: Api, content_type: str) -> None:
    body = b'{"filename": "notes/a.md", "content_type": "text/markdown", "size": 3}'
    headers = {"Content-Type": content_type}
    reply = api.request("POST", "/v1/uploads", token=_token(api), data=body, headers=headers)
    assert reply.status == 200, reply.body


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        (b"filename=a.md&content_type=text%2Fmarkdown&size=3", "application/x-www-form-urlencoded"),
        (
            b'--b\r\nContent-Disposition: form-data; name="filename"\r\n\r\na.md\r\n--b--\r\n',
            "multipart/form-data; boundary=b",
        ),
    ],
)
def test_a_form_or_multipart_body_is_415(api: Api, data: bytes, content_type: str) -> None:
    reply = api.request("POST", "/v1/uploads", token=_token(api), data=data, headers={"Content-Type": content_type})
    _error(reply, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize(
    "data",
    [
        b'{"query": "x", "top_k": ' + b"9" * 5000 + b"}",
        b'{"query": "x", "filters": {"equals": {"key": "year", "value": ' + b"9" * 5000 + b"}}}",
        b'{"query": "x", "filters": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"query": "x", "filters": {"in": {"key": "k", "value": 1e400}}}',
    ],
    ids=["huge-top-k", "huge-filter-value", "deep", "infinite"],
)
def test_a_body_no_route_could_take_is_a_validation_error(api: Api, data: bytes) -> None:
    headers = {"Content-Type": "application/json"}
    _error(api.request("POST", "/v1/search", token=_token(api), data=data, headers=headers), 400, "VALIDATION_ERROR")


@pytest.mark.parametrize(
    ("claims", "problem"),
    [({"exp": 10**20}, "expires more than"), ({"sub": "u" * 300}, "user id"), ({"sub": "alice\u0007"}, "user id")],
    ids=["far-exp", "long-sub", "control-sub"],
)
def test_a_token_with_claims_no_identity_can_have_is_401(api: Api, claims: dict[str, Any], problem: str) -> None:
    reply = api.request("GET", "/v1/documents", token=_signed(api, **claims))
    assert problem in _error(reply, 401, "UNAUTHORIZED")["message"]


@pytest.mark.parametrize("group", ["ops admin", "[admin]", "a,b"])
def test_citewise_token_refuses_a_group_name_a_parser_could_misread(api: Api, group: str) -> None:
    done = subprocess.run(  # noqa: S603 - our own console script
        [citewise_script(), "token", "--tenant", "acme", "--user", "alice", "--group", group],
        env=api.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and not done.stdout
    assert "group names" in done.stderr


@pytest.mark.parametrize(
    ("filename", "reason"),
    [
        ("x" * 246 + ".md", "longer than 200 bytes"),  # a file may hold it; its temporary file may not
        ("reports/" + "x" * 300 + "/a.md", "longer than 200 bytes"),  # no file may hold it: was an OSError
        ("j\u0456ra/PROJ-7.md", "mixes the scripts CYRILLIC, LATIN"),
        ("a\u009b31mb.md", "U+009B"),
    ],
    ids=["246-byte name", "300-byte folder", "homoglyph", "C1 control"],
)
def test_a_name_the_naming_policy_refuses_is_a_400_at_presign(api: Api, filename: str, reason: str) -> None:
    # Given a tenant that already holds a document (its folder exists)
    token = _token(api)
    body = {"filename": "a.md", "content_type": "text/markdown", "size": 1}
    assert api.request("POST", "/v1/uploads", token=token, json_body=body).status == 200
    # When an upload is asked for under a name the policy refuses
    reply = api.request("POST", "/v1/uploads", token=token, json_body=body | {"filename": filename})
    # Then it is a validation error that says why, never a 500
    error = _error(reply, 400, "VALIDATION_ERROR")
    assert error["message"].startswith("invalid document path: ") and reason in error["message"]
