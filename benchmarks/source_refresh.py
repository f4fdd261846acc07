"""What refreshing a web source costs when little or nothing changed (issue 31, docs/sources.md).

A site of `pages` HTML pages listed by a sitemap, served by the PageFetcher double (`tests.doubles.web`:
ETags and 304s, or no validators at all), refreshed into a local home by the real refresh logic and the
real ingest pipeline (the hashing embedder, so the figures count work, not a model's speed):
1. the first refresh: every page fetched, stored and embedded;
2. a refresh with nothing changed;
3. a refresh after one page of `pages` changed.
For each: HTTP requests, 304s, pages fetched whole but unchanged (content hash), pages stored again,
chunks embedded and chunk vectors reused, wall time. Run once with ETags and once without validators.

`python -m benchmarks.source_refresh [--pages N]` runs it. The real site served on 127.0.0.1 (the
web-fetch branch's test site) replaces the double when it is merged.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from citewise.domain.models import Caller
from citewise.domain.sources import SourceCategory, SourceKind, SourceSpec
from citewise.ingest.sources import BlobWriter, hold_source, register_source
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings
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
    """The three refreshes of one site; their figures by step."""
    with tempfile.TemporaryDirectory(prefix="citewise-refresh-") as home:
        settings = Settings(home=Path(home), embedder="hashing")
        services = build_services(settings)
        site = _site(pages, validators)
        writer = CountingWriter(services)
        services.__dict__.update(page_fetcher=site, document_writer=writer)
        spec = SourceSpec(kind=SourceKind.SITEMAP, url=f"{SITE}/sitemap.xml", category=SourceCategory.OFFICIAL_DOCS)
        source = register_source(services.sources, ADMIN, spec, now=datetime.now(UTC))
        figures: dict[str, Any] = {}
        for step in ("first refresh", "nothing changed", "1 page changed"):
            if step == "1 page changed":
                changed = f"{SITE}/guide/page-{pages // 2}.html"
                site.pages[changed] = Page(html("Changed", f"{PARAGRAPH} A new paragraph."), validators=validators)
            site.log.clear()
            writer.stored = writer.embedded = writer.reused = 0
            started = time.perf_counter()
            message = hold_source(services.sources, "acme", source.source_id, now=datetime.now(UTC))
            run = services.refresher().run(message)
            assert run is not None and run.finished_at is not None
            summary = run.summary
            figures[step] = {
                "requests": site.requests(),
                "not_modified": summary.not_modified,
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
    args = parser.parse_args()
    report = {
        "pages": args.pages,
        "with ETags": measure(args.pages, validators=True),
        "without validators": measure(args.pages, validators=False),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
