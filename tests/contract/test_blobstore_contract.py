"""One BlobStore contract, run against the local folder store and S3 (under moto).

Each adapter comes with the three things a test cannot do through the port: write an object behind
the store's back (as another S3 client would), count content downloads, and perform a presigned upload
the way a client would (an HTTP PUT for S3, `redeem` for the local server).
"""

from __future__ import annotations

import json
import multiprocessing
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
import pytest
import requests
from moto import mock_aws

from citewise.aws.s3 import S3BlobStore, s3_client
from citewise.domain.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
    ValidationError,
)
from citewise.domain.metadata import SIDECAR_SUFFIX
from citewise.domain.models import Visibility
from citewise.domain.objects import SourceObject
from citewise.domain.tenancy import MAX_SEGMENT_BYTES, document_id
from citewise.ports.blobstore import DOWNLOAD_SECONDS, BlobStore, PresignedDownload, PresignedUpload
from citewise_local.blobstore import DOWNLOAD_ROUTE, UPLOAD_ROUTE, LocalBlobStore

BUCKET = "citewise-documents"
MAX_BYTES = 1024
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@dataclass
class Adapter:
    store: BlobStore
    write_raw: Callable[[str, bytes], None]  # (key under the root, data), bypassing the store
    downloads: Callable[[], int]
    upload: Callable[[PresignedUpload, bytes, dict[str, str]], None]
    assert_scoped: Callable[[PresignedUpload, str, str], None]  # (upload, tenant_id, path)
    download: Callable[[PresignedDownload], tuple[bytes, dict[str, str]]]  # a browser's GET: body, headers


@pytest.fixture
def local_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Adapter:
    root = tmp_path / "blobs"
    store = LocalBlobStore(root, max_bytes=MAX_BYTES, secret=b"k" * 32, clock=lambda: NOW)
    reads: list[Path] = []
    original_open, original_read_bytes = Path.open, Path.read_bytes

    def counting_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "r" in mode:
            reads.append(self)
        return original_open(self, mode, *args, **kwargs)

    def counting_read_bytes(self: Path) -> bytes:
        reads.append(self)
        return original_read_bytes(self)

    monkeypatch.setattr(Path, "open", counting_open)
    monkeypatch.setattr(Path, "read_bytes", counting_read_bytes)

    def write_raw(key: str, data: bytes) -> None:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)

    def upload(presigned: PresignedUpload, data: bytes, headers: dict[str, str]) -> None:
        store.redeem(presigned.url.rsplit("/", 1)[-1], data, headers)

    def assert_scoped(presigned: PresignedUpload, tenant_id: str, path: str) -> None:
        assert presigned.url.startswith("http://127.0.0.1:8080" + UPLOAD_ROUTE)
        grant = store.verify(presigned.url.rsplit("/", 1)[-1])
        assert (grant.tenant_id, grant.path) == (tenant_id, path)

    def download(presigned: PresignedDownload) -> tuple[bytes, dict[str, str]]:
        assert presigned.url.startswith("http://127.0.0.1:8080" + DOWNLOAD_ROUTE)
        data, how = store.download(presigned.url.rsplit("/", 1)[-1])
        return data, {"content-type": how.content_type, "content-disposition": how.content_disposition}

    return Adapter(
        store,
        write_raw,
        lambda: sum(1 for path in reads if (root / "tenants") in path.parents),
        upload,
        assert_scoped,
        download,
    )


