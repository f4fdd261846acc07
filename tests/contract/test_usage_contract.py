"""One UsageMeter contract, run against the local SQLite meter and DynamoDB (under moto).

The parallel-writer tests are the point of the port: many writers adding to the same tenant-day at once
must lose no increment. Threads run on both backends; separate processes on SQLite, whose lock is what
`citewise serve` and the CLI share.

DynamoDB applies each request to an item atomically; moto does not (its UpdateItem reads, computes and
stores the item in Python, unlocked: under 8 threads it lost 1 increment in 400 about one run in two).
So the DynamoDB runs give moto that one guarantee, a lock around each item request (`atomic_requests`),
and what they test is that the adapter needs nothing more: an adapter that read the counter and wrote
it back, in two requests, would still lose increments between them.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

from citewise.aws.dynamodb import TABLE_SCHEMA, DynamoRegistry
from citewise.aws.dynamodb_usage import DynamoUsage
from citewise.domain.models import DocumentStatus
from citewise.ports.usage import COUNTERS, DayUsage, UsageCounts, UsageMeter, total
from citewise_local.usage import LocalUsage
from tests.contract.test_registry_contract import make_document, register

TABLE = "citewise-documents"
DAY = date(2026, 11, 27)

Factory = Callable[[], UsageMeter]


@pytest.fixture(params=["local", "dynamodb"])
def meters(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """Builds meters on one store: each call is another writer (its own connection or client)."""
    if request.param == "local":
        opened: list[LocalUsage] = []

        def local() -> UsageMeter:
            opened.append(LocalUsage(tmp_path / "usage.db"))
            return opened[-1]

        yield local
        for meter in opened:
            meter.close()
    else:
        request.getfixturevalue("aws_credentials")
        request.getfixturevalue("atomic_requests")
        with mock_aws():
            boto3.client("dynamodb").create_table(TableName=TABLE, **TABLE_SCHEMA)
            yield lambda: DynamoUsage(TABLE, client=boto3.client("dynamodb"))


@pytest.fixture
def atomic_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of moto's item requests runs alone, as each is atomic on DynamoDB (module docstring)."""
    lock = threading.Lock()
    for name in ("get_item", "put_item", "update_item", "query"):
        original = getattr(DynamoDBBackend, name)

        def atomic(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            with lock:
                return _original(*args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, atomic)


@pytest.fixture
def meter(meters: Factory) -> UsageMeter:
    return meters()


def test_a_day_reads_back_what_was_added(meter: UsageMeter) -> None:
    # Given two increments of the same day and one of the next
    meter.add("acme", DAY, UsageCounts(rest_queries=1, generation_input_tokens=120))
    meter.add("acme", DAY, UsageCounts(rest_queries=1, mcp_searches=2, generation_input_tokens=80))
    meter.add("acme", date(2026, 11, 28), UsageCounts(documents_ingested=3, pages=12))
    # When the two days are read
    days = meter.read("acme", DAY, date(2026, 11, 28))
    # Then each day holds its sums, oldest first, and untouched counters read 0
    assert days == [
        DayUsage(day=DAY, counts=UsageCounts(rest_queries=2, mcp_searches=2, generation_input_tokens=200)),
        DayUsage(day=date(2026, 11, 28), counts=UsageCounts(documents_ingested=3, pages=12)),
    ]


def test_every_counter_round_trips(meter: UsageMeter) -> None:
    # Given one increment of every counter, each a different value
    counts = UsageCounts.model_validate({name: i + 1 for i, name in enumerate(COUNTERS)})
    meter.add("acme", DAY, counts)
    # Then the day reads back exactly that
    assert meter.read("acme", DAY, DAY) == [DayUsage(day=DAY, counts=counts)]


def test_the_range_includes_both_ends_and_nothing_outside(meter: UsageMeter) -> None:
    # Given one query a day across the end of a month
    for day in (date(2026, 10, 30), date(2026, 10, 31), date(2026, 11, 1), date(2026, 11, 2)):
        meter.add("acme", day, UsageCounts(rest_queries=1))
    # When the middle two days are read
    days = meter.read("acme", date(2026, 10, 31), date(2026, 11, 1))
    # Then exactly those two come back
    assert [d.day for d in days] == [date(2026, 10, 31), date(2026, 11, 1)]
    # And a range without usage is empty, as is an inverted one
    assert meter.read("acme", date(2026, 12, 1), date(2026, 12, 31)) == []
    assert meter.read("acme", date(2026, 11, 2), date(2026, 10, 30)) == []


def test_tenants_are_counted_apart_even_when_their_ids_share_a_prefix(meter: UsageMeter) -> None:
    # Given tenants `acme` and `acme-labs` counting on the same day
    meter.add("acme", DAY, UsageCounts(rest_queries=1))
    meter.add("acme-labs", DAY, UsageCounts(rest_queries=5))
    # Then each reads only its own
    assert total(meter.read("acme", DAY, DAY)).rest_queries == 1
    assert total(meter.read("acme-labs", DAY, DAY)).rest_queries == 5
    assert meter.read("other", DAY, DAY) == []


def test_an_empty_increment_creates_no_day(meter: UsageMeter) -> None:
    meter.add("acme", DAY, UsageCounts())
    assert meter.read("acme", DAY, DAY) == []


def test_parallel_writers_lose_no_increment(meters: Factory) -> None:
    # Given 8 writers, each its own connection or client, adding to the same tenant-day 50 times each
    writers = [meters() for _ in range(8)]

    def write(meter: UsageMeter) -> None:
        for _ in range(50):
            meter.add("acme", DAY, UsageCounts(rest_queries=1, generation_output_tokens=3))

    # When they all write at once
    with ThreadPoolExecutor(max_workers=len(writers)) as pool:
        list(pool.map(write, writers))
    # Then every increment is there
    assert meters().read("acme", DAY, DAY) == [
        DayUsage(day=DAY, counts=UsageCounts(rest_queries=400, generation_output_tokens=1200))
    ]


def test_threads_sharing_one_meter_lose_no_increment(meter: UsageMeter) -> None:
    # Given one meter shared by 8 threads (as the handlers of `citewise serve` share theirs)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: meter.add("acme", DAY, UsageCounts(mcp_queries=1)), range(400)))
    # Then every increment is there
    assert total(meter.read("acme", DAY, DAY)).mcp_queries == 400


def _add_in_process(path: Path, times: int) -> None:
    meter = LocalUsage(path)
    for _ in range(times):
        meter.add("acme", DAY, UsageCounts(rest_searches=1, pages=2))
    meter.close()


def test_processes_sharing_a_home_lose_no_increment(tmp_path: Path) -> None:
    # Given 4 processes adding to the same usage.db (the CLI and `citewise serve` on one home)
    path = tmp_path / "usage.db"
    LocalUsage(path).close()  # the schema first, so the processes race on increments only
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_add_in_process, args=(path, 100)) for _ in range(4)]
    # When they all write at once
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * 4
    # Then every increment is there
    meter = LocalUsage(path)
    assert meter.read("acme", DAY, DAY) == [DayUsage(day=DAY, counts=UsageCounts(rest_searches=400, pages=800))]
    meter.close()


