"""`citewise.client` and `citewise upload` against a real `citewise serve` over HTTP: upload and wait,
query, search, documents, settings, a FAILED document, API errors with their codes and request ids."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest

from citewise.client import CitewiseClient, CitewiseClientError
from citewise.domain.models import DocumentStatus
from citewise.domain.sources import SourceKind, SourceSpec
from citewise.domain.tenant_settings import TenantSettings
from citewise.query.notices import NO_DOCUMENTS
from tests.e2e.helpers import INGEST_TIMEOUT_S, Api, citewise_script, settle_source
from tests.e2e.helpers import new_tenant as _tenant

RUNBOOK = b"# Runbook\n\n## Rotation\n\nRotate the signing key every ninety days. Keys live in KMS.\n"


@pytest.fixture
def client(api: Api) -> CitewiseClient:
    """A client of the session's server for a user of a tenant of its own."""
    return CitewiseClient(api.url, api.token(_tenant(), "alice"))


def write(folder: Path, name: str, data: bytes) -> Path:
    (folder / name).write_bytes(data)
    return folder / name


def test_an_uploaded_file_is_indexed_answered_listed_and_deleted(client: CitewiseClient, tmp_path: Path) -> None:
    # Given a tenant with nothing indexed: a question says so
    empty = client.query("How often is the signing key rotated?")
    assert (empty.answer, empty.grounded) == (NO_DOCUMENTS, False)
    assert empty.notice is not None and empty.notice.code == "NO_DOCUMENTS"
    nothing = client.search("signing key")
    assert nothing.hits == [] and nothing.notice is not None and nothing.notice.code == "NO_DOCUMENTS"
    # When a file is uploaded into a folder and waited for
    seen: list[DocumentStatus] = []
    uploaded = client.upload(write(tmp_path, "runbook.md", RUNBOOK), filename="ops/runbook.md")
    document = client.wait(uploaded, timeout=INGEST_TIMEOUT_S, on_status=lambda d: seen.append(d.status))
    # Then it is INDEXED at that path, in the version uploaded
    assert (document.status, document.path, document.version) == (
        DocumentStatus.INDEXED,
        "ops/runbook.md",
        uploaded.version,
    )
    assert document.chunk_count >= 1 and seen[-1] is DocumentStatus.INDEXED
    # And it answers, with a citation quoting it
    answer = client.query("How often is the signing key rotated?", top_k=3)
    assert answer.grounded and answer.notice is None and answer.request_id
    assert answer.citations[0].quote == "Rotate the signing key every ninety days."
    hits = client.search("signing key", filters={"startsWith": {"key": "path", "value": "ops/"}}).hits
    assert [hit.chunk.document.doc_id for hit in hits] == [document.doc_id]
    typed = client.search("signing key", filters={"equals": {"key": "page", "value": "1"}})
    assert typed.hits == [] and typed.notice is not None and typed.notice.code == "NO_FILTER_MATCH"
    # And it is listed and read back
    page = client.list_documents(status=DocumentStatus.INDEXED, path_prefix="ops/")
    assert [d.doc_id for d in page.items] == [document.doc_id] and page.next_cursor is None
    assert client.get_document(document.doc_id) == document
    # And the citation opens at its passage: its chunk's span of the parsed text holds the quote, and the
    # original downloads as the bytes that were indexed
    text = client.document_text(document.doc_id)
    [cited] = [chunk for chunk in text.chunks if chunk.chunk_id == answer.citations[0].chunk_id]
    assert answer.citations[0].quote in text.text[cited.start : cited.end]
    with urllib.request.urlopen(client.document_content(document.doc_id).url, timeout=10) as original:
        assert original.read() == RUNBOOK
    # When deleted, then it is gone: a NOT_FOUND error with the API's code, status and request id
    client.delete_document(document.doc_id)
    with pytest.raises(CitewiseClientError) as gone:
        client.get_document(document.doc_id)
    assert (gone.value.code, gone.value.status, gone.value.retryable) == ("NOT_FOUND", 404, False)
    assert gone.value.request_id and gone.value.request_id in str(gone.value)


def test_a_file_that_cannot_be_parsed_ends_failed_with_its_reason(client: CitewiseClient, tmp_path: Path) -> None:
    document = client.upload_and_wait(write(tmp_path, "broken.pdf", b"not a pdf at all"), timeout=INGEST_TIMEOUT_S)
    assert document.status is DocumentStatus.FAILED and document.error and document.error.startswith("PARSE_ERROR")


