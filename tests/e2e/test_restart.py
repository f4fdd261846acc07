"""A crash of `citewise serve`: killed (SIGKILL, nothing drained) with accepted uploads still in its
in-memory ingest queue, then started again on the same home, which must settle every one of them."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from citewise.domain.models import DocumentStatus
from citewise_local.registry import LocalRegistry
from tests.e2e.helpers import Api, serve, server_environment, upload, wait_for_status

TENANT = "crash-test"
UPLOADS = 24
CLIENTS = 6


def _report(number: int) -> bytes:
    """A Markdown report of about 300 KB: big enough that ingesting it takes far longer than uploading it."""
    sections = [
        f"## Section {section}\n\n"
        + " ".join(
            f"Report {number} section {section} figure {figure} grew by {figure * 7 % 97} units."
            for figure in range(60)
        )
        for section in range(60)
    ]
    return (f"# Report {number}\n\n" + "\n\n".join(sections)).encode()


def _stop(server: Api) -> None:
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=60)


def test_uploads_accepted_before_a_kill_are_all_indexed_or_failed_after_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = server_environment(home)
    log = tmp_path / "server.log"
    # Given a server that accepts many uploads from several clients at once, one of them unparseable
    first = serve(home, log, env)
    try:
        token = first.token(TENANT, "alice")
        files = [(f"reports/report-{n:02}.md", _report(n), "text/markdown") for n in range(UPLOADS)]
        files.append(("reports/broken.pdf", b"%PDF-1.7 this is not really a pdf", "application/pdf"))
        with ThreadPoolExecutor(CLIENTS) as clients:
            accepted = dict(zip(clients.map(lambda file: upload(first, token, *file), files), files, strict=True))
    finally:
        # When it is killed the moment the last PUT was accepted
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=60)
    # (and the kill did cut ingestion short: some accepted upload has no settled record yet)
    registry = LocalRegistry(home / "registry.db")
    try:
        records = {doc_id: registry.get(TENANT, doc_id) for doc_id in accepted}
    finally:
        registry.close()
    unsettled = [
        doc_id for doc_id, record in records.items() if record is None or record.status is DocumentStatus.PENDING
    ]
    assert unsettled, "ingestion finished before the kill: this run shows nothing about a restart"
    # And started again on the same home
    second = serve(home, log, env)
    try:
        # Then every accepted upload is indexed, or failed with the reason
        settled = {doc_id: wait_for_status(second, token, doc_id) for doc_id in accepted}
        pending = second.request("GET", "/v1/documents?status=PENDING", token=token)
    finally:
        _stop(second)
    for doc_id, (path, _, _) in accepted.items():
        document = settled[doc_id]
        assert document["path"] == path
        if path.endswith(".pdf"):
            assert document["status"] == "FAILED" and document["error"], document
        else:
            assert document["status"] == "INDEXED" and document["chunk_count"] > 0, document
    assert pending.status == 200 and pending.json()["items"] == []
    assert "reconciled on start:" in log.read_text()
