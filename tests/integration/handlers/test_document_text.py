"""The document behind a citation: its original (`/content`) and its parsed text (`/text`), on both stacks."""

from __future__ import annotations

from typing import Any

from tests.builders import make_pdf
from tests.integration.handlers.harness import Stack, claims

ALICE = claims("acme", "alice")
BOB = claims("acme", "bob")
GLOBEX = claims("globex", "gina")
RUNBOOK = (
    b"# Operations\n\n## Key rotation\n\nRotate the signing keys every ninety days with the rotate-keys job.\n\n"
    b"## Backups\n\nBackups run nightly and are kept for thirty days.\n"
)
PAGES = [
    "The herons nest in the reeds by the northern lake.",
    "Otters float on their backs and hold hands while they sleep.",
]


def _cited(stack: Stack, question: str) -> dict[str, Any]:
    status, answer = stack.api("POST", "/v1/query", body={"query": question}, identity=ALICE)
    assert status == 200 and answer["citations"], answer
    return dict(answer["citations"][0])


def _span(text: dict[str, Any], chunk_id: str) -> str:
    [chunk] = [chunk for chunk in text["chunks"] if chunk["chunk_id"] == chunk_id]
    return str(text["text"][chunk["start"] - text["offset"] : chunk["end"] - text["offset"]])


def test_a_citation_opens_at_its_passage_in_the_parsed_text_and_the_original(stack: Stack) -> None:
    doc_id = stack.upload_and_ingest(ALICE, "runbooks/ops.md", RUNBOOK)
    citation = _cited(stack, "How often are the signing keys rotated?")
    # When the reader opens the cited document's text
    status, text = stack.api("GET", f"/v1/documents/{doc_id}/text", identity=ALICE)
    assert status == 200, text
    # Then the cited chunk's span holds the quote verbatim, under its section, in the indexed layout
    assert citation["quote"] in _span(text, citation["chunk_id"])
    assert text["indexed_layout"] is True and text["next_offset"] is None
    assert (text["offset"], text["char_count"], text["path"]) == (0, len(text["text"]), "runbooks/ops.md")
    assert {tuple(section["heading_path"]) for section in text["sections"]} >= {("Operations", "Key rotation")}
    # And the original downloads as the bytes that were indexed, as an attachment (not a PDF)
    status, download = stack.api("GET", f"/v1/documents/{doc_id}/content", identity=ALICE)
    assert status == 200 and download["document_id"] == doc_id and download["disposition"] == "attachment"
    status, data, headers = stack.download(download)
    assert (status, data) == (200, RUNBOOK)
    assert headers["content-disposition"].startswith('attachment; filename="ops.md"')


def test_a_pdf_citation_names_its_page_and_the_pdf_is_served_inline(stack: Stack) -> None:
    pdf = make_pdf(PAGES)
    doc_id = stack.upload_and_ingest(ALICE, "nature/animals.pdf", pdf)
    citation = _cited(stack, "How do otters sleep?")
    status, text = stack.api("GET", f"/v1/documents/{doc_id}/text", identity=ALICE)
    assert status == 200, text
    # The pages cover the text in order, and the cited chunk lies on the cited page
    assert [page["page"] for page in text["pages"]] == [1, 2]
    [page] = [page for page in text["pages"] if page["page"] == citation["page"]]
    [chunk] = [chunk for chunk in text["chunks"] if chunk["chunk_id"] == citation["chunk_id"]]
    assert page["start"] <= chunk["start"] < chunk["end"] <= page["end"] and chunk["page"] == 2
    assert "Otters float" in text["text"][page["start"] : page["end"]]
    status, download = stack.api("GET", f"/v1/documents/{doc_id}/content", identity=ALICE)
    assert status == 200 and (download["content_type"], download["disposition"]) == ("application/pdf", "inline")
    assert stack.download(download)[1] == pdf


def test_the_text_comes_in_windows_with_the_spans_that_overlap_each(stack: Stack) -> None:
    doc_id = stack.upload_and_ingest(ALICE, "runbooks/ops.md", RUNBOOK)
    whole = stack.api("GET", f"/v1/documents/{doc_id}/text", identity=ALICE)[1]
    offset, pieces, seen = 0, [], set()
    while offset is not None:
        page = {"offset": str(offset), "limit": "40"}
        status, window = stack.api("GET", f"/v1/documents/{doc_id}/text", query=page, identity=ALICE)
        assert status == 200 and window["offset"] == offset and len(window["text"]) <= 40
        assert all(c["end"] > offset and c["start"] < offset + len(window["text"]) for c in window["chunks"])
        pieces.append(window["text"])
        seen |= {chunk["chunk_id"] for chunk in window["chunks"]}
        offset = window["next_offset"]
    assert "".join(pieces) == whole["text"]
    assert seen == {chunk["chunk_id"] for chunk in whole["chunks"]}
    status, error = stack.api("GET", f"/v1/documents/{doc_id}/text", query={"limit": "0"}, identity=ALICE)
    assert status == 400 and error["error"]["code"] == "VALIDATION_ERROR"


def test_no_one_else_learns_anything_of_a_private_document(stack: Stack) -> None:
    doc_id = stack.upload_and_ingest(ALICE, "diary.md", b"# Diary\n\nThe heron returned today.\n", visibility="private")
    for route in ("text", "content"):
        assert stack.api("GET", f"/v1/documents/{doc_id}/{route}", identity=ALICE)[0] == 200
        for other in (BOB, GLOBEX):
            status, error = stack.api("GET", f"/v1/documents/{doc_id}/{route}", identity=other)
            assert status == 404 and error["error"]["code"] == "NOT_FOUND" and "heron" not in str(error)


def test_a_document_replaced_since_it_was_indexed_or_not_indexed_is_a_clear_conflict(stack: Stack) -> None:
    doc_id = stack.upload_and_ingest(ALICE, "runbooks/ops.md", RUNBOOK)
    # The file is replaced; its new version has not been ingested yet
    stack.put_object("tenants/acme/runbooks/ops.md", b"# Operations\n\nEverything changed.\n", owner="alice")
    for route in ("text", "content"):
        status, error = stack.api("GET", f"/v1/documents/{doc_id}/{route}", identity=ALICE)
        assert status == 409 and "changed since it was indexed" in error["error"]["message"], error
    # A document that failed to parse has no text a citation could point into
    failed = stack.upload_and_ingest(ALICE, "broken.pdf", b"%PDF-1.7 not a pdf at all")
    status, error = stack.api("GET", f"/v1/documents/{failed}/text", identity=ALICE)
    assert status == 409 and "FAILED" in error["error"]["message"]
