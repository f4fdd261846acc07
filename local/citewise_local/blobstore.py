"""The local BlobStore: a folder laid out like the bucket, `root/tenants/{tenant_id}/{path}`.

Content type and user metadata, which a file system does not keep, live in
`root/.blobmeta/{tenant_id}/{sha256(path)}.json` (hashed so no document path can collide with another's
metadata file). A file copied into the tree by hand has none: it belongs to "system" and is shared.
The version (and ETag) is the SHA-256 of the content. Paths are validated and then resolved: a symlink
inside a tenant folder that points outside it is refused, as `..` is. A file replaced by `put` is kept
(one generation, under `root/.blobprevious/`) so `restore_previous` can undo a write that ingestion
refused, as S3's version history allows on AWS.

Uploads: `presign_put` returns `{base_url}/local-upload/{token}`, where the token is the upload grant
(tenant, path, owner, visibility, content type, metadata, size, precondition, expiry) as base64url JSON
with an HMAC-SHA256 signature. The local server hands the request to `redeem`, which checks it the way S3
checks a presigned PUT: the signature, the expiry, the exact headers, the exact body length and the
precondition (the path still free, or still holding the object the URL may replace), the last two under
one lock with the write. Downloads (`presign_get`) are `{base_url}/local-download/{token}`, a grant of one
version of one path until its expiry, signed the same way for another purpose; the server answers them
with `download`. The default secret is random per store, so URLs die with the process that
issued them.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import hmac
import itertools
import json
import os
import secrets
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pydantic

from citewise.domain.errors import (
    CitewiseError,
    ForbiddenError,
    NotFoundError,
    PreconditionFailedError,
    ValidationError,
)
from citewise.domain.metadata import SIDECAR_SUFFIX
from citewise.domain.models import Frozen, Visibility
from citewise.domain.objects import SourceObject
from citewise.domain.tenancy import validate_document_name, validate_path, validate_tenant_id
from citewise.ports.blobstore import (
    DEFAULT_MAX_BYTES,
    DOWNLOAD_SECONDS,
    META_HEADER_PREFIX,
    PresignedDownload,
    PresignedUpload,
    Served,
    Sidecar,
    check_upload_size,
    indexed_version,
    is_sidecar,
    object_metadata,
    served,
    stored_object,
    upload_document_id,
    upload_headers,
    validate_content_type,
)
from citewise.ports.erasure import ERASE_BATCH

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
UPLOAD_ROUTE = "/local-upload/"
DOWNLOAD_ROUTE = "/local-download/"
_THREADS = threading.RLock()
# The longest file name ext4, XFS and APFS hold, in bytes (`tenancy.MAX_SEGMENT_BYTES` stays below it).
_FILE_NAME_BYTES = 255
_held = 0  # how deep the thread holding `_THREADS` is inside `_exclusive`; only that thread touches it


@contextmanager
def _exclusive(root: Path) -> Iterator[None]:
    """One writer at a time in a store's folder, so a check and its write are atomic (a conditional
    upload, a restore): threads of this process through a re-entrant lock, other processes (the
    execution environments of `citewise serve`, the CLI) through an exclusive flock on the folder's lock
    file, taken by the outermost holder only."""
    global _held
    with _THREADS:
        if _held:
            _held += 1
            try:
                yield
            finally:
                _held -= 1
            return
        root.mkdir(parents=True, exist_ok=True)
        with (root / ".lock").open("a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
            _held = 1
            try:
                yield
            finally:
                _held = 0


class UploadGrant(Frozen):
    """What a local upload token allows: one body of `size` bytes to one path, until `expires`."""

    tenant_id: str
    path: str
    owner: str
    visibility: Visibility
    content_type: str
    metadata: dict[str, str]
    size: int
    replaces: str | None  # the ETag the upload may replace; None: the path must be free
    expires: int  # seconds since the epoch


class DownloadGrant(Frozen):
    """What a local download token allows: reading one version of one object, until `expires`."""

    tenant_id: str
    path: str
    version: str
    expires: int  # seconds since the epoch


_Grant = TypeVar("_Grant", UploadGrant, DownloadGrant)


class LocalBlobStore:
    """A `BlobStore` in a local folder (see the module docstring for the layout and uploads)."""

    channel = "local"

    def __init__(
        self,
        root: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        url_ttl: int = 900,
        base_url: str = DEFAULT_BASE_URL,
        secret: bytes | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.url_ttl = url_ttl
        self.base_url = base_url.rstrip("/")
        self._secret = secret if secret is not None else secrets.token_bytes(32)
        self._clock = clock

    def get(self, tenant_id: str, path: str) -> SourceObject:
        target = self._file(tenant_id, path)
        sidecar = None if is_sidecar(path) else self._sidecar(tenant_id, target, path)
        stored = self._stored(tenant_id, path, sidecar)
        if stored is None:
            raise NotFoundError("no document at that path", details={"path": path})
        return stored

    def head(self, tenant_id: str, path: str) -> SourceObject | None:
        return self._stored(tenant_id, path, None)

    def _stored(self, tenant_id: str, path: str, sidecar: Sidecar | None) -> SourceObject | None:
        target = self._file(tenant_id, path)
        self._check_inside(tenant_id, target)
        if not target.is_file():
            return None
        facts = target.stat()
        version = self._version(target, facts)

        def load() -> bytes:
            data = target.read_bytes()
            if hashlib.sha256(data).hexdigest() != version:
                # S3 pins the download to the version it saw; here a changed file can only be refused.
                raise CitewiseError("the document changed while it was being read", details={"path": path})
            return data

        recorded = self._read_meta(tenant_id, path)
        return stored_object(
            tenant_id=tenant_id,
            path=path,
            size=facts.st_size,
            version=version,
            etag=version,
            content_type=recorded.get("content_type"),
            metadata=recorded.get("metadata", {}),
            sidecar=sidecar,
            load=load,
            channel=self.channel,
            max_bytes=self.max_bytes,
            last_modified=datetime.fromtimestamp(facts.st_mtime, UTC),
        )

    def restore_previous(self, tenant_id: str, path: str, version: str) -> bool:
        target = self._file(tenant_id, path)
        self._check_inside(tenant_id, target)
        previous, previous_meta = self._previous_files(tenant_id, path)
        with _exclusive(self.root):
            if not target.is_file() or _digest(target) != version or not previous.is_file():
                return False
            # Swap, so the refused version is the one kept now (as S3 keeps it in the history).
            meta = self._meta_file(tenant_id, path)
            refused, refused_meta = target.read_bytes(), meta.read_bytes() if meta.is_file() else b"{}"
            _write_atomically(target, previous.read_bytes())
            _write_atomically(meta, previous_meta.read_bytes() if previous_meta.is_file() else b"{}")
            _write_atomically(previous, refused)
            _write_atomically(previous_meta, refused_meta)
        return True

    def put(
        self,
        tenant_id: str,
        path: str,
        data: bytes,
        *,
        content_type: str | None = None,
        owner: str | None = None,
        visibility: Visibility | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        target = self._file(tenant_id, validate_document_name(path))
        check_upload_size(len(data), self.max_bytes)
        recorded = {
            "content_type": None if content_type is None else validate_content_type(content_type),
            "metadata": object_metadata(owner, visibility, metadata),
        }
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise ValidationError(
                "the path runs through an existing document", details={"field": "path", "path": path}
            ) from exc
        self._check_inside(tenant_id, target.parent)
        if target.is_dir():
            raise ValidationError("the path names a folder", details={"field": "path", "path": path})
        meta = self._meta_file(tenant_id, path)
        meta.parent.mkdir(parents=True, exist_ok=True)
        previous, previous_meta = self._previous_files(tenant_id, path)
        with _exclusive(self.root):
            if target.is_file():  # keep what this write displaces, for `restore_previous`
                previous.parent.mkdir(parents=True, exist_ok=True)
                target.replace(previous)
                _write_atomically(previous_meta, meta.read_bytes() if meta.is_file() else b"{}")
            else:  # it displaces nothing, so nothing older may ever come back over it
                previous.unlink(missing_ok=True)
                previous_meta.unlink(missing_ok=True)
            _write_atomically(target, data)
            _write_atomically(meta, json.dumps(recorded).encode())
        return hashlib.sha256(data).hexdigest()

    def delete(self, tenant_id: str, path: str) -> None:
        target = self._file(tenant_id, path)
        if target.parent.exists():
            self._check_inside(tenant_id, target.parent)
        for document_path, file in [(path, target)] + (
            [] if is_sidecar(path) else [(path + SIDECAR_SUFFIX, target.with_name(target.name + SIDECAR_SUFFIX))]
        ):
            if file.is_file() or file.is_symlink():
                file.unlink()
            self._meta_file(tenant_id, document_path).unlink(missing_ok=True)
            for kept in self._previous_files(tenant_id, document_path):
                kept.unlink(missing_ok=True)

    def presign_put(
        self,
        tenant_id: str,
        path: str,
        *,
        owner: str,
        content_type: str,
        size: int,
        replaces: str | None,
        visibility: Visibility = Visibility.SHARED,
        metadata: Mapping[str, str] | None = None,
    ) -> PresignedUpload:
        validate_tenant_id(tenant_id)
        validate_document_name(path)
        validate_content_type(content_type)
        check_upload_size(size, self.max_bytes)
        stored_metadata = object_metadata(owner, visibility, metadata)
        expires_at = self._clock() + timedelta(seconds=self.url_ttl)
        grant = UploadGrant(
            tenant_id=tenant_id,
            path=path,
            owner=owner,
            visibility=visibility,
            content_type=content_type,
            metadata=dict(metadata or {}),
            size=size,
            replaces=replaces,
            expires=int(expires_at.timestamp()),
        )
        return PresignedUpload(
            document_id=upload_document_id(tenant_id, path),
            path=path,
            url=f"{self.base_url}{UPLOAD_ROUTE}{self._sign(grant)}",
            headers=upload_headers(content_type, stored_metadata, grant.replaces),
            size=size,
            expires_at=expires_at,
        )

    def redeem(self, token: str, data: bytes, headers: Mapping[str, str]) -> str:
        """Store the body of a local upload if it matches its grant, as S3 would; returns the version.

        ForbiddenError (as S3's 403) for a forged or expired token, headers that differ from the signed
        ones, or a body of another length; PreconditionFailedError (S3's 412) if the path no longer holds
        what the URL was issued for: someone else's document may be there now.
        """
        grant = self.verify(token)
        stored_metadata = object_metadata(grant.owner, grant.visibility, grant.metadata)
        expected = upload_headers(grant.content_type, stored_metadata, grant.replaces)
        signed = {name.lower() for name in expected}
        sent = {name.lower(): value for name, value in headers.items() if name.lower() in signed or _is_meta(name)}
        if sent != {name.lower(): value for name, value in expected.items()}:
            raise ForbiddenError("the upload's headers differ from the signed ones")
        if len(data) != grant.size:
            raise ForbiddenError(f"the upload must be exactly {grant.size} bytes, as signed")
        with _exclusive(self.root):
            current = self.head(grant.tenant_id, grant.path)
            if (current.etag if current else None) != grant.replaces:
                raise PreconditionFailedError(
                    "the path changed since this upload URL was issued; request a new one",
                    details={"path": grant.path},
                )
            return self.put(
                grant.tenant_id,
                grant.path,
                data,
                content_type=grant.content_type,
                owner=grant.owner,
                visibility=grant.visibility,
                metadata=grant.metadata,
            )

    def verify(self, token: str) -> UploadGrant:
        """The grant a token carries, or ForbiddenError if its signature is wrong or it has expired."""
        return self._verified(token, UploadGrant, "upload")

    def presign_get(self, tenant_id: str, path: str, *, version: str) -> PresignedDownload:
        _, how = indexed_version(self.head(tenant_id, validate_document_name(path)), path, version)
        expires_at = self._clock() + timedelta(seconds=DOWNLOAD_SECONDS)
        grant = DownloadGrant(tenant_id=tenant_id, path=path, version=version, expires=int(expires_at.timestamp()))
        return how.download(tenant_id, path, f"{self.base_url}{DOWNLOAD_ROUTE}{self._sign(grant)}", expires_at)

    def download(self, token: str) -> tuple[bytes, Served]:
        """The bytes and headers a local download token grants, as S3 answers a presigned GET of a version:
        ForbiddenError for a forged or expired token, NotFoundError when that version is no longer stored
        (locally only the current one is kept for reading)."""
        grant = self._verified(token, DownloadGrant, "download")
        current = self.head(grant.tenant_id, grant.path)
        if current is None or current.version != grant.version:
            raise NotFoundError("that version of the document is no longer stored", details={"path": grant.path})
        return current.load(), served(grant.path, current.content_type)

    def _verified(self, token: str, kind: type[_Grant], purpose: str) -> _Grant:
        payload, _, signature = token.partition(".")
        try:
            valid = hmac.compare_digest(_b64decode(signature), self._mac(payload, purpose))
            grant = kind.model_validate_json(_b64decode(payload)) if valid else None
        except (ValueError, binascii.Error, pydantic.ValidationError):
            grant = None
        if grant is None:
            raise ForbiddenError(f"invalid {purpose} token")
        if self._clock().timestamp() >= grant.expires:
            raise ForbiddenError(f"the {purpose} URL has expired")
        return grant

    def _sign(self, grant: UploadGrant | DownloadGrant) -> str:
        payload = _b64encode(grant.model_dump_json().encode())
        purpose = "upload" if isinstance(grant, UploadGrant) else "download"
        return f"{payload}.{_b64encode(self._mac(payload, purpose))}"

    def _mac(self, payload: str, purpose: str) -> bytes:
        # The purpose is signed too: an upload token can never be redeemed as a download, nor the reverse.
        return hmac.new(self._secret, f"{purpose}:{payload}".encode(), hashlib.sha256).digest()

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete up to `limit` files of the tenant (objects, their kept metadata and previous versions),
        then the folders they leave empty. A symbolic link is removed, never followed."""
        files = list(itertools.islice(self._tenant_files(tenant_id), limit))
        with _exclusive(self.root):
            for file in files:
                file.unlink(missing_ok=True)
            for folder in self._tenant_folders(tenant_id):
                for directory, _, _ in sorted(os.walk(folder), reverse=True):
                    if not os.listdir(directory):  # noqa: PTH208 - the walk gives strings
                        os.rmdir(directory)  # noqa: PTH106
        return len(files)

    def count_tenant(self, tenant_id: str) -> int:
        return sum(1 for _ in self._tenant_files(tenant_id))

    def _tenant_folders(self, tenant_id: str) -> list[Path]:
        """Every folder holding the tenant's files: its objects, their metadata, their previous versions."""
        validate_tenant_id(tenant_id)
        return [self.root / area / tenant_id for area in ("tenants", ".blobmeta", ".blobprevious")]

    def _tenant_files(self, tenant_id: str) -> Iterator[Path]:
        for folder in self._tenant_folders(tenant_id):
            for directory, folders, names in os.walk(folder):  # never into a linked folder: it is removed
                links = [name for name in folders if Path(directory, name).is_symlink()]
                for name in [*names, *links]:
                    yield Path(directory, name)

    def _tenant_dir(self, tenant_id: str) -> Path:
        return self.root / "tenants" / validate_tenant_id(tenant_id)

    def _file(self, tenant_id: str, path: str) -> Path:
        segments = validate_path(path).split("/")
        if any(len(segment.encode("utf-8")) > _FILE_NAME_BYTES for segment in segments):
            # No file can have this name (the OS would say ENAMETOOLONG, a 500): refused as a name, with
            # the reason the naming policy gives on every backend, which such a segment always breaks.
            validate_document_name(path)
        return self._tenant_dir(tenant_id).joinpath(*segments)

    def _check_inside(self, tenant_id: str, file: Path) -> None:
        # `..` is refused by validate_path; this catches symlinks that lead out of the tenant's folder.
        tenant_dir = self._tenant_dir(tenant_id).resolve()
        if not file.resolve().is_relative_to(tenant_dir):
            raise ValidationError("the path leads outside the tenant's folder", details={"field": "path"})

    def _meta_file(self, tenant_id: str, path: str) -> Path:
        digest = hashlib.sha256(path.encode()).hexdigest()
        return self.root / ".blobmeta" / validate_tenant_id(tenant_id) / f"{digest}.json"

    def _read_meta(self, tenant_id: str, path: str) -> dict[str, Any]:
        meta = self._meta_file(tenant_id, path)
        if not meta.is_file():
            return {}
        recorded: dict[str, Any] = json.loads(meta.read_bytes())
        return recorded

    def _previous_files(self, tenant_id: str, path: str) -> tuple[Path, Path]:
        digest = hashlib.sha256(path.encode()).hexdigest()
        folder = self.root / ".blobprevious" / validate_tenant_id(tenant_id)
        return folder / digest, folder / f"{digest}.json"

    def _sidecar(self, tenant_id: str, target: Path, path: str) -> Sidecar | None:
        sidecar = target.with_name(target.name + SIDECAR_SUFFIX)
        if not sidecar.is_file():
            return None
        self._check_inside(tenant_id, sidecar)
        recorded = self._read_meta(tenant_id, path + SIDECAR_SUFFIX)
        facts = sidecar.stat()
        return Sidecar(recorded.get("metadata", {}), facts.st_size, self._version(sidecar, facts), sidecar.read_bytes)

    def walk(self) -> Iterator[ListedObject]:
        """Every stored object, sidecars included, as a listing of the bucket would give it: tenant by
        tenant in path order, with the version `get` reports and S3's size and ETag (the content's MD5).

        What the bucket could not hold is left out: folders that are no valid tenant id or path, files
        leading outside their tenant's folder, and the temporary files of writes a crash interrupted.
        """
        tenants = self.root / "tenants"
        for tenant_dir in sorted(tenants.iterdir()) if tenants.is_dir() else []:
            for file in sorted(tenant_dir.rglob("*")):
                path = file.relative_to(tenant_dir).as_posix()
                # `.{name}.*.tmp`: what `_write_atomically` leaves when the process dies before its rename.
                if not file.is_file() or (file.name.startswith(".") and file.name.endswith(".tmp")):
                    continue
                try:
                    self._check_inside(tenant_dir.name, self._file(tenant_dir.name, path))
                except ValidationError:
                    continue
                facts = file.stat()
                md5 = hashlib.md5(usedforsecurity=False)
                with file.open("rb") as stream:
                    while block := stream.read(1 << 20):
                        md5.update(block)
                yield ListedObject(tenant_dir.name, path, self._version(file, facts), facts.st_size, md5.hexdigest())

    def _version(self, file: Path, facts: os.stat_result) -> str:
        """The SHA-256 of the content; an object over the limit is never read, not even to hash it: its
        size and modification time stand in."""
        if facts.st_size > self.max_bytes:
            return f"unread-{facts.st_size}-{facts.st_mtime_ns}"
        return _digest(file)


def _digest(file: Path) -> str:
    with file.open("rb") as stream:  # streamed: large files are not held in memory
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _is_meta(header: str) -> bool:
    return header.lower().startswith(META_HEADER_PREFIX)


class ListedObject(NamedTuple):
    """One object of `LocalBlobStore.walk`."""

    tenant_id: str
    path: str
    version: str
    size: int
    etag: str


def _write_atomically(target: Path, data: bytes) -> None:
    """Write through a temporary file and a rename, so a reader never sees half a file."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        Path(temporary).replace(target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
