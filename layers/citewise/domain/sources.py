"""Web sources of a tenant (issue 31): what a tenant admin registers, and what each refresh leaves behind.

A source is a sitemap, a URL prefix to crawl (depth and page limits), or a list of URLs. Its `category`
names the source of every document it brings (the provenance source key), so the tenant's credibility
table (`TenantSettings.source_credibility`, keyed by these category names) ranks it; its refresh
interval defaults by category. Its version is fixed, or read from each page's URL with a template
(`/{version}/`): a template rather than a user's regular expression, because Python's `re` has no time
limit and a pattern such as `(a+)+$` would hang a function on one crafted URL; a template compiles to
escaped literals around one bounded character class, which matches in linear time.

What a refresh keeps per page (`PageState`) makes the next one cheap: the validators (ETag,
Last-Modified) for a conditional request, the content hash for servers without them, and how many
refreshes in a row found the page gone. A source has at most one refresh at a time: `RefreshLock`, a
lease renewed as the run progresses, so a crashed run frees its source when the lease ends.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Final, Self

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, field_validator, model_validator

from citewise.domain.errors import ConflictError, ValidationError
from citewise.domain.models import Frozen
from citewise.domain.versions import VERSION_PATTERN, try_version
from citewise.domain.weburl import URL_PATTERN, check_url_syntax

SOURCE_ID_PATTERN: Final = r"^[0-9a-f]{32}$"
"""A source id: 32 hex digits (random), the shape of a document id."""
MAX_URL_CHARS: Final = 1024
"""Longest URL a source or page may have: it travels as S3 user metadata (2 KB for every key and value)."""
MAX_LISTED_URLS: Final = 1000
MAX_PAGES_LIMIT: Final = 10_000
MAX_DEPTH: Final = 5
MAX_BYTES_LIMIT: Final = 1024 * 1024 * 1024
DEFAULT_GONE_AFTER: Final = 2
"""Refreshes in a row that must find a page gone (404/410) before its document is removed: one failed
deploy of the site must not empty the tenant's copy."""
DOCUMENT_PREFIX: Final = "sources/"
"""Documents of source S live under `sources/S/` in the tenant's blob store."""


def _url_syntax(url: str) -> str:
    """`check_url_syntax` as a model validator: the reason in the message (a 400's `details.errors`)."""
    try:
        return check_url_syntax(url)
    except ValidationError as exc:
        raise ValueError(exc.message) from None


Url = Annotated[
    str,
    StringConstraints(min_length=8, max_length=MAX_URL_CHARS),
    AfterValidator(_url_syntax),
    Field(json_schema_extra={"pattern": URL_PATTERN}),
]
VersionString = Annotated[str, StringConstraints(pattern=VERSION_PATTERN)]
"""A version as documents declare theirs (`citewise.domain.versions`): a fixed version that is not one
would have every page of the source refused at ingest."""


class SourceKind(StrEnum):
    """How a source's pages are found."""

    SITEMAP = "sitemap"
    """`url` is a sitemap (or a sitemap index): its pages."""
    CRAWL = "crawl"
    """`url` is a prefix: the page at it, and the links under it, `depth` links deep."""
    URLS = "urls"
    """`urls` lists the pages."""


class SourceCategory(StrEnum):
    """What kind of knowledge a source is: the name its documents carry as their source, the key of the
    tenant's credibility table (`{"official_docs": 1, "community": 0.3}`)."""

    OFFICIAL_DOCS = "official_docs"
    REFERENCE = "reference"
    TUTORIAL = "tutorial"
    BLOG = "blog"
    COMMUNITY = "community"
    OTHER = "other"


DEFAULT_REFRESH_HOURS: Final[dict[SourceCategory, int]] = {
    # Official documentation and community threads change with releases and answers: daily, and a
    # conditional request costs next to nothing when nothing changed. Written pieces rarely change.
    SourceCategory.OFFICIAL_DOCS: 24,
    SourceCategory.REFERENCE: 24 * 7,
    SourceCategory.TUTORIAL: 24 * 7,
    SourceCategory.BLOG: 24 * 7,
    SourceCategory.COMMUNITY: 24,
    SourceCategory.OTHER: 24 * 7,
}
MIN_REFRESH_HOURS: Final = 1
MAX_REFRESH_HOURS: Final = 24 * 365

_TEMPLATE_TEXT = re.compile(r"^[\x21-\x7e]{1,200}$")
_VERSION_GROUP = r"([0-9][0-9A-Za-z._+-]{0,31})"


