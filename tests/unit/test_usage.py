"""Usage metering's rules without a store: the Meter (UTC day, empty counts, failures never raised), the
DynamoDB requests as plain dicts, what an ingest and a query count, and the report's range checks."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError as PydanticValidationError

from citewise.aws.dynamodb_usage import USAGE_PREFIX, add_request, day_usage, read_request
from citewise.domain.errors import ValidationError
from citewise.domain.models import Answer, Reranking, Vector
from citewise.ingest.chunking import Chunker
from citewise.ingest.pipeline import Ingestor, _shares
from citewise.ports.embedder import ReportsTokens
from citewise.ports.usage import (
    DayUsage,
    Meter,
    PriceTable,
    UsageCounts,
    estimate_cost,
    report_range,
    total,
    usage_report,
)
from citewise.query.metering import query_usage, search_usage
from citewise_local.index import LocalIndex
from citewise_local.registry import LocalRegistry
from tests.factories import CountingEmbedder, source

DAY = date(2026, 11, 27)
GUIDE = "# Guide\n\n" + "\n\n".join(
    f"## Part {i}\n\n" + " ".join(f"Step{i} word {j} here." for j in range(60)) for i in range(4)
)


class Recorder:
    """A UsageMeter that keeps what it was given."""

    def __init__(self) -> None:
        self.added: list[tuple[str, date, UsageCounts]] = []

    def add(self, tenant_id: str, day: date, counts: UsageCounts) -> None:
        self.added.append((tenant_id, day, counts))

    def read(self, tenant_id: str, from_day: date, to_day: date) -> list[DayUsage]:
        days: dict[date, UsageCounts] = {}
        for tenant, day, counts in self.added:
            if tenant == tenant_id and from_day <= day <= to_day:
                days[day] = days.get(day, UsageCounts()) + counts
        return [DayUsage(day=day, counts=counts) for day, counts in sorted(days.items())]

    def of(self, tenant_id: str) -> UsageCounts:
        return total(self.read(tenant_id, date.min, date.max))


class BilledEmbedder(CountingEmbedder):
    """The hashing embedder, billing 7 tokens a text as Bedrock's embedders report theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.usage = 0

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.usage += 7 * len(texts)
        return super().embed_documents(texts)


# --- the Meter ---------------------------------------------------------------------------------------


def test_the_meter_counts_on_the_utc_day() -> None:
    # Given a clock at 01:30 on the 28th in UTC+3: still the 27th in UTC
    recorder = Recorder()
    clock = datetime(2026, 11, 28, 1, 30, tzinfo=timezone(timedelta(hours=3)))
    Meter(lambda: recorder, clock=lambda: clock).record("acme", UsageCounts(rest_queries=1))
    assert recorder.added == [("acme", DAY, UsageCounts(rest_queries=1))]


def test_the_meter_writes_nothing_for_empty_counts() -> None:
    recorder = Recorder()
    Meter(lambda: recorder).record("acme", UsageCounts())
    assert recorder.added == []


def test_a_failing_store_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    # Given a store that fails, and one that cannot even be built
    class Broken(Recorder):
        def add(self, tenant_id: str, day: date, counts: UsageCounts) -> None:
            raise OSError("disk full")

    def unbuildable() -> Recorder:
        raise OSError("no such file")

    # When each records a query
    with caplog.at_level(logging.WARNING):
        Meter(Broken).record("acme", UsageCounts(rest_queries=1))
        Meter(unbuildable).record("acme", UsageCounts(rest_queries=1))
    # Then nothing is raised, and each failure is logged with its tenant
    assert [r.getMessage() for r in caplog.records] == ["could not record usage of tenant acme"] * 2


def test_counts_refuse_negative_values() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        UsageCounts(rest_queries=-1)


# --- DynamoDB requests --------------------------------------------------------------------------------


def test_an_increment_is_one_add_of_the_nonzero_counters_on_the_tenant_day_item() -> None:
    request = add_request("registry", "acme", DAY, UsageCounts(rest_queries=1, generation_output_tokens=42))
    assert request == {
        "TableName": "registry",
        "Key": {"tenant_id": {"S": "acme"}, "doc_id": {"S": "#usage#2026-11-27"}},
        "UpdateExpression": "ADD #rest_queries :rest_queries, #generation_output_tokens :generation_output_tokens",
        "ExpressionAttributeNames": {
            "#rest_queries": "rest_queries",
            "#generation_output_tokens": "generation_output_tokens",
        },
        "ExpressionAttributeValues": {":rest_queries": {"N": "1"}, ":generation_output_tokens": {"N": "42"}},
    }


