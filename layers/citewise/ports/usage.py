"""The UsageMeter port: per tenant and UTC day counters of the work done, added atomically.

A counter only grows: `add` is an increment (DynamoDB `ADD`, a SQLite upsert adding to the stored value),
never a read-modify-write, so writers in parallel (Lambda instances, the CLI beside `citewise serve`) lose
no increment. Each adapter passes `tests/contract/test_usage_contract.py`, parallel writers included.

Counters are named, not positional: a counter added later needs no schema change on either backend, and
a day that never counted one reads it as 0.

`Meter` is what the logic holds: it stamps the UTC day, drops empty counts, and never lets a metering
failure fail the work it counts (it logs and goes on). Usage is for reporting and billing after the
fact; refusing a user's answer because a counter could not be written would turn a bookkeeping fault
into an outage, and the request it counts has already been served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Protocol

from pydantic import Field, NonNegativeInt, field_validator

from citewise.domain.errors import ValidationError
from citewise.domain.models import Frozen
from citewise.ports.erasure import ERASE_BATCH
from citewise.ports.registry import DocumentRegistry, StoredTotals

logger = logging.getLogger(__name__)


class UsageCounts(Frozen):
    """What one piece of work used, or a day's totals; every counter is a non-negative integer."""

    documents_ingested: NonNegativeInt = Field(default=0, description="Documents indexed (new or modified).")
    documents_failed: NonNegativeInt = Field(default=0, description="Ingests that recorded the document FAILED.")
    pages: NonNegativeInt = Field(
        default=0, description="Pages of the documents indexed (a document without pages: 1)."
    )
    chunks_embedded: NonNegativeInt = Field(default=0, description="Chunk texts sent to the embedding model.")
    chunks_reused: NonNegativeInt = Field(default=0, description="Chunks indexed with a vector already stored.")
    embedding_tokens: NonNegativeInt = Field(default=0, description="Embedding input tokens the model reported.")
    embedding_tokens_estimated: NonNegativeInt = Field(
        default=0, description="Embedding input tokens estimated (words and marks) where the model reports none."
    )
    rest_queries: NonNegativeInt = Field(default=0, description="POST /v1/query answered.")
    mcp_queries: NonNegativeInt = Field(default=0, description="MCP rag_query calls answered.")
    rest_searches: NonNegativeInt = Field(default=0, description="POST /v1/search answered.")
    mcp_searches: NonNegativeInt = Field(default=0, description="MCP search calls answered.")
    generation_input_tokens: NonNegativeInt = Field(default=0, description="Answer model input tokens reported.")
    generation_output_tokens: NonNegativeInt = Field(default=0, description="Answer model output tokens reported.")
    rerank_calls: NonNegativeInt = Field(default=0, description="Queries and searches sent to the reranker.")

    def nonzero(self) -> dict[str, int]:
        """The counters above zero, by name: what an increment writes."""
        return {name: value for name, value in self.model_dump().items() if value}

    def __add__(self, other: UsageCounts) -> UsageCounts:
        return UsageCounts.model_validate({name: value + getattr(other, name) for name, value in self})


COUNTERS: tuple[str, ...] = tuple(UsageCounts.model_fields)
"""Every counter's name, in the order reports show them."""


class DayUsage(Frozen):
    """One tenant's counters of one UTC day."""

    day: date
    counts: UsageCounts


class UsageMeter(Protocol):
    """Where the counters live: one record per tenant and UTC day."""

    def add(self, tenant_id: str, day: date, counts: UsageCounts) -> None:
        """Add `counts` to the tenant's counters of `day`, atomically (no increment lost to a parallel
        writer); creates the day's record on its first increment."""
        ...

    def read(self, tenant_id: str, from_day: date, to_day: date) -> list[DayUsage]:
        """The tenant's days from `from_day` to `to_day` (both included) that counted anything, oldest
        first. Only that tenant's records: the tenant is in every key read."""
        ...

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of the tenant's day records; how many, 0 only when none was left. An
        erasure keeps them for billing (`citewise.ports.erasure`); this is for after that retention."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """The tenant's day records that remain."""
        ...