@pytest.fixture
def s3_store(aws_credentials: None) -> Iterator[Adapter]:
    with mock_aws():
        client = s3_client()
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        gets: list[str] = []
        client.meta.events.register("before-call.s3.GetObject", lambda params, **_: gets.append(params["url_path"]))
        store = S3BlobStore(BUCKET, client=client, max_bytes=MAX_BYTES, clock=lambda: NOW)

        def write_raw(key: str, data: bytes) -> None:
            boto3.client("s3").put_object(Bucket=BUCKET, Key=key, Body=data)

        def upload(presigned: PresignedUpload, data: bytes, headers: dict[str, str]) -> None:
            response = requests.put(presigned.url, data=data, headers=headers, timeout=10)
            assert response.status_code == 200, (response.status_code, response.text)

        def assert_scoped(presigned: PresignedUpload, tenant_id: str, path: str) -> None:
            url = urlsplit(presigned.url)
            assert url.scheme == "https" and url.netloc == f"{BUCKET}.s3.amazonaws.com"
            assert unquote(url.path) == f"/tenants/{tenant_id}/{path}"
            query = parse_qs(url.query)
            assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
            assert query["X-Amz-Expires"] == ["900"]
            signed = set(query["X-Amz-SignedHeaders"][0].split(";"))
            expected = {"content-type", "content-length", "if-none-match", "x-amz-meta-owner", "x-amz-meta-visibility"}
            assert expected <= signed

        def download(presigned: PresignedDownload) -> tuple[bytes, dict[str, str]]:
            response = requests.get(presigned.url, timeout=10)
            if response.status_code == 404:
                raise NotFoundError(response.text)
            assert response.status_code == 200, (response.status_code, response.text)
            return response.content, {name.lower(): value for name, value in response.headers.items()}

        # Downloads of documents: `get` asks for a sidecar with every read, which is metadata, not content.
        downloads = lambda: sum(1 for path in gets if not path.endswith(SIDECAR_SUFFIX))  # noqa: E731
        yield Adapter(store, write_raw, downloads, upload, assert_scoped, download)


@pytest.fixture(params=["local", "s3"])
def adapter(request: pytest.FixtureRequest) -> Adapter:
    fixture: Adapter = request.getfixturevalue(f"{request.param}_store")
    return fixture


# --- the shared contract ------------------------------------------------------------------------------


def test_put_get_with_metadata_and_sidecar(adapter: Adapter) -> None:
    store = adapter.store
    # Given a document with user metadata and a sidecar that overrides one key and adds typed ones
    data = b"# Q1\n\nRevenue grew."
    version = store.put(
        "acme",
        "reports/q1.md",
        data,
        content_type="text/markdown",
        owner="alice",
        visibility=Visibility.PRIVATE,
        metadata={"team": "platform", "region": "eu"},
    )
    sidecar = {"metadataAttributes": {"team": "search", "year": 2026, "tags": ["finance"]}}
    store.put("acme", "reports/q1.md" + SIDECAR_SUFFIX, json.dumps(sidecar).encode(), owner="alice")
    # When it is read
    stored = store.get("acme", "reports/q1.md")
    # Then every fact comes back, and the bytes load on demand
    assert (stored.tenant_id, stored.path, stored.size, stored.version) == ("acme", "reports/q1.md", len(data), version)
    assert stored.content_type == "text/markdown"
    assert (stored.owner, stored.visibility) == ("alice", Visibility.PRIVATE)
    assert stored.metadata == {"team": "platform", "region": "eu", "owner": "alice", "visibility": "private"}
    assert stored.attributes == {"team": "search", "region": "eu", "year": 2026, "tags": ["finance"]}
    assert (stored.defect, stored.refused_sidecar) == (None, None)
    assert stored.load() == data
    # And it is the pipeline's input as it is (one model: no conversion can drop a fact), from this store
    assert isinstance(stored, SourceObject) and stored.channel == store.channel
    assert stored.last_modified is not None


def test_an_object_without_metadata_is_shared_and_owned_by_system(adapter: Adapter) -> None:
    adapter.write_raw("tenants/acme/dropped.txt", b"hello")
    stored = adapter.store.get("acme", "dropped.txt")
    assert (stored.owner, stored.visibility, stored.attributes, stored.size) == ("system", Visibility.SHARED, {}, 5)


def test_the_version_changes_on_overwrite(adapter: Adapter) -> None:
    first = adapter.store.put("acme", "a.txt", b"one")
    second = adapter.store.put("acme", "a.txt", b"two")
    stored = adapter.store.get("acme", "a.txt")
    assert first != second and stored.version == second and stored.load() == b"two"


def test_delete_removes_the_object_and_its_sidecar(adapter: Adapter) -> None:
    store = adapter.store
    store.put("acme", "a.txt", b"one")
    store.put("acme", "a.txt" + SIDECAR_SUFFIX, b'{"metadataAttributes": {"k": "v"}}')
    store.delete("acme", "a.txt")
    store.delete("acme", "a.txt")
    for path in ("a.txt", "a.txt" + SIDECAR_SUFFIX):
        with pytest.raises(NotFoundError):
            store.get("acme", path)


def test_a_missing_object_is_not_found(adapter: Adapter) -> None:
    with pytest.raises(NotFoundError):
        adapter.store.get("acme", "nothing/here.pdf")