class VersionTemplate:
    """A URL template with one `{version}` placeholder (and optional `*`, any run of characters within one
    path segment), such as `https://docs.python.org/{version}/` or `/{version}/library/*`.

    Compiled to a regular expression of escaped literals, the bounded version class and `[^/]*`: no nested
    quantifier, so matching is linear in the URL's length whatever the template."""

    def __init__(self, template: str) -> None:
        if not _TEMPLATE_TEXT.fullmatch(template) or template.count("{version}") != 1:
            raise ValueError("a version template is 1-200 printable characters with exactly one {version}")
        before, after = template.split("{version}")
        parts = [_literal(before), _VERSION_GROUP, _literal(after)]
        self.template = template
        self._pattern = re.compile("".join(parts))

    def version(self, url: str) -> str | None:
        """The version `url` holds where the template's placeholder is, or None if it does not match or
        holds no version (`/latest/`, `/3.x/`): such a page is stored without one, never refused at ingest."""
        found = self._pattern.search(url[:MAX_URL_CHARS])
        return found.group(1) if found and try_version(found.group(1)) is not None else None


def _literal(text: str) -> str:
    return "[^/]*".join(re.escape(piece) for piece in text.split("*"))


def _spec_rules(schema: dict[str, Any]) -> None:
    """The rules across fields, stated in the JSON schema too (so a client, and the API's own contract
    tests, know them without trying): `urls` lists the pages of a `urls` source, and only of one; the
    other kinds have a `url`; a version is fixed or read from the URL, not both."""
    schema["allOf"] = [
        {
            "if": {"properties": {"kind": {"const": SourceKind.URLS.value}}},
            "then": {"required": ["urls"], "properties": {"urls": {"minItems": 1}, "url": {"type": "null"}}},
            "else": {"required": ["url"], "properties": {"url": {"type": "string"}, "urls": {"maxItems": 0}}},
        },
        {
            "not": {
                "required": ["version", "version_template"],
                "properties": {"version": {"type": "string"}, "version_template": {"type": "string"}},
            }
        },
    ]


class SourceSpec(Frozen):
    """A source as its admin registers it (`POST /v1/sources`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_spec_rules)

    kind: SourceKind = Field(description="`sitemap`, `crawl` (a URL prefix) or `urls` (a list).")
    url: Url | None = Field(
        default=None,
        description="The sitemap (`sitemap`) or the prefix whose pages are crawled (`crawl`); not for `urls`.",
    )
    urls: list[Url] = Field(
        default_factory=list, max_length=MAX_LISTED_URLS, description="The pages of a `urls` source."
    )
    name: str = Field(default="", max_length=200, description="A name for people (listings).")
    category: SourceCategory = Field(
        default=SourceCategory.OTHER,
        description="What kind of knowledge it is: its documents' source, the key of the credibility table.",
    )
    refresh_hours: int | None = Field(
        default=None,
        ge=MIN_REFRESH_HOURS,
        le=MAX_REFRESH_HOURS,
        description="Hours between refreshes; absent: the category's default (24 for official docs and "
        "community, 168 otherwise).",
    )
    version: VersionString | None = Field(default=None, description="The version every page is about (`3.12`).")
    version_template: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[!-z|~]*\{version\}[!-z|~]*$",
        description="Where the version is in a page's URL: one `{version}` placeholder, `*` for any characters "
        "within a path segment (`https://docs.python.org/{version}/`). Not with `version`.",
    )
    depth: int = Field(default=2, ge=0, le=MAX_DEPTH, description="Links followed from the prefix (`crawl`).")
    max_pages: int = Field(default=500, ge=1, le=MAX_PAGES_LIMIT, description="Pages one refresh handles at most.")
    max_bytes: int = Field(
        default=100 * 1024 * 1024,
        ge=1024,
        le=MAX_BYTES_LIMIT,
        description="Bytes one refresh downloads at most (bodies of fetched pages).",
    )
    gone_after: int = Field(
        default=DEFAULT_GONE_AFTER,
        ge=1,
        le=10,
        description="Refreshes in a row that must find a page gone (404/410) before its document is removed.",
    )

    @field_validator("version_template")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None:
            VersionTemplate(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.kind is SourceKind.URLS:
            if not self.urls or self.url is not None:
                raise ValueError("a `urls` source lists its pages in `urls` (at least one) and has no `url`")
        elif self.url is None or self.urls:
            raise ValueError(f"a `{self.kind}` source has a `url` and no `urls`")
        if self.version is not None and self.version_template is not None:
            raise ValueError("give `version` or `version_template`, not both")
        return self

    def start_urls(self) -> list[str]:
        """Where a refresh starts: the sitemap, the prefix, or the listed pages."""
        return list(self.urls) if self.kind is SourceKind.URLS else [str(self.url)]

    @property
    def interval(self) -> timedelta:
        """Time between two refreshes."""
        return timedelta(hours=self.refresh_hours or DEFAULT_REFRESH_HOURS[self.category])

    @cached_property
    def _template_compiled(self) -> VersionTemplate | None:
        return VersionTemplate(self.version_template) if self.version_template else None

    def page_version(self, url: str) -> str | None:
        """The version a page of this source is about: the fixed one, or the one its URL holds."""
        if self.version is not None:
            return self.version
        template = self._template_compiled
        return template.version(url) if template else None

    def in_scope(self, url: str) -> bool:
        """Whether a link found while crawling belongs to the source (starts with its prefix)."""
        return self.kind is SourceKind.CRAWL and url.startswith(str(self.url))


class RefreshSummary(Frozen):
    """What one refresh did, counted as it goes (its progress) and when it ends."""

    requests: int = Field(default=0, ge=0, description="HTTP requests made (pages and sitemaps).")
    not_modified: int = Field(default=0, ge=0, description="304 answers to conditional requests: nothing re-read.")
    unchanged: int = Field(default=0, ge=0, description="Fetched whole but with the content hash of last time.")
    changed: int = Field(default=0, ge=0, description="Pages whose new content was stored to be re-indexed.")
    new: int = Field(default=0, ge=0, description="Pages stored for the first time.")
    gone: int = Field(default=0, ge=0, description="404/410 answers (the document stays until `gone_after`).")
    removed: int = Field(default=0, ge=0, description="Documents removed: their page was gone `gone_after` times.")
    failed: int = Field(default=0, ge=0, description="Pages refused or failed (robots.txt, timeouts, 5xx...).")
    bytes: int = Field(default=0, ge=0, description="Bytes of page bodies downloaded.")
    pending: int = Field(default=0, ge=0, description="Pages still to visit in this refresh.")
    capped: str | None = Field(
        default=None, description="`max_pages` or `max_bytes` when the refresh stopped at that cap; else null."
    )
    reasons: dict[str, int] = Field(default_factory=dict, description="Failed and refused pages by reason.")

    def add(self, **counts: int) -> RefreshSummary:
        """These counts added to the summary's."""
        return self.model_copy(update={name: getattr(self, name) + value for name, value in counts.items()})


