"""Quotas: what a limit accepts, where an effective limit comes from, and what the gate refuses, with the
429 body and `Retry-After` a client sees (`citewise.domain.quotas`, `citewise.ports.quotas`)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pydantic
import pytest

from citewise.domain.errors import CitewiseError, error_body
from citewise.domain.models import Document, DocumentStatus
from citewise.domain.quotas import CEILINGS, QuotaExceededError, QuotaOverrides, Quotas, effective, seconds_to_next_day
from citewise.ports.quotas import MINUTE_US, QuotaGate
from citewise.ports.registry import StoredTotals
from citewise.ports.usage import DayUsage, UsageCounts

NOON = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [-1, "10", 1.5, True, {"n": 1}, CEILINGS["max_documents"] + 1, 10**30],
    ids=["negative", "string", "fraction", "boolean", "object", "above-ceiling", "absurd"],
)
def test_a_bad_limit_is_refused_naming_its_field(value: Any) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        QuotaOverrides.model_validate({"max_documents": value})
    assert [error["loc"][0] for error in caught.value.errors()] == ["max_documents"]


def test_stamped_overrides_read_back() -> None:
    stamped = QuotaOverrides(max_documents=5, updated_at=NOON, updated_by="ops")
    assert QuotaOverrides.model_validate_json(stamped.model_dump_json()) == stamped


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(pydantic.ValidationError):
        QuotaOverrides.model_validate({"max_documentz": 3})


def test_zero_the_ceiling_and_a_whole_number_written_as_a_float_are_limits() -> None:
    assert QuotaOverrides(max_documents=0).max_documents == 0
    assert QuotaOverrides.model_validate({"max_documents": 500.0}).max_documents == 500  # JSON Schema's integer
    assert QuotaOverrides(max_stored_bytes=CEILINGS["max_stored_bytes"]).max_stored_bytes == 10**15


def test_an_override_replaces_its_default_and_says_so() -> None:
    defaults = Quotas(max_documents=100, queries_per_minute=60)
    quotas = effective("acme", defaults, QuotaOverrides(max_documents=5)).quotas
    assert (quotas["max_documents"].limit, quotas["max_documents"].source) == (5, "override")
    assert (quotas["queries_per_minute"].limit, quotas["queries_per_minute"].source) == (60, "default")
    assert (quotas["pages_per_day"].limit, quotas["pages_per_day"].source) == (None, "default")


def test_the_error_is_a_429_naming_the_quota_with_retry_after() -> None:
    error = QuotaExceededError("max_documents", limit=3, used=3, retry_after=3600, message="full")
    status, body = error_body(error, "req-1")
    assert status == 429 and error.headers() == {"Retry-After": "3600"}
    assert body["error"] == {
        "code": "QUOTA_EXCEEDED",
        "message": "full",
        "details": {"quota": "max_documents", "limit": 3, "used": 3, "retry_after_seconds": 3600},
        "request_id": "req-1",
    }


def test_a_daily_quota_waits_for_the_next_utc_midnight() -> None:
    assert seconds_to_next_day(NOON) == 12 * 3600
    assert seconds_to_next_day(datetime(2026, 11, 27, 23, 59, 59, 999999, tzinfo=UTC)) == 1


# --- the gate, with the stores as plain functions ------------------------------------------------------------


class Today:
    """A usage meter holding one day's counts."""

    def __init__(self, counts: UsageCounts) -> None:
        self.counts = counts

    def add(self, tenant_id: str, day: date, counts: UsageCounts) -> None:
        raise AssertionError("the gate never counts")

    def read(self, tenant_id: str, from_day: date, to_day: date) -> list[DayUsage]:
        return [DayUsage(day=from_day, counts=self.counts)]


class Bucket:
    """A rate limiter that admits `left` requests, then asks to wait 2.5 s."""

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, tenant_id: str, *, per_minute: int, burst: int, now_us: int) -> int:
        self.left -= 1
        return 0 if self.left >= 0 else 2_500_000


NOTHING_STORED = StoredTotals()
NOTHING_USED = UsageCounts()


def gate(
    quotas: Quotas, *, totals: StoredTotals = NOTHING_STORED, today: UsageCounts = NOTHING_USED, left: int = 0
) -> QuotaGate:
    bucket = Bucket(left)
    return QuotaGate(
        Quotas(),
        lambda _: QuotaOverrides.model_validate(quotas.model_dump()),
        totals=lambda _: totals,
        usage=lambda: Today(today),
        rates=lambda: bucket,
        clock=lambda: NOON,
    )


def document(size: int, chunks: int = 0) -> Document:
    return Document(
        tenant_id="acme",
        doc_id="d" * 32,
        path="a.md",
        source="test",
        owner="alice",
        status=DocumentStatus.INDEXED,
        version="v1",
        chunk_count=chunks,
        size_bytes=size,
        created_at=NOON,
        updated_at=NOON,
    )