def test_usage_items_stay_out_of_the_registry(aws_credentials: None) -> None:
    # Given a tenant with one document and a day of usage in the same table
    with mock_aws():
        boto3.client("dynamodb").create_table(TableName=TABLE, **TABLE_SCHEMA)
        registry = DynamoRegistry(TABLE)
        document = register(registry, make_document("acme", "guide.md", status=DocumentStatus.INDEXED))
        DynamoUsage(TABLE).add("acme", DAY, UsageCounts(rest_queries=1))
        # Then listings hold the document only, and the usage day reads back
        assert registry.list("acme").items == [document]
        assert total(DynamoUsage(TABLE).read("acme", DAY, DAY)).rest_queries == 1


# --- erasing a tenant (`citewise.ports.erasure`) -------------------------------------------------------


def test_erase_tenant_removes_the_tenants_days_only(meters: Factory) -> None:
    # Given three tenants whose ids share a prefix, each with three days of counters
    meter = meters()
    days = [date(2026, 11, day) for day in (25, 26, 27)]
    for tenant_id in ("acme", "acme-eu", "acme2"):
        for day in days:
            meter.add(tenant_id, day, UsageCounts(rest_queries=1, pages=2))
    assert meter.count_tenant("acme") == 3
    # When acme's days are erased in steps of 2
    steps = []
    while step := meter.erase_tenant("acme", limit=2):
        steps.append(step)
    # Then every day of acme is gone, and nothing of the others
    assert steps == [2, 1]
    assert meter.count_tenant("acme") == 0
    assert meter.read("acme", days[0], days[-1]) == []
    for tenant_id in ("acme-eu", "acme2"):
        assert meter.count_tenant(tenant_id) == 3
        assert total(meter.read(tenant_id, days[0], days[-1])) == UsageCounts(rest_queries=3, pages=6)