def test_an_oversized_object_is_a_defect_found_without_downloading_it(adapter: Adapter) -> None:
    # Given an object over the limit, written by another client
    adapter.write_raw("tenants/acme/huge.txt", b"x" * (MAX_BYTES + 1))
    # When it is read, then it comes back with the reason it cannot be ingested, before any content is read
    stored = adapter.store.get("acme", "huge.txt")
    assert isinstance(stored.defect, PayloadTooLargeError)
    assert stored.defect.details == {"path": "huge.txt", "size": MAX_BYTES + 1, "limit": MAX_BYTES}
    assert adapter.downloads() == 0
    # (while an object within the limit is read when loaded: the counter works)
    adapter.write_raw("tenants/acme/small.txt", b"x" * MAX_BYTES)
    adapter.store.get("acme", "small.txt").load()
    assert adapter.downloads() > 0
    # And the store itself never writes one
    with pytest.raises(PayloadTooLargeError):
        adapter.store.put("acme", "huge.txt", b"x" * (MAX_BYTES + 1))


@pytest.mark.parametrize(
    "sidecar",
    [b'{"metadataAttributes": {"owner": "mallory"}}', b'{"metadataAttributes": {"x": NaN}}', b"{"],
    ids=["reserved key", "NaN", "not JSON"],
)
def test_a_bad_sidecar_of_the_owner_is_a_defect_that_keeps_the_objects_owner(adapter: Adapter, sidecar: bytes) -> None:
    # Given alice's private document and a malformed sidecar she wrote
    adapter.store.put("acme", "a.txt", b"one", owner="alice", visibility=Visibility.PRIVATE)
    adapter.store.put("acme", "a.txt" + SIDECAR_SUFFIX, sidecar, owner="alice")
    # When it is read, then the reason is kept for the pipeline to record, under alice and private
    stored = adapter.store.get("acme", "a.txt")
    assert isinstance(stored.defect, ValidationError)
    assert (stored.owner, stored.visibility) == ("alice", Visibility.PRIVATE)


def test_a_sidecar_written_for_someone_else_is_ignored_unread(adapter: Adapter) -> None:
    # Given alice's document, and a sidecar next to it written for bob (a reserved key, even)
    adapter.store.put("acme", "a.txt", b"one", owner="alice", metadata={"team": "search"})
    adapter.store.put("acme", "a.txt" + SIDECAR_SUFFIX, b'{"metadataAttributes": {"owner": "bob"}}', owner="bob")
    # When the document is read
    stored = adapter.store.get("acme", "a.txt")
    # Then the sidecar changes nothing, breaks nothing (its reserved key was never parsed), and says whose
    assert (stored.attributes, stored.defect) == ({"team": "search"}, None)
    assert stored.refused_sidecar is not None and stored.refused_sidecar.owner == "bob"


def test_an_unreadable_visibility_counts_as_private(adapter: Adapter) -> None:
    adapter.write_raw("tenants/acme/a.txt", b"one")
    stored = adapter.store.get("acme", "a.txt")
    assert stored.visibility is Visibility.SHARED
    adapter.store.put("acme", "b.txt", b"one", owner="alice")
    # (metadata written behind the store's back with a value it never writes)
    if isinstance(adapter.store, LocalBlobStore):
        meta = adapter.store._meta_file("acme", "b.txt")
        meta.write_text(json.dumps({"content_type": None, "metadata": {"owner": "alice", "visibility": "everyone"}}))
    else:
        boto3.client("s3").put_object(
            Bucket=BUCKET, Key="tenants/acme/b.txt", Body=b"one", Metadata={"owner": "alice", "visibility": "everyone"}
        )
    stored = adapter.store.get("acme", "b.txt")
    assert (stored.owner, stored.visibility) == ("alice", Visibility.PRIVATE)
    assert isinstance(stored.defect, ValidationError)


def test_head_reads_the_facts_or_none(adapter: Adapter) -> None:
    assert adapter.store.head("acme", "a.txt") is None
    version = adapter.store.put("acme", "a.txt", b"one", owner="alice")
    adapter.store.put("acme", "a.txt" + SIDECAR_SUFFIX, b'{"metadataAttributes": {"k": "v"}}', owner="alice")
    stored = adapter.store.head("acme", "a.txt")
    assert stored is not None and (stored.version, stored.owner, stored.attributes) == (version, "alice", {})
    assert stored.etag


