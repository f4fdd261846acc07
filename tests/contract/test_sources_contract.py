"""One SourceRegistry contract, run against the local SQLite store and DynamoDB (under moto).

What the refresh needs of it: a tenant reads its own sources only; one refresh at a time per source (the
second refused until the first ends or its lease runs out); only the run holding a source saves or ends
it; the schedule finds what is due across tenants; erasure removes a tenant's items and no one else's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from citewise.aws.dynamodb_sources import DynamoSources
from citewise.domain.errors import ConflictError, NotFoundError
from citewise.domain.sources import (
    PageState,
    RefreshLock,
    RefreshRun,
    RefreshRunningError,
    RefreshSummary,
    Source,
    SourceKind,
    SourceSpec,
)
from citewise.ports.sources import SourceRegistry
from citewise_local.sources import LocalSources
from tests.contract.stores import TABLE, local_or_dynamo

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=15)


@pytest.fixture(params=["local", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SourceRegistry]:
    yield from local_or_dynamo(
        request, lambda: LocalSources(tmp_path / "sources.db"), lambda client: DynamoSources(TABLE, client=client)
    )


def make_source(source_id: str, tenant_id: str = "acme", *, minutes: int = 0, due: datetime = NOW) -> Source:
    return Source(
        source_id=source_id.ljust(32, "0"),
        tenant_id=tenant_id,
        spec=SourceSpec(kind=SourceKind.SITEMAP, url="https://docs.example.com/sitemap.xml"),
        created_at=NOW + timedelta(minutes=minutes),
        created_by="carol",
        next_refresh_at=due,
    )


def lock(run_id: str, *, at: datetime = NOW, pages: int = 0) -> RefreshLock:
    run = RefreshRun(run_id=run_id, started_at=at, summary=RefreshSummary(pending=pages))
    return RefreshLock(run=run, lease_until=at + LEASE)


def test_sources_read_back_within_their_tenant_only(store: SourceRegistry) -> None:
    # Given two sources of one tenant and one of a tenant whose id shares its prefix
    store.put_source(make_source("b", minutes=1))
    store.put_source(make_source("a"))
    store.put_source(make_source("c", "acme-eu"))
    # Then each tenant lists its own, oldest first, and reads no other's
    assert [s.source_id[0] for s in store.tenant_sources("acme")] == ["a", "b"]
    assert [s.source_id[0] for s in store.tenant_sources("acme-eu")] == ["c"]
    assert store.source("acme", "a".ljust(32, "0")) == make_source("a")
    assert store.source("acme-eu", "a".ljust(32, "0")) is None
    # And an id is never stored twice
    with pytest.raises(ConflictError):
        store.put_source(make_source("a"))


def test_one_refresh_at_a_time_until_it_ends_or_its_lease_runs_out(store: SourceRegistry) -> None:
    source = make_source("a")
    store.put_source(source)
    # When a run takes the source
    store.start_run("acme", source.source_id, lock("run-1"), NOW)
    # Then a second is refused while the lease holds, naming the first
    with pytest.raises(RefreshRunningError) as refused:
        store.start_run("acme", source.source_id, lock("run-2"), NOW + timedelta(minutes=1))
    assert refused.value.details["run_id"] == "run-1"
    assert refused.value.http_status == 409
    # And the source shows the run and its progress
    assert store.save_run("acme", source.source_id, lock("run-1", pages=7))
    running = store.source("acme", source.source_id)
    assert running is not None and running.running is not None
    assert running.running.run.summary.pending == 7
    # When the lease runs out (a crashed run), another run takes the source; the first can no longer save
    later = NOW + LEASE + timedelta(seconds=1)
    store.start_run("acme", source.source_id, lock("run-2", at=later), later)
    assert not store.save_run("acme", source.source_id, lock("run-1"))
    assert not store.finish_run("acme", source.source_id, lock("run-1").run, NOW)
    # When the holder finishes, its run is the last and the source is free and scheduled
    finished = lock("run-2", at=later).run.model_copy(update={"finished_at": later})
    assert store.finish_run("acme", source.source_id, finished, later + timedelta(days=1))
    done = store.source("acme", source.source_id)
    assert done is not None and done.running is None and done.last_run == finished
    assert done.next_refresh_at == later + timedelta(days=1)
    store.start_run("acme", source.source_id, lock("run-3", at=later), later)


def test_a_run_on_an_unknown_source_is_not_found(store: SourceRegistry) -> None:
    with pytest.raises(NotFoundError):
        store.start_run("acme", "f" * 32, lock("run-1"), NOW)


def test_the_schedule_finds_due_sources_of_every_tenant(store: SourceRegistry) -> None:
    store.put_source(make_source("a", due=NOW - timedelta(minutes=1)))
    store.put_source(make_source("b", "globex", due=NOW))
    store.put_source(make_source("c", due=NOW + timedelta(hours=1)))
    assert sorted(store.due(NOW, limit=10)) == [("acme", "a".ljust(32, "0")), ("globex", "b".ljust(32, "0"))]
    assert len(store.due(NOW, limit=1)) == 1
    # A running source is not due until its lease ends (a crashed run's source is, then)
    store.start_run("acme", "a".ljust(32, "0"), lock("run-1"), NOW)
    assert store.due(NOW, limit=10) == [("globex", "b".ljust(32, "0"))]
    assert ("acme", "a".ljust(32, "0")) in store.due(NOW + LEASE, limit=10)
    # A finished run moves the source's time to its next refresh
    store.finish_run("acme", "a".ljust(32, "0"), lock("run-1").run, NOW + timedelta(days=1))
    assert store.due(NOW + LEASE, limit=10) == [("globex", "b".ljust(32, "0"))]


def test_pages_are_kept_per_source_and_deleted_with_it(store: SourceRegistry) -> None:
    first, second = make_source("a"), make_source("b")
    store.put_source(first)
    store.put_source(second)
    pages = [PageState(url=f"https://docs.example.com/{n}", etag=f'"{n}"') for n in range(3)]
    store.put_pages("acme", first.source_id, pages)
    store.put_pages("acme", second.source_id, pages[:1])
    # A page state is replaced by URL, forgotten by URL
    store.put_pages("acme", first.source_id, [pages[0].model_copy(update={"misses": 1})])
    store.delete_pages("acme", first.source_id, [pages[2].url, "https://unknown.example.com/"])
    kept = sorted(store.pages("acme", first.source_id), key=lambda page: page.url)
    assert [(page.url, page.misses) for page in kept] == [(pages[0].url, 1), (pages[1].url, 0)]
    assert store.pages("acme-eu", first.source_id) == []
    # Deleting a source deletes its pages, nothing of the other source
    assert store.delete_source("acme", first.source_id)
    assert not store.delete_source("acme", first.source_id)
    assert store.pages("acme", first.source_id) == []
    assert store.pages("acme", second.source_id) == pages[:1]
    assert store.due(NOW, limit=10) == [("acme", second.source_id)]


def test_erasure_removes_a_tenants_sources_and_pages_and_nothing_else(store: SourceRegistry) -> None:
    for tenant in ("acme", "acme-eu", "acme2"):
        source = make_source("a", tenant)
        store.put_source(source)
        store.put_pages(tenant, source.source_id, [PageState(url=f"https://x.example.com/{n}") for n in range(3)])
    before = store.count_tenant("acme")
    assert before >= 4  # a source and its three pages (and DynamoDB's schedule entry)
    # Erased in bounded steps
    assert store.erase_tenant("acme", limit=2) == 2
    while store.erase_tenant("acme", limit=2):
        pass
    assert store.count_tenant("acme") == 0
    assert store.tenant_sources("acme") == []
    assert store.count_tenant("acme-eu") == store.count_tenant("acme2") == before
    assert {tenant for tenant, _ in store.due(NOW, limit=10)} == {"acme-eu", "acme2"}
