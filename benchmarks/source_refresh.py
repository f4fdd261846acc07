"""What refreshing a web source costs when little or nothing changed (issue 31, docs/sources.md).

A site of `pages` HTML pages listed by a sitemap, served by the PageFetcher double (`tests.doubles.web`:
ETags and 304s, or no validators at all), refreshed into a local home by the real refresh logic and the
real ingest pipeline (the hashing embedder, so the figures count work, not a model's speed):
1. the first refresh: every page fetched, stored and embedded;
2. a refresh with nothing changed;
3. a refresh after one page of `pages` changed.
For each: HTTP requests, 304s, pages fetched whole but unchanged (content hash), pages stored again,
chunks embedded and chunk vectors reused, wall time. Run once with ETags and once without validators.

`python -m benchmarks.source_refresh [--pages N]` runs it. `--site docsite` refreshes the real test
site instead (`tests.doubles.docsite`: Python 3.11's documentation served on 127.0.0.1 with ETags, its
sitemap listing the first N library pages) with the real fetcher (`citewise.builtin.web_fetch`, loopback
allowed, `--delay` seconds of politeness between requests, default 0): requests and 304s as the site
logged them, and the wall time as the median of `--repeats` runs (default 3), each on a new home.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from citewise.builtin.web_fetch import FetchLimits, WebPageFetcher
from citewise.domain.models import Caller
from citewise.domain.sources import SourceCategory, SourceKind, SourceSpec
from citewise.ingest.sources import BlobWriter, hold_source, register_source
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings
from tests.doubles.docsite import DocSite, python_docs
from tests.doubles.web import FakeSite, Page, html, sitemap

SITE = "https://docs.example.com"
ADMIN = Caller(tenant_id="acme", user_id="carol", groups=("admin",))
PARAGRAPH = "The refresh asks each page conditionally and stores only what changed. " * 12


class CountingWriter(BlobWriter):
    """The blob store, then the pipeline (as `IngestingWriter`), counting pages and chunk vectors."""

    def __init__(self, services: Any) -> None:
        super().__init__(services.blobs)
        self.ingestor = services.ingestor
        self.stored = self.embedded = self.reused = 0

    def store(
        self, tenant_id: str, path: str, data: bytes, *, content_type: str, owner: str, metadata: dict[str, str]
    ) -> None:
        super().store(tenant_id, path, data, content_type=content_type, owner=owner, metadata=metadata)
        result = self.ingestor.ingest(self.blobs.get(tenant_id, path))
        self.stored += 1
        self.embedded += result.embedded
        self.reused += result.reused


def _site(pages: int, validators: bool) -> FakeSite:
    urls = [f"{SITE}/guide/page-{n}.html" for n in range(pages)]
    site = FakeSite(
        {
            url: Page(html(f"Page {n}", f"{PARAGRAPH} Page {n}. {PARAGRAPH}"), validators=validators)
            for n, url in enumerate(urls)
        }
    )
    site.pages[f"{SITE}/sitemap.xml"] = Page(sitemap(*urls), content_type="application/xml", validators=False)
    return site


def measure(pages: int, validators: bool) -> dict[str, Any]:
    """The three refreshes of a site of the PageFetcher double; their figures by step."""
    site = _site(pages, validators)

    def change() -> None:
        changed = f"{SITE}/guide/page-{pages // 2}.html"
        site.pages[changed] = Page(html("Changed", f"{PARAGRAPH} A new paragraph."), validators=validators)

    return _refreshes(
        site, f"{SITE}/sitemap.xml", change, requests=site.requests, not_modified=None, clear=site.log.clear
    )


def measure_docsite(pages: int, delay: float, repeats: int) -> dict[str, Any]:
    """The three refreshes of the real test site, `repeats` times on new homes; counts of the last run,
    the median of the wall times."""
    listed = sorted(str(path.relative_to(python_docs())) for path in (python_docs() / "library").glob("*.html"))
    runs = []
    for _ in range(repeats):
        with DocSite(python_docs(), pages=listed[:pages]) as site:
            fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=delay))
            runs.append(
                _refreshes(
                    fetcher,
                    f"{site.url}/sitemap.xml",
                    functools.partial(site.change, listed[pages // 2]),
                    requests=site.count,
                    not_modified=functools.partial(site.count, status=304),
                    clear=site.requests.clear,
                )
            )
    figures = runs[-1]
    for step in figures:
        figures[step]["seconds"] = round(statistics.median(run[step]["seconds"] for run in runs), 2)
        figures[step]["seconds_each"] = [run[step]["seconds"] for run in runs]
    return figures


def _refreshes(
    fetcher: Any,
    sitemap_url: str,
    change: Callable[[], None],
    *,
    requests: Callable[[], int],
    not_modified: Callable[[], int] | None,
    clear: Callable[[], None],
) -> dict[str, Any]:
    """A sitemap source refreshed into a new local home: first, with nothing changed, and after
    `change` (one page); each step's figures. `requests` and `not_modified` count what the site saw
    (304s from the refresh's summary when the site does not count them)."""
    with tempfile.TemporaryDirectory(prefix="citewise-refresh-") as home:
        settings = Settings(home=Path(home), embedder="hashing")
        services = build_services(settings)
        writer = CountingWriter(services)
        services.__dict__.update(page_fetcher=fetcher, document_writer=writer)
        spec = SourceSpec(kind=SourceKind.SITEMAP, url=sitemap_url, category=SourceCategory.OFFICIAL_DOCS)
        source = register_source(services.sources, ADMIN, spec, now=datetime.now(UTC), allow_loopback=True)
        figures: dict[str, Any] = {}
        for step in ("first refresh", "nothing changed", "1 page changed"):
            if step == "1 page changed":
                change()
            clear()
            writer.stored = writer.embedded = writer.reused = 0
            started = time.perf_counter()
            message = hold_source(services.sources, "acme", source.source_id, now=datetime.now(UTC))
            run = services.refresher().run(message)
            assert run is not None and run.finished_at is not None
            summary = run.summary
            figures[step] = {
                "requests": requests(),
                "not_modified": summary.not_modified if not_modified is None else not_modified(),
                "unchanged_by_hash": summary.unchanged,
                "bytes_downloaded": summary.bytes,
                "pages_stored": writer.stored,
                "chunks_embedded": writer.embedded,
                "chunks_reused": writer.reused,
                "seconds": round(time.perf_counter() - started, 2),
            }
        services.close()
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200, help="pages of the site (default 200)")
    parser.add_argument("--site", choices=("double", "docsite"), default="double", help="the site (default double)")
    parser.add_argument("--delay", type=float, default=0.0, help="docsite: politeness delay, seconds (default 0)")
    parser.add_argument("--repeats", type=int, default=3, help="docsite: runs, for the median time (default 3)")
    args = parser.parse_args()
    if args.site == "docsite":
        docsite = {"pages": args.pages, "delay": args.delay, **measure_docsite(args.pages, args.delay, args.repeats)}
        print(json.dumps(docsite, indent=2))
        return
    report = {
        "pages": args.pages,
        "with ETags": measure(args.pages, validators=True),
        "without validators": measure(args.pages, validators=False),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