def test_restore_previous_undoes_a_write_and_only_while_it_is_current(adapter: Adapter) -> None:
    store = adapter.store
    # Given alice's document displaced by a write for bob
    store.put("acme", "a.txt", b"alice's", owner="alice", visibility=Visibility.PRIVATE)
    refused = store.put("acme", "a.txt", b"bob's", owner="bob")
    # When the write is undone, then alice's bytes and metadata are current again
    assert store.restore_previous("acme", "a.txt", refused) is True
    stored = store.get("acme", "a.txt")
    assert (stored.load(), stored.owner, stored.visibility) == (b"alice's", "alice", Visibility.PRIVATE)
    # And a version that is no longer current is left alone
    assert store.restore_previous("acme", "a.txt", refused) is False
    assert store.get("acme", "a.txt").load() == b"alice's"


def test_restore_previous_brings_back_nothing_a_deletion_removed(adapter: Adapter) -> None:
    store = adapter.store
    store.put("acme", "a.txt", b"old", owner="alice")
    store.delete("acme", "a.txt")
    first = store.put("acme", "a.txt", b"new", owner="bob")
    assert store.restore_previous("acme", "a.txt", first) is False
    assert store.get("acme", "a.txt").load() == b"new"
    assert store.restore_previous("acme", "missing.txt", "v1") is False


BAD_PATHS = ["../beta/secret.md", "/etc/passwd", "a//b.md", "./a.md", "a/../../beta/x.md", "a\\b.md", ""]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_paths_that_could_escape_the_tenant_are_refused(adapter: Adapter, path: str) -> None:
    store = adapter.store
    with pytest.raises(ValidationError):
        store.get("acme", path)
    with pytest.raises(ValidationError):
        store.put("acme", path, b"x")
    with pytest.raises(ValidationError):
        store.delete("acme", path)
    with pytest.raises(ValidationError):
        store.presign_put("acme", path, owner="alice", content_type="text/plain", size=1, replaces=None)