def refusal(call: Any) -> QuotaExceededError:
    with pytest.raises(QuotaExceededError) as caught:
        call()
    return caught.value


def test_a_new_document_over_the_documents_quota_is_refused_but_a_replacement_is_not() -> None:
    full = gate(Quotas(max_documents=3), totals=StoredTotals(documents=3, bytes=300))
    error = refusal(lambda: full.check_storage("acme", None, 10))
    assert error.details == {"quota": "max_documents", "limit": 3, "used": 3, "retry_after_seconds": 3600}
    full.check_storage("acme", document(100), 10)  # a new version of a stored document adds no document


def test_bytes_count_what_the_document_replaces() -> None:
    near = gate(Quotas(max_stored_bytes=1000), totals=StoredTotals(documents=2, bytes=900))
    near.check_storage("acme", document(400), 500)  # 900 - 400 + 500 = 1000: fits exactly
    error = refusal(lambda: near.check_storage("acme", None, 101))
    assert (error.quota, error.details["used"]) == ("max_stored_bytes", 900)


def test_a_quota_lowered_below_the_use_refuses_new_work() -> None:
    lowered = gate(Quotas(max_documents=1), totals=StoredTotals(documents=5))
    assert refusal(lambda: lowered.check_storage("acme", document(1), 1)).quota == "max_documents"


def test_pages_of_the_day() -> None:
    day = gate(Quotas(pages_per_day=100), today=UsageCounts(pages=90))
    day.check_pages("acme", 10)
    error = refusal(lambda: day.check_pages("acme", 11))
    assert (error.quota, error.details["used"], error.retry_after) == ("pages_per_day", 90, 12 * 3600)
    spent = gate(Quotas(pages_per_day=90), today=UsageCounts(pages=90))
    assert refusal(lambda: spent.check_pages("acme", 0)).quota == "pages_per_day"  # a presign on a spent day


def test_generated_answers_stop_when_the_days_tokens_are_spent_and_searches_go_on() -> None:
    spent = gate(
        Quotas(generation_tokens_per_day=1000),
        today=UsageCounts(generation_input_tokens=700, generation_output_tokens=300),
    )
    error = refusal(lambda: spent.admit_query("acme", generative=True))
    assert (error.quota, error.details["used"]) == ("generation_tokens_per_day", 1000)
    spent.admit_query("acme", generative=False)


def test_queries_over_the_rate_wait_the_buckets_time() -> None:
    busy = gate(Quotas(queries_per_minute=60, query_burst=2), left=2)
    busy.admit_query("acme", generative=False)
    busy.admit_query("acme", generative=True)
    error = refusal(lambda: busy.admit_query("acme", generative=False))
    assert error.details == {"quota": "queries_per_minute", "limit": 60, "used": 2, "retry_after_seconds": 3}
    assert MINUTE_US == 60_000_000


def test_a_rate_of_zero_refuses_every_query() -> None:
    assert refusal(lambda: gate(Quotas(queries_per_minute=0)).admit_query("acme", generative=False)).retry_after == 60


def test_no_limit_checks_nothing() -> None:
    def unread(*_: object) -> Any:
        raise AssertionError("nothing to read without a limit")

    free = QuotaGate(Quotas(), lambda _: None, totals=unread, usage=unread, rates=unread)
    free.check_storage("acme", None, 10**12)
    free.check_pages("acme", 10**6)
    free.admit_query("acme", generative=True)


def test_a_store_that_fails_lets_the_work_through() -> None:
    def broken(*_: object) -> Any:
        raise CitewiseError("table unavailable")

    class Broken:
        def take(self, *_: object, **__: object) -> int:
            raise CitewiseError("table unavailable")

        def read(self, *_: object) -> list[DayUsage]:
            raise CitewiseError("table unavailable")

    open_gate = QuotaGate(
        Quotas(max_documents=1, pages_per_day=1, queries_per_minute=1, generation_tokens_per_day=1),
        broken,
        totals=broken,
        usage=Broken,  # type: ignore[arg-type]
        rates=Broken,  # type: ignore[arg-type]
    )
    open_gate.check_storage("acme", None, 1)
    open_gate.check_pages("acme", 5)
    open_gate.admit_query("acme", generative=True)


def test_overrides_are_read_once_per_ttl() -> None:
    reads: list[str] = []

    def overrides(tenant_id: str) -> QuotaOverrides:
        reads.append(tenant_id)
        return QuotaOverrides(max_documents=1)

    cached = QuotaGate(Quotas(), overrides, ttl=60)
    assert cached.quotas("acme").max_documents == cached.quotas("acme").max_documents == 1
    assert reads == ["acme"]