class RefreshStatus(StrEnum):
    """How a refresh ended."""

    COMPLETED = "completed"
    CAPPED = "capped"
    """It stopped at a cap: what it did not reach waits for the next refresh."""


class RefreshRun(Frozen):
    """One refresh: its id, when it started (and ended), and its counts."""

    run_id: str
    started_at: datetime
    finished_at: datetime | None = None
    status: RefreshStatus | None = None
    discovered: bool = Field(default=False, description="Whether its pages were listed (the first step).")
    summary: RefreshSummary = Field(default_factory=RefreshSummary)


class RefreshLock(Frozen):
    """The refresh running for a source: held until `lease_until`, renewed whenever it saves progress."""

    run: RefreshRun
    lease_until: datetime


class Source(Frozen):
    """A registered source and its refresh state."""

    source_id: str = Field(pattern=SOURCE_ID_PATTERN)
    tenant_id: str
    spec: SourceSpec
    created_at: datetime
    created_by: str = Field(description="The admin who registered it: the owner of its documents.")
    next_refresh_at: datetime = Field(description="When the schedule refreshes it next.")
    last_run: RefreshRun | None = Field(default=None, description="The last refresh that ended.")
    running: RefreshLock | None = Field(default=None, description="The refresh running now, with its progress.")

    def running_at(self, now: datetime) -> RefreshLock | None:
        """The refresh holding the source at `now` (an expired lease holds nothing)."""
        return self.running if self.running is not None and self.running.lease_until > now else None


class PageState(Frozen):
    """What the last refreshes learnt of one page of a source."""

    url: str
    path: str | None = Field(default=None, description="Its document's path in the blob store, once stored.")
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = Field(default=None, description="SHA-256 of the stored body.")
    misses: int = Field(default=0, ge=0, description="Refreshes in a row that found it gone.")
    depth: int = Field(default=0, ge=0)
    run_id: str | None = Field(default=None, description="The refresh that queued it last.")
    done: bool = Field(default=False, description="Whether that refresh has visited it.")


class RefreshRunningError(ConflictError):
    """A refresh of the source is running: a second one is refused, never queued twice."""

    code = "REFRESH_RUNNING"

    def __init__(self, source_id: str, run_id: str) -> None:
        super().__init__(
            "a refresh of this source is running; wait for it to end",
            details={"source_id": source_id, "run_id": run_id},
        )


def url_key(url: str) -> str:
    """A page's key: the first 32 hex digits of the SHA-256 of its URL (its document's file name too)."""
    return hashlib.sha256(url.encode()).hexdigest()[:32]


def page_path(source_id: str, url: str, extension: str) -> str:
    """Where the document of a page lives in the tenant's blob store (the contract's path)."""
    return f"{DOCUMENT_PREFIX}{source_id}/{url_key(url)}.{extension}"
