"""The Caller comes from the authenticated identity only; errors become one stable body."""

from __future__ import annotations

import pytest

from citewise.domain.errors import ForbiddenError, NotFoundError, UnauthorizedError, ValidationError, error_body
from citewise.domain.models import Caller
from citewise.domain.tenancy import caller_from_claims, caller_from_iam, validate_path, validate_tenant_id

ROLE = "arn:aws:iam::123456789012:role/acme-reader"
SESSION = "arn:aws:sts::123456789012:assumed-role/acme-reader/ci-run-7"


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        # API Gateway's REST form: one name, or names joined with commas
        ("admins", ("admins",)),
        ("admins,readers", ("admins", "readers")),
        # a decoded token's list
        (["admins", "readers"], ("admins", "readers")),
        (None, ()),
        ("", ()),
    ],
)
def test_cognito_claims_give_the_caller(groups: object, expected: tuple[str, ...]) -> None:
    claims = {"sub": "u-1", "custom:tenant_id": "acme", "cognito:groups": groups}
    assert caller_from_claims(claims) == Caller(tenant_id="acme", user_id="u-1", groups=expected)


@pytest.mark.parametrize("groups", ["ops admin", "[admin]", "admin]", "[admin", " admin", "admin ", ["ops admin"], 7])
def test_a_group_is_admin_only_when_its_name_is_exactly_admin(groups: object) -> None:
    # Given a cognito:groups claim whose only name merely contains `admin`
    claims = {"sub": "u-1", "custom:tenant_id": "acme", "cognito:groups": groups}
    # Then no group of the caller is `admin`
    assert "admin" not in caller_from_claims(claims).groups


@pytest.mark.parametrize("user", ["u" * 257, "alice\nbob", "\x00", "tab\tbed"])
def test_a_user_id_the_models_cannot_hold_is_no_identity(user: str) -> None:
    with pytest.raises(UnauthorizedError, match="user id"):
        caller_from_claims({"sub": user, "custom:tenant_id": "acme"})
    with pytest.raises(UnauthorizedError, match="user id"):
        caller_from_iam(user, {user: "acme"})


def test_a_long_iam_user_arn_with_a_path_is_refused_not_crashed() -> None:
    arn = "arn:aws:iam::123456789012:user/" + "division/" * 30 + "ops"
    with pytest.raises(UnauthorizedError):
        caller_from_iam(arn, {arn: "acme"})


@pytest.mark.parametrize(
    ("claims", "error"),
    [
        ({}, UnauthorizedError),
        ({"custom:tenant_id": "acme"}, UnauthorizedError),
        ({"sub": "u-1"}, ForbiddenError),
        ({"sub": "u-1", "custom:tenant_id": "a/b"}, ForbiddenError),
        ({"sub": "u-1", "custom:tenant_id": "*"}, ForbiddenError),
    ],
)
def test_claims_without_a_user_or_a_valid_tenant_are_refused(claims: dict[str, str], error: type) -> None:
    with pytest.raises(error):
        caller_from_claims(claims)


def test_iam_principals_map_to_tenants_by_exact_arn_or_by_role() -> None:
    tenants = {ROLE: "acme", "arn:aws:iam::123456789012:user/ops": "globex"}
    assert caller_from_iam(SESSION, tenants) == Caller(tenant_id="acme", user_id=SESSION)
    assert caller_from_iam("arn:aws:iam::123456789012:user/ops", tenants).tenant_id == "globex"
    with pytest.raises(ForbiddenError):
        caller_from_iam("arn:aws:sts::123456789012:assumed-role/other/x", tenants)
    with pytest.raises(UnauthorizedError):
        caller_from_iam(None, tenants)


@pytest.mark.parametrize("path", ["../x.md", "a/../../b", "/etc/passwd", "a//b", "a\\b", "", "x\x00y", "é" * 500])
def test_paths_that_could_escape_their_prefix_are_refused(path: str) -> None:
    with pytest.raises(ValidationError):
        validate_path(path)


@pytest.mark.parametrize("tenant", ["a/b", "*", "", ".hidden", "x" * 65, "tenant id"])
def test_tenant_ids_that_could_reach_another_prefix_are_refused(tenant: str) -> None:
    with pytest.raises(ValidationError):
        validate_tenant_id(tenant)


def test_errors_have_one_body_and_internal_errors_reveal_nothing() -> None:
    status, body = error_body(NotFoundError("no document 'x'", details={"id": "x"}), "req-1")
    assert (status, body) == (
        404,
        {"error": {"code": "NOT_FOUND", "message": "no document 'x'", "details": {"id": "x"}, "request_id": "req-1"}},
    )
    status, body = error_body(KeyError("secret internals"), "req-2")
    assert status == 500
    assert body == {
        "error": {
            "code": "INTERNAL_ERROR",
            "message": "an internal error occurred",
            "details": {},
            "request_id": "req-2",
        }
    }