def test_api_errors_carry_their_code_status_details_and_request_id(api: Api, client: CitewiseClient) -> None:
    # An unsupported format is refused before any upload: 415
    with pytest.raises(CitewiseClientError) as refused:
        client.create_upload("notes.exe", 10)
    assert (refused.value.code, refused.value.status) == ("UNSUPPORTED_MEDIA_TYPE", 415) and refused.value.request_id
    # A body the API does not take: 400 with the failing location in the details
    with pytest.raises(CitewiseClientError) as invalid:
        client.query("q", top_k=500)
    assert (invalid.value.code, invalid.value.status) == ("VALIDATION_ERROR", 400)
    assert invalid.value.details["errors"][0]["loc"] == ["body", "top_k"]
    # Changing the settings needs the admin group: 403
    with pytest.raises(CitewiseClientError) as forbidden:
        client.put_settings(TenantSettings(freshness_weight=0.5))
    assert (forbidden.value.code, forbidden.value.status) == ("FORBIDDEN", 403)
    # A bad token: 401
    with pytest.raises(CitewiseClientError) as unauthorized:
        CitewiseClient(api.url, "not-a-token").list_documents()
    assert (unauthorized.value.code, unauthorized.value.status) == ("UNAUTHORIZED", 401)
    # No server: a connection error, retryable, without a request id
    with pytest.raises(CitewiseClientError) as unreachable:
        CitewiseClient("http://127.0.0.1:9", "t", timeout=5).health()
    assert (unreachable.value.code, unreachable.value.request_id, unreachable.value.retryable) == (
        "CONNECTION_ERROR",
        None,
        True,
    )


def test_an_admin_reads_and_replaces_the_tenant_settings(api: Api) -> None:
    admin = CitewiseClient(api.url, api.token(_tenant(), "root", "admin"))
    stored = admin.put_settings(TenantSettings(freshness_weight=0.25, source_credibility={"wiki": 0.5}))
    assert (stored.freshness_weight, stored.updated_by) == (0.25, "root")
    assert admin.get_settings() == stored
    assert admin.health().status == "ok"


def upload_command(api: Api, *arguments: str, token: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in api.env.items() if key not in ("CITEWISE_TOKEN", "CITEWISE_SERVER")}
    if token is not None:
        env["CITEWISE_TOKEN"] = token
    return subprocess.run(  # noqa: S603 - our own console script
        [citewise_script(), "upload", *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=INGEST_TIMEOUT_S + 30,
        check=False,
    )


def test_the_upload_command_waits_for_each_file_and_exits_1_on_a_failed_one(api: Api, tmp_path: Path) -> None:
    token = api.token(_tenant(), "alice")
    good, bad = write(tmp_path, "runbook.md", RUNBOOK), write(tmp_path, "broken.pdf", b"not a pdf")
    # When both are uploaded in one command, with the token from the environment
    done = upload_command(api, str(good), str(bad), "--server", api.url, "--prefix", "ops", token=token)
    # Then one line each says how it ended, and the FAILED one makes the exit status 1
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("INDEXED   ops/runbook.md (") and "chunks)" in lines[0]
    assert lines[1].startswith("FAILED    ops/broken.pdf (") and "PARSE_ERROR" in lines[1]
    # And the good one alone, as JSON, exits 0 (the same content again: already indexed)
    again = upload_command(api, str(good), "--server", api.url, "--prefix", "ops", "--json", token=token)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) | {"document_id": ""} == {
        "document_id": "",
        "path": "ops/runbook.md",
        "sidecar": False,
        "status": "INDEXED",
        "chunks": 1,
        "error": None,
    }


def test_the_upload_command_exit_status_tells_input_errors_from_an_unreachable_server(api: Api, tmp_path: Path) -> None:
    token = api.token(_tenant(), "alice")
    good = write(tmp_path, "runbook.md", RUNBOOK)
    no_token = upload_command(api, str(good), "--server", api.url, token=None)
    assert no_token.returncode == 2 and "citewise token" in no_token.stderr
    refused = upload_command(api, str(write(tmp_path, "a.exe", b"MZ")), "--server", api.url, token=token)
    assert refused.returncode == 2 and refused.stderr.startswith("error: UNSUPPORTED_MEDIA_TYPE: ")
    assert "(request " in refused.stderr
    folder = upload_command(api, str(tmp_path), "--server", api.url, token=token)
    assert folder.returncode == 2 and "not folders" in folder.stderr
    unreachable = upload_command(api, str(good), "--server", "http://127.0.0.1:9", token=token)
    assert unreachable.returncode == 3 and unreachable.stderr.startswith("error: CONNECTION_ERROR: ")


def test_the_upload_command_exits_2_for_a_name_the_api_refuses_not_3(api: Api, tmp_path: Path) -> None:
    # Given a file whose name a file system holds but the naming policy refuses (246 + 3 bytes)
    long_name = write(tmp_path, "x" * 246 + ".md", RUNBOOK)
    # When it is uploaded
    done = upload_command(api, str(long_name), "--server", api.url, token=api.token(_tenant(), "alice"))
    # Then the refusal is permanent (2: the same command fails again), not "retry later" (3)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: VALIDATION_ERROR: invalid document path: ") and "(request " in done.stderr


