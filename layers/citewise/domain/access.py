"""The one access rule: who may read, and who may modify, a document of a tenant.

Every entry point asks these two predicates and nothing else: the API (read, delete, upload requests), the
CLI, ingestion (is the object that landed signed for the document it would replace, and is a sidecar
signed for its document) and the retrieval filters, which express `may_read` as an index query.

- read: the document is in the caller's tenant, and it is shared or the caller owns it;
- modify (replace its content or metadata, delete it): the caller may read it and owns it or is a member
  of the tenant's `admin` group. A private document of someone else is unreadable, so not even an admin
  may modify it: privacy within a tenant holds against its admins too.
- configure the tenant (its settings document: ranking signals, routing vocabulary): members of the
  tenant's `admin` group only; every member may read it (it shapes the rankings they see). The tenant's
  usage and its cost are its admins' to read.
- write anything (upload, delete, settings): every identity except a read-only credential of a program
  (`Caller.read_only`, `citewise.domain.credentials`), which reads what its user reads and changes
  nothing: `may_modify` and `may_configure` include `may_write`, and `require_write` refuses with 403.
- the platform operator (`Operator`, the `/v1/admin/` routes) is no member of any tenant: these
  predicates never see it, and it reads no document.
"""

from __future__ import annotations

from typing import Protocol

from citewise.domain.errors import ForbiddenError
from citewise.domain.models import Caller, Visibility

ADMIN_GROUP = "admin"
"""The Cognito group (or local token group) whose members may modify any readable document of the tenant."""
OPERATOR_GROUP = "operators"
"""The Cognito group (or local token group) of the platform operator. It makes an operator only of an
identity without a tenant (`citewise.domain.tenancy.operator_from_claims`): a tenant's user put in it
stays a tenant identity, refused on the operator routes."""


class Owned(Protocol):
    """Anything with the access facts of a document: a registry record, a stored object."""

    @property
    def tenant_id(self) -> str: ...

    @property
    def owner(self) -> str: ...

    @property
    def visibility(self) -> Visibility: ...


def may_read(caller: Caller, document: Owned) -> bool:
    """Shared documents of the caller's tenant, and the caller's own private ones."""
    return document.tenant_id == caller.tenant_id and (
        document.visibility is Visibility.SHARED or document.owner == caller.user_id
    )


def may_write(caller: Caller) -> bool:
    """Whether the caller may change anything at all: every identity but a read-only credential."""
    return not caller.read_only


def require_write(caller: Caller) -> None:
    """ForbiddenError (403) for a read-only credential; what every write asks first."""
    if not may_write(caller):
        raise ForbiddenError(
            "this credential is read-only: it may query, search and read documents, and change nothing",
            details={"scope": "read"},
        )


def may_modify(caller: Caller, document: Owned) -> bool:
    """A readable document the caller owns, or any readable one for a member of the admin group; never
    for a read-only credential."""
    return (
        may_write(caller)
        and may_read(caller, document)
        and (document.owner == caller.user_id or ADMIN_GROUP in caller.groups)
    )


def object_writer(item: Owned) -> Caller:
    """The identity a stored object writes with: the owner it was signed for, and no groups.

    An upload for an existing document is signed with that document's owner (a tenant admin's replacement
    included: it changes the content, not whose document it is), so the signature alone carries the
    right to modify; no group membership is frozen into a URL. Built without validation: an object
    written by another S3 client may carry any owner string, and it is only ever compared.
    """
    return Caller.model_construct(tenant_id=item.tenant_id, user_id=item.owner, groups=())


def may_configure(caller: Caller) -> bool:
    """Whether the caller may change its tenant's settings, read its usage, or manage its credentials: a
    member of the tenant's admin group. A credential has no groups, so never."""
    return may_write(caller) and ADMIN_GROUP in caller.groups


def require_admin(caller: Caller, what: str) -> None:
    """ForbiddenError (403) naming the group unless the caller may configure its tenant; `what` completes
    "only members of the tenant's 'admin' group may ..."."""
    if not may_configure(caller):
        raise ForbiddenError(
            f"only members of the tenant's {ADMIN_GROUP!r} group may {what}", details={"required_group": ADMIN_GROUP}
        )