# Names a new document may not take (the naming policy, `citewise.domain.tenancy.validate_document_name`),
# with a word of the reason each is refused for.
REFUSED_NAMES = {
    "segment of 201 bytes": ("x" * 198 + ".md", "longer than 200 bytes"),
    "segment of 300 bytes": ("reports/" + "é" * 150 + ".md", "longer than 200 bytes"),
    "Cyrillic i in Latin": ("j\u0456ra/PROJ-7.md", "mixes the scripts CYRILLIC, LATIN"),
    "Greek O in Latin": ("jira/PR\u039fJ-7.md", "mixes the scripts GREEK, LATIN"),
    "bidi override": ("invoice\u202efdp.exe.md", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    "bidi isolate": ("a\u2066b.md", "U+2066"),
    "C1 CSI": ("a\u009b31mb.md", "U+009B"),
    "zero-width space": ("jira\u200b/a.md", "U+200B"),
    "no-break space": ("a\u00a0b.md", "U+00A0"),
    "private use": ("a\ue000.md", "U+E000"),
    "unassigned": ("a\U000effff.md", "U+EFFFF"),
    "decomposed (NFD)": ("cafe\u0301.md", "NFC"),
}
ACCEPTED_NAMES = [
    "x" * 197 + ".md",  # 200 bytes
    "x" * 197 + ".md" + SIDECAR_SUFFIX,  # the sidecar of the longest name
    "Москва/отчёт.md",  # one script a word: a Latin extension is a word of its own
    "Отчёт по API.pdf",
    "資料/ＡＢＣ報告.md",  # Japanese writing mixes Han, kana and (fullwidth) Latin
    "한국어 문서.md",
    "naïve café.md",
]


@pytest.mark.parametrize(("path", "reason"), REFUSED_NAMES.values(), ids=REFUSED_NAMES.keys())
def test_a_name_the_policy_refuses_is_never_presigned_nor_written(adapter: Adapter, path: str, reason: str) -> None:
    store = adapter.store
    with pytest.raises(ValidationError, match="invalid document path") as refused:
        store.presign_put("acme", path, owner="alice", content_type="text/plain", size=1, replaces=None)
    assert reason in refused.value.message and refused.value.details == {"field": "path"}
    with pytest.raises(ValidationError, match=re.escape(reason)):
        store.put("acme", path, b"x")


@pytest.mark.parametrize("path", ACCEPTED_NAMES)
def test_names_the_policy_accepts_are_written_and_read_back(adapter: Adapter, path: str) -> None:
    adapter.store.put("acme", path, b"x")
    assert adapter.store.get("acme", path).load() == b"x"
    adapter.store.presign_put("acme", path, owner="alice", content_type="text/plain", size=1, replaces=None)


def test_a_segment_no_file_could_hold_is_refused_on_every_read_not_crashed(adapter: Adapter) -> None:
    # Given a tenant with a document, and a path with a segment over the file system's 255 bytes, which the
    # local store cannot even stat in the tenant's folder
    adapter.store.put("acme", "a.md", b"x")
    path = "x" * 300 + ".md"
    # Then each backend answers a 400-kind error or "nothing there", never an OSError (a 500)
    for read in (adapter.store.head, adapter.store.delete):
        try:
            assert read("acme", path) is None
        except ValidationError as exc:
            assert f"longer than {MAX_SEGMENT_BYTES} bytes" in exc.message
    with pytest.raises((ValidationError, NotFoundError)):
        adapter.store.get("acme", path)


@pytest.mark.parametrize(
    ("path", "reason"),
    [REFUSED_NAMES[name] for name in ("Cyrillic i in Latin", "bidi override", "C1 CSI", "segment of 201 bytes")],
)
def test_an_object_written_straight_to_the_store_under_a_refused_name_is_a_defect(
    adapter: Adapter, path: str, reason: str
) -> None:
    # Given an object another client wrote under a name presign would refuse
    adapter.write_raw(f"tenants/acme/{path}", b"# Jira\n\nPROJ-7 is done.")
    # When it is read for ingestion, then it comes back with the reason, so the pipeline records it FAILED
    stored = adapter.store.get("acme", path)
    assert isinstance(stored.defect, ValidationError) and reason in stored.defect.message
    # And it can still be deleted under its name
    adapter.store.delete("acme", path)
    with pytest.raises(NotFoundError):
        adapter.store.get("acme", path)


@pytest.mark.parametrize("tenant_id", ["acme/../beta", "", "../beta", "acme/x", "*"])
def test_invalid_tenant_ids_are_refused(adapter: Adapter, tenant_id: str) -> None:
    with pytest.raises(ValidationError):
        adapter.store.get(tenant_id, "a.md")
    with pytest.raises(ValidationError):
        adapter.store.put(tenant_id, "a.md", b"x")


def test_tenants_are_isolated(adapter: Adapter) -> None:
    adapter.store.put("acme", "guide.md", b"acme's guide")
    with pytest.raises(NotFoundError):
        adapter.store.get("beta", "guide.md")
    adapter.store.delete("beta", "guide.md")
    assert adapter.store.get("acme", "guide.md").load() == b"acme's guide"


def test_presigned_upload_is_scoped_and_carries_its_metadata(adapter: Adapter) -> None:
    store = adapter.store
    data = b"%PDF-1.7 not really"
    path = "inbox/My Report(1).pdf"
    # When alice asks to upload a private PDF
    presigned = store.presign_put(
        "acme",
        path,
        owner="alice",
        content_type="application/pdf",
        size=len(data),
        replaces=None,
        visibility=Visibility.PRIVATE,
        metadata={"team": "finance"},
    )
    # Then the URL is scoped to her tenant's prefix and names the headers she must send
    adapter.assert_scoped(presigned, "acme", path)
    assert presigned.document_id == document_id("acme", path)
    assert (presigned.method, presigned.path, presigned.size) == ("PUT", path, len(data))
    assert presigned.expires_at == NOW + timedelta(seconds=900)
    assert presigned.headers == {
        "Content-Type": "application/pdf",
        "If-None-Match": "*",
        "x-amz-meta-team": "finance",
        "x-amz-meta-owner": "alice",
        "x-amz-meta-visibility": "private",
    }
    # And uploading with those headers stores the object with its owner, visibility and metadata
    adapter.upload(presigned, data, presigned.headers)
    stored = store.get("acme", path)
    assert stored.load() == data
    assert (stored.content_type, stored.owner, stored.visibility) == ("application/pdf", "alice", Visibility.PRIVATE)
    assert stored.attributes == {"team": "finance"}


def test_a_download_reads_the_indexed_version_pdfs_inline_and_anything_else_as_an_attachment(
    adapter: Adapter,
) -> None:
    store = adapter.store
    pdf_version = store.put("acme", "reports/Q1 é.pdf", b"%PDF-1.7 q1", content_type="application/pdf")
    page_version = store.put("acme", "pages/x.html", b"<script>alert(1)</script>", content_type="text/html")
    # When a reader asks for the PDF at the version that was indexed
    presigned = store.presign_get("acme", "reports/Q1 é.pdf", version=pdf_version)
    assert (presigned.document_id, presigned.filename) == (document_id("acme", "reports/Q1 é.pdf"), "Q1 é.pdf")
    assert (presigned.content_type, presigned.disposition) == ("application/pdf", "inline")
    assert presigned.expires_at == NOW + timedelta(seconds=DOWNLOAD_SECONDS)
    # Then a browser gets those bytes, to render in place, under their own name
    data, headers = adapter.download(presigned)
    assert data == b"%PDF-1.7 q1"
    assert headers["content-type"] == "application/pdf"
    assert headers["content-disposition"] == "inline; filename=\"Q1 _.pdf\"; filename*=UTF-8''Q1%20%C3%A9.pdf"
    # And a stored HTML page is only ever a download: it never runs as a page of the origin serving it
    page = store.presign_get("acme", "pages/x.html", version=page_version)
    assert (page.content_type, page.disposition) == ("text/html", "attachment")
    assert adapter.download(page)[1]["content-disposition"].startswith("attachment;")


def test_a_download_of_a_changed_or_missing_file_is_refused(adapter: Adapter) -> None:
    store = adapter.store
    indexed = store.put("acme", "a.txt", b"one", content_type="text/plain")
    issued = store.presign_get("acme", "a.txt", version=indexed)
    # When the file is replaced after the version the caller asks for was indexed
    store.put("acme", "a.txt", b"two", content_type="text/plain")
    # Then no URL is issued for that version (its new version is being ingested)
    with pytest.raises(ConflictError, match="changed since it was indexed"):
        store.presign_get("acme", "a.txt", version=indexed)
    # And one issued before reads the indexed bytes where the store keeps versions (S3), else nothing (the
    # local store keeps only the current one for reading): never the new bytes
    if isinstance(store, S3BlobStore):
        assert adapter.download(issued)[0] == b"one"
    else:
        with pytest.raises(NotFoundError, match="no longer stored"):
            adapter.download(issued)
    # And a file that is gone is not found, as is another tenant's path
    store.delete("acme", "a.txt")
    with pytest.raises(NotFoundError):
        store.presign_get("acme", "a.txt", version=indexed)
    with pytest.raises(NotFoundError):
        store.presign_get("beta", "a.txt", version=indexed)


def test_local_download_tokens_are_not_upload_tokens_and_expire(tmp_path: Path) -> None:
    clock = [NOW]
    store = LocalBlobStore(tmp_path, secret=b"k" * 32, clock=lambda: clock[0])
    version = store.put("acme", "a.txt", b"one", content_type="text/plain")
    download = store.presign_get("acme", "a.txt", version=version).url.rsplit("/", 1)[-1]
    upload = store.presign_put("acme", "a.txt", owner="alice", content_type="text/plain", size=3, replaces=version)
    # An upload token is no download token, nor the reverse: the purpose is signed
    with pytest.raises(ForbiddenError, match="invalid download token"):
        store.download(upload.url.rsplit("/", 1)[-1])
    with pytest.raises(ForbiddenError, match="invalid upload token"):
        store.redeem(download, b"two", {"Content-Type": "text/plain"})
    # A tampered token is refused, and a good one stops working when it expires
    with pytest.raises(ForbiddenError):
        store.download(download[:-2] + ("A" if download[-2] != "A" else "B") + download[-1])
    assert store.download(download)[0] == b"one"
    clock[0] = NOW + timedelta(seconds=DOWNLOAD_SECONDS)
    with pytest.raises(ForbiddenError, match="expired"):
        store.download(download)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"metadata": {"owner": "mallory"}}, ValidationError),
        ({"metadata": {"tenant_id": "beta"}}, ValidationError),
        ({"metadata": {"Team": "x"}}, ValidationError),
        ({"metadata": {"team": "caf\u00e9"}}, ValidationError),
        ({"metadata": {"team": "x" * 2100}}, ValidationError),
        ({"content_type": "pdf"}, ValidationError),
        ({"content_type": "text/plain\r\nx-amz-meta-owner: mallory"}, ValidationError),
        ({"owner": ""}, ValidationError),
        ({"size": 0}, ValidationError),
        ({"size": MAX_BYTES + 1}, PayloadTooLargeError),
    ],
    ids=lambda value: str(value)[:40],
)
def test_presign_refuses_bad_requests(adapter: Adapter, options: dict[str, Any], error: type[Exception]) -> None:
    arguments: dict[str, Any] = {"owner": "alice", "content_type": "text/plain", "size": 10, "replaces": None} | options
    with pytest.raises(error):
        adapter.store.presign_put("acme", "a.txt", **arguments)


