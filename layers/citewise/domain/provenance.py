"""Where a document's content comes from and when it last changed: its `source` and its `source_date`.

Three facts that are easy to confuse:
- `channel`: how the object reached citewise (`s3`, `local` for the API's local store, `folder` for
  `citewise ingest`). The system sets it; a folder sync removes only documents of its own channel.
- `source`: the user-facing origin of the content (`jira`, `confluence`, `runbooks`): the metadata value
  under the configured key (`source` by default), else the first folder of the document's path
  (`jira/PROJ-123.md` -> `jira`), else empty. "in Jira" in a question means this.
- `source_date`: when the content itself last changed: the metadata value under the configured key
  (`updated_at` by default), else the date the format declares (front matter, HTML meta, PDF or docx
  properties), else the object's last-modified time. Stored in UTC to the second, so filters compare
  ISO-8601 strings of one fixed shape on every backend.

A metadata date that is not a date is the author's mistake and fails the document with a reason; a
date the format's tooling wrote (a PDF's ModDate) that does not parse is passed over.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime

from citewise.domain.errors import ValidationError
from citewise.domain.models import AttributeValue, Document

DEFAULT_SOURCE_KEY = "source"
DEFAULT_DATE_KEY = "updated_at"


def parse_instant(text: str) -> datetime:
    """An ISO-8601 date or date-time (`2026-03-03`, `2026-03-03T10:00:00Z`, `...+01:00`) as UTC to the
    second; a date alone is its midnight and a time without an offset is UTC. ValueError otherwise."""
    value = text.strip()
    if not value:
        raise ValueError("empty")
    parsed = datetime.fromisoformat(value.replace("z", "Z"))
    return as_utc(parsed)


def as_utc(moment: datetime | date) -> datetime:
    """`moment` in UTC to the second (a naive one is taken as UTC; a date is its midnight)."""
    if not isinstance(moment, datetime):
        moment = datetime(moment.year, moment.month, moment.day)
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).replace(microsecond=0)


def try_instant(text: str | None) -> datetime | None:
    """`parse_instant`, else an HTTP/e-mail date (`Tue, 03 Mar 2026 10:00:00 GMT`), else None for a value
    that is missing or not a date (tool-written metadata, passed over)."""
    if text is None:
        return None
    try:
        return parse_instant(text)
    except ValueError:
        pass
    try:
        return as_utc(parsedate_to_datetime(text))
    except (TypeError, ValueError, IndexError):
        return None


def iso(moment: datetime) -> str:
    """The one string form of an instant in filters: `2026-03-03T10:00:00+00:00`."""
    return as_utc(moment).isoformat()


def channel_of(document: Document) -> str:
    """How a registered document arrived. A record written before `channel` existed has none and holds
    the channel in `source` (its next ingest re-derives both)."""
    return document.channel or document.source


def path_source(path: str) -> str:
    """The first folder of a document path (`jira/PROJ-123.md` -> `jira`); empty at the top level."""
    head, separator, _ = path.partition("/")
    return head if separator else ""


@dataclass(frozen=True)
class ProvenanceKeys:
    """Which metadata keys name a document's source and its date (settings `source_key`, `source_date_key`)."""

    source: str = DEFAULT_SOURCE_KEY
    date: str = DEFAULT_DATE_KEY


@dataclass(frozen=True)
class Provenance:
    """A document's source and metadata date, and the attributes left once those keys are taken out."""

    source: str
    declared_date: datetime | None
    attributes: dict[str, AttributeValue]


def provenance(path: str, attributes: dict[str, AttributeValue], keys: ProvenanceKeys) -> Provenance:
    """Take the source and the date out of a document's attributes (see the module docstring).

    Raises ValidationError when the date key holds something that is not an ISO-8601 date, or the source
    key something that is not a string: the document is then FAILED with that reason.
    """
    rest = dict(attributes)
    source_value = rest.pop(keys.source, None)
    date_value = rest.pop(keys.date, None)
    if source_value is not None and not isinstance(source_value, str):
        raise ValidationError(
            f"metadata '{keys.source}' (the document's source) must be a string", details={"key": keys.source}
        )
    declared: datetime | None = None
    if date_value is not None:
        try:
            if not isinstance(date_value, str):
                raise ValueError(type(date_value).__name__)
            declared = parse_instant(date_value)
        except ValueError as exc:
            raise ValidationError(
                f"metadata '{keys.date}' is not a date: {date_value!r} (use ISO 8601, e.g. 2026-03-03 or "
                "2026-03-03T10:00:00Z)",
                details={"key": keys.date},
            ) from exc
    source = source_value.strip() if isinstance(source_value, str) else path_source(path)
    return Provenance(source=source, declared_date=declared, attributes=rest)