def test_a_conversation_through_the_client(api: Api, tmp_path: Path) -> None:
    # Given an indexed runbook
    tenant = _tenant()
    client = CitewiseClient(api.url, api.token(tenant, "alice"))
    client.upload_and_wait(write(tmp_path, "runbook.md", RUNBOOK), timeout=INGEST_TIMEOUT_S)
    # When alice asks, then asks a follow-up in the answer's conversation
    first = client.query("How often is the signing key rotated?")
    assert first.conversation is not None and first.conversation.turn == 1
    follow_up = client.query("Where do they live?", conversation_id=first.conversation.conversation_id)
    # Then it is turn 2, searched with the first question's topic, and the conversation reads back
    assert follow_up.conversation is not None and follow_up.conversation.turn == 2
    assert "signing key" in follow_up.conversation.standalone_question
    conversation_id = first.conversation.conversation_id
    assert [c.conversation_id for c in client.list_conversations().conversations] == [conversation_id]
    shown = client.get_conversation(conversation_id)
    assert [t.question for t in shown.history] == ["How often is the signing key rotated?", "Where do they live?"]
    # And bob of her tenant gets NOT_FOUND for it; once she deletes it, so does she
    bob = CitewiseClient(api.url, api.token(tenant, "bob"))
    with pytest.raises(CitewiseClientError) as refused:
        bob.get_conversation(conversation_id)
    assert (refused.value.code, refused.value.status) == ("NOT_FOUND", 404)
    client.delete_conversation(conversation_id)
    with pytest.raises(CitewiseClientError) as gone:
        client.get_conversation(conversation_id)
    assert gone.value.status == 404


def test_web_sources_through_the_client(api: Api) -> None:
    # Given a tenant admin and a member
    tenant = _tenant()
    admin_token = api.token(tenant, "root", "admin")
    admin = CitewiseClient(api.url, admin_token)
    member = CitewiseClient(api.url, api.token(tenant, "alice"))
    # When the admin registers two sources
    spec = SourceSpec(kind=SourceKind.SITEMAP, url="https://docs.example.com/sitemap.xml", version="3.12")
    first = admin.create_source(spec)
    second = admin.create_source(SourceSpec(kind=SourceKind.URLS, urls=["https://docs.example.com/a"]))
    # Then every member lists and reads them; only the admin may refresh
    assert [s.source_id for s in member.list_sources()] == [first.source_id, second.source_id]
    assert member.get_source(first.source_id).spec == spec
    with pytest.raises(CitewiseClientError) as refused:
        member.refresh_source(first.source_id)
    assert refused.value.status == 403
    # (the server's own refresh loop starts a new source at once when it wakes, so it may be first: then the
    # admin's refresh is refused as a second one; tests/e2e/test_sources_docsite.py holds a slow refresh to
    # show the 409 deterministically)
    try:
        assert admin.refresh_source(first.source_id).running is not None
    except CitewiseClientError as running:
        assert (running.status, running.code) == (409, "REFRESH_RUNNING")
    # And the other source is removed once no refresh holds it (the server's loop may be refreshing it too)
    settle_source(api, admin_token, second.source_id)
    admin.delete_source(second.source_id)
    assert [s.source_id for s in member.list_sources()] == [first.source_id]
    with pytest.raises(CitewiseClientError) as bad:
        admin.create_source(SourceSpec(kind=SourceKind.URLS, urls=["http://10.0.0.1/"]))
    assert bad.value.status == 400 and bad.value.details["reason"] == "private_address"


def test_feedback_through_the_client(api: Api, tmp_path: Path) -> None:
    # Given alice's answer from a runbook under ops/
    tenant = _tenant()
    client = CitewiseClient(api.url, api.token(tenant, "alice"))
    client.upload_and_wait(write(tmp_path, "runbook.md", RUNBOOK), filename="ops/runbook.md", timeout=INGEST_TIMEOUT_S)
    answer = client.query("How often is the signing key rotated?")
    assert answer.conversation is not None and answer.citations
    # When she rates its first citation helpful
    receipt = client.feedback(answer.conversation.response_id, helpful=True, citation=answer.citations[0].source)
    # Then it counts for the runbook's source, and the source's stats say so
    assert (receipt.replaced, receipt.feedback.sources) == (False, ["ops"])
    stats = client.source_stats("ops")
    assert (stats.helpful, stats.not_helpful, stats.rated) == (1, 0, 1)
    # And bob of her tenant cannot rate her answer
    bob = CitewiseClient(api.url, api.token(tenant, "bob"))
    with pytest.raises(CitewiseClientError) as refused:
        bob.feedback(answer.conversation.response_id, helpful=False)
    assert (refused.value.code, refused.value.status) == ("NOT_FOUND", 404)
