"""A document's source and source date: from its metadata, its format's own properties, or its path."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime

import pytest
from pypdf import PdfReader, PdfWriter

from citewise.domain.errors import ParseError, ValidationError
from citewise.domain.metadata import parse_sidecar
from citewise.domain.provenance import ProvenanceKeys, parse_instant, path_source, provenance, try_instant
from citewise.ingest.parsing import parse
from tests.builders import make_pdf

KEYS = ProvenanceKeys()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-03", datetime(2026, 3, 3, tzinfo=UTC)),
        ("2026-03-03T10:15:30Z", datetime(2026, 3, 3, 10, 15, 30, tzinfo=UTC)),
        ("2026-03-03T10:15:30.999+01:00", datetime(2026, 3, 3, 9, 15, 30, tzinfo=UTC)),
        ("2026-03-03 10:15", datetime(2026, 3, 3, 10, 15, tzinfo=UTC)),
    ],
)
def test_iso_dates_become_utc_instants_to_the_second(text: str, expected: datetime) -> None:
    assert parse_instant(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "03/03/2026", "2026-13-01"])
def test_what_is_not_an_iso_date_is_refused(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the reason is the caller's to phrase
        parse_instant(text)


def test_tool_written_dates_also_read_http_dates_and_pass_over_junk() -> None:
    assert try_instant("Tue, 03 Mar 2026 10:00:00 GMT") == datetime(2026, 3, 3, 10, tzinfo=UTC)
    assert try_instant("last tuesday") is None
    assert try_instant(None) is None


def test_the_source_is_the_metadata_value_else_the_first_folder_else_empty() -> None:
    assert provenance("jira/PROJ-1.md", {"source": "Jira Cloud"}, KEYS).source == "Jira Cloud"
    assert provenance("jira/PROJ-1.md", {}, KEYS).source == "jira"
    assert provenance("notes.md", {}, KEYS).source == ""
    assert path_source("a/b/c.md") == "a"


def test_the_source_and_date_keys_are_taken_out_of_the_attributes() -> None:
    # Given a sidecar naming the source and the date beside other attributes
    attributes = parse_sidecar(
        b'{"metadataAttributes": {"source": "wiki", "updated_at": "2025-12-01", "team": "x"}}', "s"
    )
    # When its provenance is read
    found = provenance("docs/a.md", attributes, KEYS)
    # Then source and date are the document's, the rest stay attributes
    assert (found.source, found.declared_date) == ("wiki", datetime(2025, 12, 1, tzinfo=UTC))
    assert found.attributes == {"team": "x"}


def test_the_keys_are_configurable() -> None:
    keys = ProvenanceKeys(source="origin", date="modified")
    found = provenance("docs/a.md", {"origin": "crm", "modified": "2024-02-29", "source": "kept"}, keys)
    assert (found.source, found.declared_date) == ("crm", datetime(2024, 2, 29, tzinfo=UTC))
    assert found.attributes == {"source": "kept"}


@pytest.mark.parametrize("value", ["next tuesday", "2026-02-30", 20260301, True, ["2026-03-01"]])
def test_a_metadata_date_that_is_not_a_date_is_a_validation_error_naming_the_key(value: object) -> None:
    with pytest.raises(ValidationError, match="metadata 'updated_at' is not a date") as caught:
        provenance("a.md", {"updated_at": value}, KEYS)  # type: ignore[dict-item]
    assert caught.value.details == {"key": "updated_at"}


def test_a_source_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(ValidationError, match="must be a string"):
        provenance("a.md", {"source": 3}, KEYS)


def test_the_channel_and_source_date_keys_stay_reserved_in_a_sidecar() -> None:
    for key in ("channel", "source_date", "owner"):
        with pytest.raises(ValidationError, match="reserved"):
            parse_sidecar(b'{"metadataAttributes": {"%s": "x"}}' % key.encode(), "s")


# --- the formats' own dates ------------------------------------------------------------------------


def test_markdown_front_matter_updated_wins_over_date() -> None:
    text = b"---\ntitle: Runbook\ndate: 2024-01-01\nupdated: '2025-06-30T08:00:00Z'\n---\n# Runbook\n\nSteps.\n"
    assert parse(text, "a.md").source_date == datetime(2025, 6, 30, 8, tzinfo=UTC)
    assert parse(b"---\ndate: 2024-01-01\n---\nBody.\n", "a.md").source_date == datetime(2024, 1, 1, tzinfo=UTC)
    assert parse(b"# No front matter\n\ndate: 2024-01-01\n", "a.md").source_date is None


def test_a_front_matter_date_that_is_not_a_date_fails_the_document_with_the_reason() -> None:
    with pytest.raises(ParseError, match="front matter 'date' is not a date: 'soon'"):
        parse(b"---\ndate: soon\n---\nBody.\n", "a.md")


def test_html_meta_dates_in_order_of_preference() -> None:
    page = (
        b'<html><head><meta name="date" content="2020-01-01">'
        b'<meta property="article:modified_time" content="2025-05-05T05:05:05+02:00">'
        b"</head><body><p>Text</p></body></html>"
    )
    assert parse(page, "a.html").source_date == datetime(2025, 5, 5, 3, 5, 5, tzinfo=UTC)
    junk = b'<html><head><meta name="date" content="someday"></head><body><p>Text</p></body></html>'
    assert parse(junk, "a.html").source_date is None


def test_pdf_modification_date_else_creation_date() -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Some text on a page."]))))
    writer.add_metadata({"/CreationDate": "D:20200101000000Z", "/ModDate": "D:20250102030405+01'00'"})
    out = io.BytesIO()
    writer.write(out)
    assert parse(out.getvalue(), "a.pdf").source_date == datetime(2025, 1, 2, 2, 4, 5, tzinfo=UTC)
    writer.add_metadata({"/ModDate": "not a date"})
    out = io.BytesIO()
    writer.write(out)
    assert parse(out.getvalue(), "a.pdf").source_date == datetime(2020, 1, 1, tzinfo=UTC)


def _docx(core: str | None) -> bytes:
    body = (
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        "<w:body><w:p><w:r><w:t>Hello.</w:t></w:r></w:p></w:body></w:document>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", body)
        if core is not None:
            archive.writestr(
                "docProps/core.xml",
                '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties"'
                ' xmlns:dcterms="http://purl.org/dc/terms/">' + core + "</cp:coreProperties>",
            )
    return buffer.getvalue()


def test_docx_core_properties_modified_else_created() -> None:
    both = (
        "<dcterms:created>2021-01-01T00:00:00Z</dcterms:created>"
        "<dcterms:modified>2024-07-08T09:10:11Z</dcterms:modified>"
    )
    assert parse(_docx(both), "a.docx").source_date == datetime(2024, 7, 8, 9, 10, 11, tzinfo=UTC)
    created = "<dcterms:created>2021-01-01T00:00:00Z</dcterms:created><dcterms:modified>n/a</dcterms:modified>"
    assert parse(_docx(created), "a.docx").source_date == datetime(2021, 1, 1, tzinfo=UTC)
    assert parse(_docx(None), "a.docx").source_date is None
