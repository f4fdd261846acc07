"""The platform operator: an identity outside every tenant, told from a tenant's on every auth path."""

from __future__ import annotations

import pytest

from citewise.domain.errors import ForbiddenError, UnauthorizedError, ValidationError
from citewise.domain.models import Operator
from citewise.domain.tenancy import caller_from_claims, caller_from_iam, operator_from_claims, operator_from_iam
from citewise.runtime.settings import ApiSettings, load_settings

OPS_ROLE = "arn:aws:iam::123456789012:role/citewise-operator"
OPS_SESSION = "arn:aws:sts::123456789012:assumed-role/citewise-operator/alice"
TENANT_ROLE = "arn:aws:iam::123456789012:role/acme-reader"


@pytest.mark.parametrize("groups", ["operators", "analysts,operators", ["operators"], ["operators", "admin"]])
def test_an_operators_member_without_a_tenant_is_the_operator(groups: object) -> None:
    # Given Cognito claims of a user without custom:tenant_id, in the `operators` group (either form)
    claims = {"sub": "ops-1", "cognito:groups": groups}
    # Then it is the operator
    assert operator_from_claims(claims) == Operator(user_id="ops-1")


@pytest.mark.parametrize(
    "claims",
    [
        # a tenant's admin
        {"sub": "u-1", "custom:tenant_id": "acme", "cognito:groups": "admin"},
        # a tenant's user put in `operators`: its immutable tenant keeps it a tenant identity
        {"sub": "u-1", "custom:tenant_id": "acme", "cognito:groups": "operators"},
        # a tenant claim that is malformed is still a tenant claim
        {"sub": "u-1", "custom:tenant_id": "", "cognito:groups": "operators"},
        # no tenant, but not in the group (or a name merely containing it)
        {"sub": "u-1"},
        {"sub": "u-1", "cognito:groups": "operators-readonly"},
        {"sub": "u-1", "cognito:groups": "[operators]"},
    ],
)
def test_no_tenant_identity_is_the_operator(claims: dict[str, str]) -> None:
    with pytest.raises(ForbiddenError, match="only the platform operator"):
        operator_from_claims(claims)


@pytest.mark.parametrize("claims", [{"cognito:groups": "operators"}, {"sub": "", "cognito:groups": "operators"}])
def test_an_operator_route_without_a_user_is_unauthorized(claims: dict[str, str]) -> None:
    with pytest.raises(UnauthorizedError):
        operator_from_claims(claims)


def test_the_operator_is_refused_on_tenant_routes_with_its_own_reason() -> None:
    # Given the operator's claims
    claims = {"sub": "ops-1", "cognito:groups": "operators"}
    # Then no tenant route takes it: it is no tenant's member
    with pytest.raises(ForbiddenError, match="no member of any tenant"):
        caller_from_claims(claims)


def test_the_operator_claim_name_follows_the_tenant_claim_setting() -> None:
    # Given a deployment whose tenant claim is custom:org, a user carrying it is a tenant identity
    with pytest.raises(ForbiddenError):
        operator_from_claims(
            {"sub": "u", "custom:org": "acme", "cognito:groups": "operators"}, tenant_claim="custom:org"
        )
    # and one without it, in the group, the operator
    assert operator_from_claims({"sub": "u", "cognito:groups": "operators"}, tenant_claim="custom:org").user_id == "u"


def test_iam_operator_principals_by_exact_arn_or_by_role() -> None:
    assert operator_from_iam(OPS_SESSION, (OPS_ROLE,), {}) == Operator(user_id=OPS_SESSION)
    assert operator_from_iam(OPS_ROLE, (OPS_ROLE,), {}) == Operator(user_id=OPS_ROLE)
    with pytest.raises(ForbiddenError):
        operator_from_iam(TENANT_ROLE, (OPS_ROLE,), {TENANT_ROLE: "acme"})
    with pytest.raises(UnauthorizedError):
        operator_from_iam(None, (OPS_ROLE,), {})
    # An operator principal is no tenant member: the tenant routes do not map it
    with pytest.raises(ForbiddenError):
        caller_from_iam(OPS_SESSION, {TENANT_ROLE: "acme"})


def test_a_principal_both_operator_and_tenant_is_refused_twice() -> None:
    # The settings refuse such a map at cold start ...
    with pytest.raises(ValidationError, match="operator principal is not a tenant member"):
        load_settings(ApiSettings, auth_mode="iam", tenant_map={OPS_ROLE: "acme"}, operator_principals=[OPS_ROLE])
    # ... and the identity refuses it should one be built anyway
    with pytest.raises(ForbiddenError):
        operator_from_iam(OPS_SESSION, (OPS_ROLE,), {OPS_ROLE: "acme"})