def test_a_presigned_upload_cannot_displace_what_landed_after_it_was_issued(adapter: Adapter) -> None:
    store = adapter.store

    def presign(replaces: str | None) -> PresignedUpload:
        return store.presign_put("acme", "a.txt", owner="bob", content_type="text/plain", size=3, replaces=replaces)

    # Given a URL issued while the path was free, and alice's document written there since
    stale = presign(None)
    store.put("acme", "a.txt", b"ali", owner="alice", visibility=Visibility.PRIVATE)
    # When the URL is used, then the store refuses it and alice's document is untouched
    with pytest.raises((PreconditionFailedError, AssertionError), match="412|changed since"):
        adapter.upload(stale, b"bob", stale.headers)
    current = store.get("acme", "a.txt")
    assert (current.load(), current.owner) == (b"ali", "alice")
    # And a URL for replacing that exact object works once, and not after another write
    replacing = presign(current.etag)
    assert replacing.headers["If-Match"] == f'"{current.etag}"'
    adapter.upload(replacing, b"new", replacing.headers)
    assert store.get("acme", "a.txt").load() == b"new"
    with pytest.raises((PreconditionFailedError, AssertionError), match="412|changed since"):
        adapter.upload(replacing, b"new", replacing.headers)


# --- local uploads: the checks S3 makes on a presigned PUT --------------------------------------------