def test_a_read_queries_the_tenants_usage_keys_between_the_two_days() -> None:
    request = read_request("registry", "acme", date(2026, 11, 1), DAY)
    assert request["KeyConditionExpression"] == "#tenant = :tenant AND #key BETWEEN :from AND :to"
    assert request["ExpressionAttributeValues"] == {
        ":tenant": {"S": "acme"},
        ":from": {"S": "#usage#2026-11-01"},
        ":to": {"S": "#usage#2026-11-27"},
    }
    # And no document id (32 hex digits) nor the settings item sorts between two usage keys
    assert not USAGE_PREFIX <= "0" * 32 <= USAGE_PREFIX + "9999" and not USAGE_PREFIX < "#settings" < "#usagf"


def test_an_item_reads_back_ignoring_attributes_that_are_no_counter() -> None:
    item = {
        "tenant_id": {"S": "acme"},
        "doc_id": {"S": "#usage#2026-11-27"},
        "rest_queries": {"N": "3"},
        "a_counter_of_a_later_version": {"N": "9"},
    }
    assert day_usage(item) == DayUsage(day=DAY, counts=UsageCounts(rest_queries=3))


# --- what ingest counts --------------------------------------------------------------------------------


def _ingestor(tmp_path: Path, embedder: CountingEmbedder, recorder: Recorder) -> Ingestor:
    return Ingestor(
        LocalIndex(tmp_path / "index.db"),
        LocalRegistry(tmp_path / "registry.db"),
        embedder,
        Chunker(60, 10),
        meter=Meter(lambda: recorder),
    )


def test_ingest_counts_documents_pages_chunks_and_estimated_tokens(tmp_path: Path) -> None:
    # Given an ingestor whose embedder reports no tokens
    recorder = Recorder()
    embedder = CountingEmbedder()
    ingestor = _ingestor(tmp_path, embedder, recorder)
    # When a guide is ingested, then a copy of it under another path (every vector reused), then a
    # document that cannot be parsed, then the guide again unchanged
    first = ingestor.ingest(source("acme", "guide.md", GUIDE.encode()))
    copy = ingestor.ingest(source("acme", "copy.md", GUIDE.encode()))
    ingestor.ingest(source("acme", "broken.pdf", b"not a pdf"))
    ingestor.ingest(source("acme", "guide.md", GUIDE.encode()))
    # Then two documents were ingested and one failed; pages count 1 for a format without pages
    counted = recorder.of("acme")
    assert (counted.documents_ingested, counted.documents_failed, counted.pages) == (2, 1, 2)
    # And the chunks embedded are the texts the model saw; the copy's were all reused
    assert counted.chunks_embedded == embedder.embedded_texts == first.embedded > 1
    assert counted.chunks_reused == copy.reused == copy.document.chunk_count
    # And the tokens are estimated, none reported
    assert counted.embedding_tokens == 0 and counted.embedding_tokens_estimated > counted.chunks_embedded


def test_ingest_counts_the_tokens_the_model_billed_shared_between_tenants(tmp_path: Path) -> None:
    # Given an embedder that bills 7 tokens a text, and two tenants' documents embedded in one group: the
    # guide for acme, its first half for acme-labs
    recorder = Recorder()
    embedder = BilledEmbedder()
    assert isinstance(embedder, ReportsTokens)
    ingestor = _ingestor(tmp_path, embedder, recorder)
    half = GUIDE[: GUIDE.index("## Part 2")]
    objects = [source("acme", "guide.md", GUIDE.encode()), source("acme-labs", "guide.md", half.encode())]
    # When they are ingested together
    list(ingestor.ingest_many(objects))
    # Then each tenant counts its own chunks, and the billed tokens are split between them in proportion to
    # their text: all of them, about two to one
    acme, labs = recorder.of("acme"), recorder.of("acme-labs")
    assert acme.chunks_embedded + labs.chunks_embedded == embedder.embedded_texts
    assert acme.embedding_tokens + labs.embedding_tokens == embedder.usage
    assert 1.6 < acme.embedding_tokens / labs.embedding_tokens < 2.4
    assert acme.embedding_tokens_estimated == labs.embedding_tokens_estimated == 0
    # And one increment was written per tenant for the group
    assert sorted(tenant for tenant, _, _ in recorder.added) == ["acme", "acme-labs"]