class Meter:
    """Records usage for the logic: the day from `clock` (UTC), empty counts skipped, failures logged.

    `usage` gives the adapter when first needed (None: record nothing), inside the same guard as the
    write, so an adapter that cannot even be built (a database file that will not open) fails no request
    either.
    """

    def __init__(
        self,
        usage: Callable[[], UsageMeter] | None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._usage = usage
        self._clock = clock

    def record(self, tenant_id: str, counts: UsageCounts) -> None:
        """Add `counts` to the tenant's counters of today (UTC). Never raises: see the module docstring."""
        if self._usage is None or not counts.nonzero():
            return
        try:
            self._usage().add(tenant_id, self._clock().astimezone(UTC).date(), counts)
        except Exception:  # noqa: BLE001 - metering is bookkeeping; the work it counts is done already
            logger.warning("could not record usage of tenant %s", tenant_id, exc_info=True)


UNMETERED = Meter(None)
"""A meter that records nothing: the default of the logic (tests, evaluation, benchmarks)."""


def total(days: list[DayUsage]) -> UsageCounts:
    """The sum of `days`' counters."""
    result = UsageCounts()
    for day in days:
        result += day.counts
    return result


MAX_REPORT_DAYS = 366
"""The longest range one report reads: a year, leap day included (one item a day on DynamoDB)."""


MAX_PRICE_PER_MILLION = 1_000_000.0
"""The highest price a table may give one million units of a counter: a dollar a unit. Far above any
model's price (a million output tokens of the dearest Bedrock model cost under 100), low enough that a
price typed in the wrong unit (per token instead of per million) is refused rather than billed."""


class PriceTable(Frozen):
    """What one million units of each counter cost: the deployment's settings (`CITEWISE_PRICES`; on AWS
    cdk.json's `prices` per environment), never the logic's. Which model a counter pays for is the
    deployment's choice, so is its price: docs/operations.md says where each default comes from."""

    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 code of every price.")
    per_million: dict[str, float] = Field(
        description="Counter name -> the price of one million of its units (tokens, calls); counters left out "
        "cost nothing (work that bills no model, such as a query's retrieval)."
    )

    @field_validator("per_million")
    @classmethod
    def _known_counters_sane_prices(cls, prices: dict[str, float]) -> dict[str, float]:
        for name, price in prices.items():
            if name not in COUNTERS:
                raise ValueError(f"{name!r} is no usage counter; counters are: {', '.join(COUNTERS)}")
            if not 0 <= price <= MAX_PRICE_PER_MILLION:
                raise ValueError(f"the price of {name!r} must be from 0 to {MAX_PRICE_PER_MILLION:,.0f} per million")
        return prices


class CostEstimate(Frozen):
    """The estimated cost of some usage at a price table: per priced counter and in all.

    An estimate: model prices only (no storage, search domain or Lambda time, which a tenant shares with
    the others), at today's table (a price changed mid-month re-prices the whole range), rounded to a
    millionth of the currency."""

    currency: str
    total: float
    by_counter: dict[str, float]


def estimate_cost(counts: UsageCounts, prices: PriceTable) -> CostEstimate:
    """What `counts` cost at `prices`, summed in Decimal so that thousands of small items add up exactly."""
    by_counter = {
        name: Decimal(getattr(counts, name)) * Decimal(str(price)) / 1_000_000
        for name, price in prices.per_million.items()
    }
    return CostEstimate(
        currency=prices.currency,
        total=_rounded(sum(by_counter.values(), Decimal(0))),
        by_counter={name: _rounded(cost) for name, cost in by_counter.items()},
    )


def _rounded(amount: Decimal) -> float:
    return float(amount.quantize(Decimal("0.000001")))


class UsageReport(Frozen):
    """A tenant's usage over a range of UTC days: the sum, each day that counted anything, and the sum's
    estimated cost when the deployment has a price table (None without one); beside it, what the tenant
    stores now (`DocumentRegistry.stored_totals`, whatever the range)."""

    tenant_id: str
    from_day: date = Field(serialization_alias="from")
    to_day: date = Field(serialization_alias="to")
    total: UsageCounts
    cost: CostEstimate | None = None
    stored: StoredTotals | None = None
    days: list[DayUsage]


def usage_report(
    usage: UsageMeter,
    tenant_id: str,
    from_day: date,
    to_day: date,
    prices: PriceTable | None = None,
    *,
    stored: StoredTotals | None = None,
) -> UsageReport:
    """The tenant's usage from `from_day` to `to_day` (both included): what `citewise usage` prints and
    the usage routes answer. A range that ends before it starts, or is longer than `MAX_REPORT_DAYS`, is
    a ValidationError naming the field."""
    check_range(from_day, to_day)
    days = usage.read(tenant_id, from_day, to_day)
    summed = total(days)
    cost = estimate_cost(summed, prices) if prices is not None else None
    return UsageReport(
        tenant_id=tenant_id, from_day=from_day, to_day=to_day, total=summed, cost=cost, stored=stored, days=days
    )


class TenantUsage(Frozen):
    """One tenant's usage summed over a range, its estimated cost (None without a price table), and what it
    stores now."""

    tenant_id: str
    total: UsageCounts
    cost: CostEstimate | None = None
    stored: StoredTotals


class TenantUsagePage(Frozen):
    """One page of the operator's listing: the tenants (by id, as `DocumentRegistry.list_tenants` pages
    them) with their usage over the range; pass `next_cursor` back for the next page (None on the last)."""

    from_day: date = Field(serialization_alias="from")
    to_day: date = Field(serialization_alias="to")
    items: list[TenantUsage]
    next_cursor: str | None = None


def tenants_usage(
    registry: DocumentRegistry,
    usage: UsageMeter,
    from_day: date,
    to_day: date,
    prices: PriceTable | None = None,
    *,
    limit: int,
    cursor: str | None = None,
) -> TenantUsagePage:
    """A page of the registry's tenants with each one's usage over the range and stored totals: one tenant
    listing, then per tenant one usage read (a Query of at most `MAX_REPORT_DAYS` items on DynamoDB) and
    one totals read, so a page's cost grows with `limit`, never with the number of tenants."""
    check_range(from_day, to_day)
    tenants = registry.list_tenants(limit=limit, cursor=cursor)
    items = []
    for tenant in tenants.items:
        report = usage_report(usage, tenant.tenant_id, from_day, to_day, prices)
        stored = registry.stored_totals(tenant.tenant_id)
        items.append(TenantUsage(tenant_id=tenant.tenant_id, total=report.total, cost=report.cost, stored=stored))
    return TenantUsagePage(from_day=from_day, to_day=to_day, items=items, next_cursor=tenants.next_cursor)


def check_range(from_day: date, to_day: date) -> None:
    """A ValidationError naming the field if the range ends before it starts or exceeds `MAX_REPORT_DAYS`."""
    if to_day < from_day:
        raise ValidationError("the range ends before it starts", details={"field": "to"})
    if (to_day - from_day).days >= MAX_REPORT_DAYS:
        raise ValidationError(f"a report covers at most {MAX_REPORT_DAYS} days", details={"field": "from"})


def report_range(from_day: date | None, to_day: date | None, today: date) -> tuple[date, date]:
    """The range a report covers when either end may be left out: `to` defaults to `today`, `from` to the
    first of `to`'s month (so no dates at all is the month so far, UTC)."""
    last = to_day or today
    return from_day or last.replace(day=1), last
