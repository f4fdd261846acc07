"""A tenant's quotas: the limits the platform operator sets, and the error that refuses work over one.

Five limits (`Quotas`), each None for "no limit": documents stored, bytes of originals stored, pages
ingested per UTC day, queries per minute with a burst (a token bucket shared by REST and MCP queries and
searches), and generation tokens per UTC day. The deployment's defaults come from the settings
(`CITEWISE_QUOTA_*`); the operator overrides any of them per tenant (`QuotaOverrides`, stored in the
registry next to the tenant's settings). Validation is here, once, so the API, the CLI and both
registries refuse the same values with the same message: a limit is a JSON integer (never a string, a
fraction or a boolean; `500.0` is 500, as JSON Schema's `integer` reads it), 0 or more, and at most a
ceiling far above any real use (`CEILINGS`), so a typo of six extra digits is refused instead of
silently lifting the limit.

A limit lowered below the current use is accepted: the work already done stays, and new work is refused
until the use falls under the limit (a day ends, a document is deleted).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from pydantic import Field, field_validator

from citewise.domain.errors import CitewiseError
from citewise.domain.models import Frozen

QuotaName = Literal[
    "max_documents",
    "max_stored_bytes",
    "pages_per_day",
    "queries_per_minute",
    "query_burst",
    "generation_tokens_per_day",
]
CEILINGS: Final[dict[str, int]] = {
    "max_documents": 100_000_000,
    "max_stored_bytes": 10**15,  # 1 PB
    "pages_per_day": 100_000_000,
    "queries_per_minute": 1_000_000,
    "query_burst": 1_000_000,
    "generation_tokens_per_day": 10**12,
}
"""The largest value each limit takes: far above any tenant's use, low enough to catch a slipped key."""


class Quotas(Frozen):
    """A tenant's limits; None means no limit. `query_burst` is the bucket's size (None: a minute's rate)."""

    max_documents: int | None = Field(
        default=None, ge=0, le=CEILINGS["max_documents"], description="Documents stored (any status)."
    )
    max_stored_bytes: int | None = Field(
        default=None, ge=0, le=CEILINGS["max_stored_bytes"], description="Bytes of the stored originals."
    )
    pages_per_day: int | None = Field(
        default=None, ge=0, le=CEILINGS["pages_per_day"], description="Pages ingested per UTC day."
    )
    queries_per_minute: int | None = Field(
        default=None,
        ge=0,
        le=CEILINGS["queries_per_minute"],
        description="Queries and searches (REST and MCP together) per minute, sustained.",
    )
    query_burst: int | None = Field(
        default=None,
        ge=0,
        le=CEILINGS["query_burst"],
        description="Queries and searches allowed at once (the bucket's size); None: a minute's worth.",
    )
    generation_tokens_per_day: int | None = Field(
        default=None,
        ge=0,
        le=CEILINGS["generation_tokens_per_day"],
        description="Answer model tokens (input and output) per UTC day.",
    )

    @field_validator(*CEILINGS, mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        # A limit is a JSON number with no fraction (`500` or `500.0`, as JSON Schema's `integer` reads it),
        # never a string such as "500" or a boolean, which pydantic would otherwise convert.
        if isinstance(value, str | bool):
            raise ValueError("a limit is a JSON integer (or null), not a string or a boolean")
        return value

    def burst(self) -> int | None:
        """The bucket's size: `query_burst`, else a minute's worth of queries."""
        return self.query_burst if self.query_burst is not None else self.queries_per_minute


class QuotaOverrides(Quotas):
    """The operator's per-tenant overrides: a field left out (or null) keeps the deployment's default."""

    updated_at: datetime | None = Field(default=None, description="Set by the service.")
    updated_by: str | None = Field(default=None, description="The operator who set them; set by the service.")


QuotaSource = Literal["default", "override"]


class EffectiveQuota(Frozen):
    """One limit as it applies to a tenant, and where it comes from."""

    limit: int | None = Field(description="None: no limit.")
    source: QuotaSource


class EffectiveQuotas(Frozen):
    """Every limit of a tenant with its source (`GET /v1/admin/tenants/{id}/quotas` shows them)."""

    tenant_id: str
    quotas: dict[str, EffectiveQuota]

    def as_quotas(self) -> Quotas:
        """The limits alone."""
        return Quotas.model_validate({name: quota.limit for name, quota in self.quotas.items()})


def effective(tenant_id: str, defaults: Quotas, overrides: QuotaOverrides | None) -> EffectiveQuotas:
    """The tenant's limits: each override where the operator set one, else the deployment's default."""
    quotas = {}
    for name in Quotas.model_fields:
        value = getattr(overrides, name) if overrides is not None else None
        quotas[name] = (
            EffectiveQuota(limit=value, source="override")
            if value is not None
            else EffectiveQuota(limit=getattr(defaults, name), source="default")
        )
    return EffectiveQuotas(tenant_id=tenant_id, quotas=quotas)


STORAGE_RETRY_SECONDS: Final = 3600
"""`Retry-After` of a storage quota: nothing frees storage on a clock, so an hour, a polite pace to ask
again (a delete or a raised quota lets the upload through at once)."""


def seconds_to_next_day(now: datetime) -> int:
    """Seconds until the next UTC midnight, when a daily quota's counter starts again (at least 1)."""
    utc = now.astimezone(UTC)
    midnight = datetime(utc.year, utc.month, utc.day, tzinfo=UTC) + timedelta(days=1)
    return max(1, int((midnight - utc).total_seconds() + 0.999))


class QuotaExceededError(CitewiseError):
    """Work refused because it would take a tenant over one of its quotas (429, with `Retry-After`).

    `details` names the quota, its limit, the amount used and the seconds to wait, so a client can tell
    its own limit from a backend's throttling (THROTTLED) without reading the message."""

    code = "QUOTA_EXCEEDED"
    http_status = 429

    def __init__(self, quota: QuotaName, *, limit: int, used: int, retry_after: int, message: str) -> None:
        super().__init__(
            message, details={"quota": quota, "limit": limit, "used": used, "retry_after_seconds": retry_after}
        )
        self.quota = quota
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}