def test_local_upload_refuses_what_was_not_signed(local_store: Adapter) -> None:
    store = local_store.store
    assert isinstance(store, LocalBlobStore)
    presigned = store.presign_put("acme", "a.txt", owner="alice", content_type="text/plain", size=3, replaces=None)
    token = presigned.url.rsplit("/", 1)[-1]
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    cases: list[tuple[str, bytes, dict[str, str]]] = [
        (forged, b"abc", presigned.headers),
        (token, b"abcd", presigned.headers),
        (token, b"abc", presigned.headers | {"Content-Type": "text/html"}),
        (token, b"abc", presigned.headers | {"x-amz-meta-visibility": "shared", "x-amz-meta-extra": "1"}),
        (token, b"abc", {"Content-Type": "text/plain"}),
        (token, b"abc", {k: v for k, v in presigned.headers.items() if k != "If-None-Match"}),
    ]
    for candidate, data, headers in cases:
        with pytest.raises(ForbiddenError):
            store.redeem(candidate, data, headers)
    # Header names are case-insensitive, as in HTTP
    store.redeem(token, b"abc", {name.upper(): value for name, value in presigned.headers.items()})
    assert store.get("acme", "a.txt").owner == "alice"


def test_local_upload_expires(tmp_path: Path) -> None:
    clock = [NOW]
    store = LocalBlobStore(tmp_path, clock=lambda: clock[0], url_ttl=60)
    presigned = store.presign_put("acme", "a.txt", owner="alice", content_type="text/plain", size=3, replaces=None)
    clock[0] = NOW + timedelta(seconds=60)
    with pytest.raises(ForbiddenError):
        store.redeem(presigned.url.rsplit("/", 1)[-1], b"abc", presigned.headers)


def test_local_upload_url_uses_the_configured_base(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path, base_url="http://localhost:9000/")
    presigned = store.presign_put("acme", "a.txt", owner="alice", content_type="text/plain", size=3, replaces=None)
    assert presigned.url.startswith("http://localhost:9000/local-upload/")


def test_local_symlinks_cannot_lead_out_of_the_tenant(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    store.put("beta", "secret.md", b"beta's secret")
    link = tmp_path / "blobs" / "tenants" / "acme" / "link"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "blobs" / "tenants" / "beta")
    with pytest.raises(ValidationError):
        store.get("acme", "link/secret.md")
    with pytest.raises(ValidationError):
        store.put("acme", "link/other.md", b"x")


# --- S3 specifics -------------------------------------------------------------------------------------