def test_shares_sum_to_the_total_in_proportion() -> None:
    assert _shares(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    assert _shares(7, {"a": 3, "b": 0}) == {"a": 7, "b": 0}
    assert _shares(5, {"a": 0, "b": 0}) == {"a": 5, "b": 0}


# --- what a query counts -----------------------------------------------------------------------------


def test_a_query_counts_its_channel_its_generation_tokens_and_a_rerank() -> None:
    answer = Answer(
        answer="x",
        citations=[],
        sources=[],
        grounded=False,
        usage={"input_tokens": 900, "output_tokens": 120, "total_tokens": 1020},
        reranking=Reranking(reranker="amazon.rerank-v1:0", candidates=50, fallback="THROTTLED"),
    )
    assert query_usage(answer, "mcp") == UsageCounts(
        mcp_queries=1, generation_input_tokens=900, generation_output_tokens=120, rerank_calls=1
    )
    assert query_usage(Answer(answer="x", citations=[], sources=[], grounded=False), "rest") == UsageCounts(
        rest_queries=1
    )
    assert search_usage(None, "rest") == UsageCounts(rest_searches=1)


# --- the report ----------------------------------------------------------------------------------------


def test_a_report_sums_the_range_and_refuses_a_bad_one() -> None:
    recorder = Recorder()
    recorder.add("acme", DAY, UsageCounts(rest_queries=2))
    recorder.add("acme", date(2026, 11, 1), UsageCounts(rest_queries=1, pages=3))
    report = usage_report(recorder, "acme", *report_range(None, None, DAY))
    assert report.total == UsageCounts(rest_queries=3, pages=3)
    assert [d.day for d in report.days] == [date(2026, 11, 1), DAY]
    assert report.model_dump(mode="json", by_alias=True)["from"] == "2026-11-01"
    with pytest.raises(ValidationError) as inverted:
        usage_report(recorder, "acme", DAY, date(2026, 11, 1))
    assert inverted.value.details == {"field": "to"}
    with pytest.raises(ValidationError) as too_long:
        usage_report(recorder, "acme", date(2024, 1, 1), DAY)
    assert too_long.value.details == {"field": "from"}


def test_report_range_defaults_to_the_month_of_its_end() -> None:
    assert report_range(None, None, date(2026, 3, 9)) == (date(2026, 3, 1), date(2026, 3, 9))
    assert report_range(None, date(2026, 2, 14), date(2026, 3, 9)) == (date(2026, 2, 1), date(2026, 2, 14))
    assert report_range(date(2026, 1, 5), None, date(2026, 3, 9)) == (date(2026, 1, 5), date(2026, 3, 9))


def test_a_cost_is_each_priced_counter_at_its_price_per_million_summed_exactly() -> None:
    prices = PriceTable(
        currency="USD",
        per_million={"generation_input_tokens": 0.06, "generation_output_tokens": 0.24, "rerank_calls": 1000.0},
    )
    counts = UsageCounts(generation_input_tokens=1_234_567, generation_output_tokens=89_012, rerank_calls=3, pages=9)
    cost = estimate_cost(counts, prices)
    # 1,234,567 x 0.06 / 1e6 = 0.07407402; 89,012 x 0.24 / 1e6 = 0.02136288; 3 x 1000 / 1e6 = 0.003
    assert cost.by_counter == {
        "generation_input_tokens": 0.074074,
        "generation_output_tokens": 0.021363,
        "rerank_calls": 0.003,
    }
    assert cost.total == 0.098437  # the exact sum, rounded once: 0.09843690
    assert cost.currency == "USD"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"per_million": {"tokens": 1.0}}, "'tokens' is no usage counter"),
        ({"per_million": {"rest_queries": -0.5}}, "must be from 0"),
        ({"per_million": {"rest_queries": 2_000_000.0}}, "must be from 0"),
        ({"per_million": {"rest_queries": "cheap"}}, "valid number"),
        ({"currency": "dollars", "per_million": {}}, "pattern"),
    ],
)
def test_a_price_table_refuses_unknown_counters_and_absurd_prices(table: dict[str, object], message: str) -> None:
    with pytest.raises(PydanticValidationError, match=message):
        PriceTable.model_validate(table)


def test_a_report_prices_its_total_only_with_a_table() -> None:
    recorder = Recorder()
    recorder.add("acme", DAY, UsageCounts(rest_queries=4))
    assert usage_report(recorder, "acme", DAY, DAY).cost is None
    priced = usage_report(recorder, "acme", DAY, DAY, PriceTable(per_million={"rest_queries": 250_000.0}))
    assert priced.cost is not None and priced.cost.total == 1.0
