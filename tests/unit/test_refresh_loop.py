"""`citewise serve`'s refresh loop (`citewise_local.refresh_loop`): what one pass runs, and a clean stop
that leaves the run in progress saved and queued for the next serve."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from citewise.domain.models import Caller
from citewise.domain.sources import SourceKind, SourceSpec
from citewise.ingest.sources import register_source, request_refresh
from citewise.ports.web import FetchedPage, Validators
from citewise.runtime.services import Services
from citewise.runtime.settings import Settings
from citewise_local.refresh_loop import RefreshLoop
from citewise_local.sources import LocalSources
from tests.doubles.web import FakeSite, Page, html
from tests.unit.test_source_refresh import Documents

ADMIN = Caller(tenant_id="acme", user_id="carol", groups=("admin",))
URLS = [f"https://docs.example.com/p{i}.html" for i in range(6)]


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[LocalSources]:
    sources = LocalSources(tmp_path / "sources.db")
    yield sources
    sources.close()


def loop_over(queue: LocalSources, site: object, documents: Documents, tmp_path: Path) -> RefreshLoop:
    services = Services(
        Settings(home=tmp_path / "home", embedder="hashing"),
        sources=queue,
        page_fetcher=site,
        document_writer=documents,
    )
    return RefreshLoop(services, queue, interval=0.05)


def test_a_pass_runs_the_due_sources_and_the_queued_refreshes(queue: LocalSources, tmp_path: Path) -> None:
    site = FakeSite({url: Page(html("P", "Text.")) for url in URLS})
    documents = Documents()
    due = register_source(queue, ADMIN, SourceSpec(kind=SourceKind.URLS, urls=URLS[:3]), now=datetime.now(UTC))
    loop = loop_over(queue, site, documents, tmp_path)
    assert loop.tick() == 1
    assert len(documents.stored) == 3
    # A refresh asked through the API (queued) runs at the next pass, and nothing more is due
    request_refresh(queue, queue, ADMIN, due.source_id, now=datetime.now(UTC))
    assert loop.tick() == 1
    assert loop.tick() == 0


class Stopping(FakeSite):
    """A site whose third page's fetch asks the loop to stop."""

    loop: RefreshLoop | None = None

    def fetch(self, url: str, *, validators: Validators | None = None) -> FetchedPage:
        if url == URLS[2] and self.loop is not None:
            threading.Thread(target=self.loop.close).start()
            self.loop._stopping.wait(5)
        return super().fetch(url, validators=validators)


def test_a_clean_stop_saves_the_run_and_queues_it_for_the_next_serve(queue: LocalSources, tmp_path: Path) -> None:
    site = Stopping({url: Page(html("P", "Text.")) for url in URLS})
    documents = Documents()
    source = register_source(queue, ADMIN, SourceSpec(kind=SourceKind.URLS, urls=URLS), now=datetime.now(UTC))
    loop = loop_over(queue, site, documents, tmp_path)
    site.loop = loop
    # When the loop is stopped while the run is at its third page
    assert loop.tick() == 0
    # Then the run is saved where it stopped (still holding the source) and back on the queue
    held = queue.source("acme", source.source_id)
    assert held is not None and held.running is not None and held.last_run is None
    assert held.running.run.summary.new == 3 and held.running.run.summary.pending == 3
    message = queue.receive()
    assert message is not None and message.run_id == held.running.run.run_id
    # And the next serve finishes it, asking for no page twice
    queue.send(message)
    site.loop = None
    assert loop_over(queue, site, documents, tmp_path).tick() == 1
    assert sorted(url for url, _ in site.log) == sorted(URLS)


def test_a_refresh_asked_now_runs_now_not_at_the_next_tick(queue: LocalSources, tmp_path: Path) -> None:
    # Given a running loop whose ticks are an hour apart, that has run what was due
    site = FakeSite({url: Page(html("P", "Text.")) for url in URLS})
    documents = Documents()
    source = register_source(queue, ADMIN, SourceSpec(kind=SourceKind.URLS, urls=URLS[:2]), now=datetime.now(UTC))
    loop = loop_over(queue, site, documents, tmp_path)
    loop.interval = 3600
    loop.start()
    try:
        deadline = time.monotonic() + 10
        while _last_run(queue, source.source_id) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(site.log) == 2
        # When a refresh is asked through the API, and the server wakes the loop
        request_refresh(queue, queue, ADMIN, source.source_id, now=datetime.now(UTC))
        loop.wake()
        # Then it runs at once
        while len(site.log) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(site.log) == 4
    finally:
        loop.close()


def _last_run(queue: LocalSources, source_id: str) -> object:
    source = queue.source(ADMIN.tenant_id, source_id)
    return source.last_run if source is not None else None