def test_unversioned_buckets_use_the_etag(aws_credentials: None) -> None:
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="plain")
        store = S3BlobStore("plain")
        version = store.put("acme", "a.txt", b"one")
        assert version == "f97c5d29941bfb1b2fdab0874906ab82"  # MD5 of b"one", the ETag of a simple PUT
        assert store.get("acme", "a.txt").version == version
        assert store.put("acme", "a.txt", b"one") == version  # same content, same version: nothing to do


def test_the_download_is_pinned_to_the_version_read(s3_store: Adapter) -> None:
    store = s3_store.store
    store.put("acme", "a.txt", b"one")
    stored = store.get("acme", "a.txt")
    store.put("acme", "a.txt", b"two")
    assert stored.load() == b"one"


def _redeem_all(root: Path, grants: list[tuple[str, dict[str, str]]], results: Any) -> None:
    store = LocalBlobStore(root, secret=b"k" * 32, clock=lambda: NOW)
    for token, headers in grants:
        try:
            store.redeem(token, b"mine", headers)
            results.put(token)
        except PreconditionFailedError:
            pass


def test_local_conditional_uploads_are_atomic_across_processes(tmp_path: Path) -> None:
    # Given, for each of 30 free paths, two URLs issued while it was free (each path wanted twice)
    store = LocalBlobStore(tmp_path, secret=b"k" * 32, clock=lambda: NOW)
    grants = []
    for n in range(30):
        for _ in range(2):
            upload = store.presign_put(
                "acme", f"p{n}.txt", owner="alice", content_type="text/plain", size=4, replaces=None
            )
            grants.append((upload.url.rsplit("/", 1)[-1], upload.headers))
    # When two processes redeem them all at once, one the first URL of each path, one the second
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    workers = [context.Process(target=_redeem_all, args=(tmp_path, grants[first::2], results)) for first in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    # Then exactly one upload per path got through: the check and the write are one step
    done = [results.get(timeout=5) for _ in range(30)]
    assert results.empty()
    paths = [store.verify(token).path for token in done]
    assert sorted(paths) == sorted(f"p{n}.txt" for n in range(30))


# --- erasing a tenant (`citewise.ports.erasure`) -------------------------------------------------------


def test_erase_tenant_removes_every_object_and_version_of_the_tenant_only(adapter: Adapter) -> None:
    store = adapter.store
    # Given three tenants whose ids share a prefix, each with a document written twice, a sidecar, and a
    # deleted document (on a versioned bucket: old versions and a delete marker remain)
    tenants = ("acme", "acme-eu", "acme2")
    for tenant_id in tenants:
        store.put(tenant_id, "guide.md", b"first", owner="alice")
        store.put(tenant_id, "guide.md", b"second", owner="alice")
        store.put(tenant_id, "guide.md.metadata.json", b'{"metadataAttributes": {}}', owner="alice")
        store.put(tenant_id, "old/notes.md", b"old", owner="alice")
        store.delete(tenant_id, "old/notes.md")
    before = {tenant_id: store.count_tenant(tenant_id) for tenant_id in tenants}
    assert before["acme"] > 0 and len(set(before.values())) == 1
    # When acme is erased in steps of 2
    steps = []
    while step := store.erase_tenant("acme", limit=2):
        steps.append(step)
        assert step <= 2 and len(steps) < 20
    # Then everything the store kept of acme went (every version and marker), and nothing of the others
    assert sum(steps) == before["acme"]
    assert store.count_tenant("acme") == 0
    assert store.head("acme", "guide.md") is None
    for tenant_id in tenants[1:]:
        assert store.count_tenant(tenant_id) == before[tenant_id]
        assert store.get(tenant_id, "guide.md").load() == b"second"
    # And erasing an empty tenant deletes nothing
    assert store.erase_tenant("acme") == 0 and store.count_tenant("nobody") == 0


def test_s3_erase_deletes_every_version_and_delete_marker(s3_store: Adapter) -> None:
    # Given a document written twice and then deleted on the versioned bucket: 2 versions, 1 delete marker
    store = s3_store.store
    store.put("acme", "guide.md", b"first", owner="alice")
    store.put("acme", "guide.md", b"second", owner="alice")
    store.delete("acme", "guide.md")
    assert store.count_tenant("acme") == 3
    # When the tenant is erased
    while store.erase_tenant("acme"):
        pass
    # Then the bucket lists no version and no marker under the tenant's prefix
    listing = boto3.client("s3").list_object_versions(Bucket=BUCKET, Prefix="tenants/acme/")
    assert listing.get("Versions", []) == [] and listing.get("DeleteMarkers", []) == []
