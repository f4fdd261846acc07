"""`citewise sources add|list|show|refresh|remove` on a local home: a refresh run now stores the pages
through the same pipeline as `citewise ingest`, a second refresh costs conditional requests only, and
removing the source removes its documents."""

from __future__ import annotations

import json
from typing import Any

import pytest

from citewise.runtime.services import Services
from tests.doubles.web import FakeSite, Page, html, sitemap

SITE = "https://docs.example.com"


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> FakeSite:
    urls = [f"{SITE}/0.115/p{i}.html" for i in range(4)]
    fake = FakeSite({url: Page(html(f"Page {i}", f"The walrus {i} swims.")) for i, url in enumerate(urls)})
    fake.pages[f"{SITE}/sitemap.xml"] = Page(sitemap(*urls), content_type="application/xml", validators=False)
    monkeypatch.setattr(Services, "page_fetcher", property(lambda _: fake))
    return fake


def test_sources_from_the_command_line(cli: Any, site: FakeSite) -> None:
    # When the owner registers a sitemap with a version template
    status, out, err = cli(
        "sources", "add", "--tenant", "acme", "--sitemap", f"{SITE}/sitemap.xml",
        "--category", "official_docs", "--version-template", "/{version}/", "--json", "--init",
    )  # fmt: skip
    assert status == 0, err
    source_id = json.loads(out)["source_id"]
    # Then it is listed, never refreshed yet
    status, out, err = cli("sources", "list", "--tenant", "acme")
    assert status == 0, err
    assert source_id in out and "never refreshed" in out
    # When it is refreshed now: every page stored and indexed, searchable with its version
    status, out, err = cli("sources", "refresh", source_id, "--tenant", "acme")
    assert status == 0, err
    assert "5 requests, 0 not modified, 0 unchanged, 0 changed, 4 new" in out
    status, out, _ = cli("search", "walrus", "--tenant", "acme", "--json")
    hits = json.loads(out)["hits"]
    assert len(hits) == 4 and {hit["chunk"]["document"]["attributes"]["version"] for hit in hits} == {"0.115"}
    # When refreshed again with nothing changed: conditional requests only
    status, out, _ = cli("sources", "refresh", source_id, "--tenant", "acme", "--json")
    summary = json.loads(out)["summary"]
    assert (summary["requests"], summary["not_modified"], summary["new"] + summary["changed"]) == (5, 4, 0)
    status, out, _ = cli("sources", "show", source_id, "--tenant", "acme", "--json")
    assert json.loads(out)["last_run"]["summary"] == summary
    # When it is removed: its documents go with it
    status, out, _ = cli("sources", "remove", source_id, "--tenant", "acme")
    assert status == 0 and "4 documents" in out
    status, out, _ = cli("search", "walrus", "--tenant", "acme", "--json")
    assert json.loads(out)["hits"] == []
    assert cli("sources", "show", source_id, "--tenant", "acme")[0] != 0


def test_a_bad_url_is_refused_naming_the_reason(cli: Any) -> None:
    status, _, err = cli("sources", "add", "--tenant", "acme", "--url", "http://169.254.169.254/latest/", "--init")
    assert status != 0 and "private_address" in err
    status, _, err = cli("sources", "add", "--tenant", "acme", "--crawl", "https://me:pw@docs.example.com/", "--init")
    assert status != 0 and "credentials" in err
