"""The BlobStore port: where uploaded documents live, under `tenants/{tenant_id}/{path}`.

Both adapters (S3 and a local folder) share the rules in this module, so an object carries the same
metadata either way:
- owner and visibility travel as user metadata `owner` / `visibility` (`x-amz-meta-owner` ...), set
  only by the store from what the API signed; a caller's own metadata may not use those names (or any
  other key the system owns, see `citewise.domain.metadata.SYSTEM_KEYS`), so it cannot forge access. An upload
  for an existing document is signed with that document's owner, so `owner` names whose document the
  object may become, and ingestion refuses an object signed for anyone else (`citewise.domain.access`).
- other user metadata becomes string document attributes; a sidecar `<path>.metadata.json` adds typed
  ones and wins on a clash, being the explicit, richer source. A sidecar is part of its document: it
  applies only if it was signed for the document's owner; any other sidecar is ignored (never parsed),
  so nobody can rewrite, or break, a document they may not modify by writing its sidecar.
- an object without owner metadata (written by some other S3 client) belongs to "system" and is shared.
- an object that cannot be ingested (over the size limit, malformed metadata or sidecar, a `version`,
  `introduced_in` or `deprecated_in` that is no version: `citewise.domain.versions`) is still
  returned, with the reason in `defect`: the pipeline records it FAILED under the object's own owner and
  visibility (never a made-up owner, never wider visibility: unreadable visibility counts as private).
- uploads are conditional writes: a presigned PUT carries `If-None-Match: *` when the path was free and
  `If-Match: <ETag>` when it replaces an object, so a URL issued earlier cannot displace whatever was
  written there since (S3 answers 412 PreconditionFailed, and so does the local store).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple, Protocol
from urllib.parse import quote, unquote_plus

from citewise.domain.access import may_modify, object_writer
from citewise.domain.errors import CitewiseError, ConflictError, NotFoundError, PayloadTooLargeError, ValidationError
from citewise.domain.metadata import MAX_SIDECAR_BYTES, SIDECAR_SUFFIX, SYSTEM_KEYS, check_limits, parse_sidecar
from citewise.domain.models import AttributeValue, Frozen, Visibility
from citewise.domain.objects import DEFAULT_OWNER, RefusedSidecar, SourceObject
from citewise.domain.tenancy import document_id, validate_document_name, validate_path, validate_tenant_id
from citewise.domain.versions import check_versions
from citewise.ports.erasure import ERASE_BATCH

OWNER_KEY = "owner"
VISIBILITY_KEY = "visibility"
META_HEADER_PREFIX = "x-amz-meta-"
MAX_USER_METADATA_BYTES = 2048
"""S3's limit on user metadata: the UTF-8 bytes of every key and value together."""
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_PREFIX = "tenants/"
"""Where objects live in the bucket (or the local folder): `tenants/{tenant_id}/{path}`."""

# S3 lower-cases metadata keys and sends them as HTTP headers: lower-case header-safe names only.
_METADATA_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")
_PRINTABLE_ASCII_RE = re.compile(r"^[\x20-\x7e]*$")
CONTENT_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(;[\x20-\x7e]*)?$")


@dataclass(frozen=True)
class Sidecar:
    """A stored sidecar as `stored_object` needs it: its user metadata, size and version now, its bytes on
    demand (a sidecar that is not its document's is never parsed)."""

    metadata: Mapping[str, str]
    size: int
    version: str
    load: Callable[[], bytes]


class PresignedUpload(Frozen):
    """How a client uploads one document without credentials: PUT the bytes to `url` with `headers`.

    The content type, owner, visibility, metadata and the exact body length (`size`) are part of the
    signature, so sending anything else fails; the URL stops working at `expires_at`.
    """

    document_id: str
    path: str
    url: str
    method: Literal["PUT"] = "PUT"
    headers: dict[str, str]
    size: int
    expires_at: datetime


DOWNLOAD_SECONDS = 300
"""How long a download URL works: enough to open a citation, short enough that a URL copied out of a
console soon stops working for someone the document is no longer shared with."""
INLINE_TYPES = frozenset({"application/pdf"})
"""Media types served `inline` (the console renders PDFs at the cited page); everything else is an
`attachment`, so no stored HTML or SVG ever runs as a page of the origin that serves it."""


class PresignedDownload(Frozen):
    """How a client reads one stored original without credentials: GET `url` before `expires_at`.

    The URL is pinned to the version that was indexed, so the bytes are the ones the citations quote.
    """

    document_id: str
    url: str
    content_type: str
    filename: str
    disposition: Literal["inline", "attachment"]
    expires_at: datetime


class BlobStore(Protocol):
    """Document objects under `tenants/{tenant_id}/{path}`; every path passes `validate_path` first."""

    max_bytes: int
    channel: str
    """What documents from this store record as their `channel` (`s3`, `local`): a removal or a
    reconciliation only touches records of its own channel."""

    def get(self, tenant_id: str, path: str) -> SourceObject:
        """The object's facts, its sidecar's attributes, and a loader for its bytes.

        Raises NotFoundError if there is none and ValidationError for an invalid path. An object that
        cannot be ingested (larger than `max_bytes`, invalid metadata or sidecar) is returned with the
        reason in `defect`, its content unread.
        """
        ...

    def head(self, tenant_id: str, path: str) -> SourceObject | None:
        """The object's facts from one metadata read (its sidecar not read), or None if there is none."""
        ...

    def restore_previous(self, tenant_id: str, path: str, version: str) -> bool:
        """Make the version that `version` displaced current again, if `version` is still the current one
        and it displaced an object (not a deletion); the displaced-by version stays in the store's
        history where it keeps one. True if it restored something."""
        ...

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
        """Store (or replace) an object and return its new version."""
        ...

    def delete(self, tenant_id: str, path: str) -> None:
        """Remove the object and its sidecar, if any; removing nothing is not an error."""
        ...

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
        """A URL through which a client uploads exactly `size` bytes to `path` in its own tenant.

        The upload is conditional: `replaces` is the ETag of the object it may replace, or None if the
        path must still be free; otherwise the store refuses it (PreconditionFailedError locally, S3's
        412). Raises PayloadTooLargeError if `size` exceeds `max_bytes`, ValidationError for an invalid
        path, content type or metadata.
        """
        ...

    def presign_get(self, tenant_id: str, path: str, *, version: str) -> PresignedDownload:
        """A URL through which a client downloads the object at `path` as it was at `version`, for
        `DOWNLOAD_SECONDS`, with the headers of `served`.

        Raises NotFoundError if there is no object at `path`, ConflictError if its current version is
        not `version` (it changed since it was indexed: the new version is being ingested).
        """
        ...

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete at most `limit` of what the store keeps of the tenant: every object and sidecar with
        every version and delete marker of a versioned bucket (and the local store's kept metadata and
        previous versions). How many were deleted; 0 only when none was left (`citewise.ports.erasure`)."""
        ...

    def count_tenant(self, tenant_id: str) -> int:
        """What remains of the tenant, counted as `erase_tenant` deletes it (every version and marker)."""
        ...


def object_metadata(
    owner: str | None, visibility: Visibility | None, metadata: Mapping[str, str] | None
) -> dict[str, str]:
    """The user metadata to store: the caller's validated keys plus the system-owned owner/visibility."""
    stored = dict(validate_user_metadata(metadata or {}))
    if owner is not None:
        if not owner:
            raise ValidationError("owner must not be empty", details={"field": "owner"})
        stored[OWNER_KEY] = _header_value(OWNER_KEY, owner)
    if visibility is not None:
        stored[VISIBILITY_KEY] = visibility.value
    if sum(len(key.encode()) + len(value.encode()) for key, value in stored.items()) > MAX_USER_METADATA_BYTES:
        raise ValidationError(f"metadata is larger than {MAX_USER_METADATA_BYTES} bytes", details={"field": "metadata"})
    return stored


def validate_user_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Caller-supplied metadata, refused if a key is reserved or would not survive as an HTTP header."""
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValidationError("metadata keys and values must be strings", details={"field": "metadata"})
        if key in SYSTEM_KEYS:
            raise ValidationError(f"metadata key '{key}' is reserved", details={"field": "metadata", "key": key})
        if not _METADATA_KEY_RE.fullmatch(key):
            raise ValidationError(
                f"metadata key '{key}' must be 1-100 lower-case letters, digits, '_', '.' or '-'",
                details={"field": "metadata", "key": key},
            )
        _header_value(key, value)
    return dict(metadata)


def validate_content_type(content_type: str) -> str:
    """A `type/subtype[; parameters]` media type of printable ASCII, or ValidationError."""
    if len(content_type) > 255 or not CONTENT_TYPE_RE.fullmatch(content_type):
        raise ValidationError(
            "content type must be a media type such as 'application/pdf'", details={"field": "content_type"}
        )
    return content_type


def upload_headers(content_type: str, metadata: Mapping[str, str], replaces: str | None) -> dict[str, str]:
    """The headers a presigned PUT must carry: its content type, its precondition and every user metadata
    entry (each one signed, so a client can change none of them)."""
    precondition = {"If-None-Match": "*"} if replaces is None else {"If-Match": f'"{replaces}"'}
    return (
        {"Content-Type": content_type}
        | precondition
        | {META_HEADER_PREFIX + key: value for key, value in metadata.items()}
    )


class Served(NamedTuple):
    """How a stored original is served (`INLINE_TYPES`): the media type, inline or attachment, the name."""

    content_type: str
    disposition: Literal["inline", "attachment"]
    filename: str

    def download(self, tenant_id: str, path: str, url: str, expires_at: datetime) -> PresignedDownload:
        """The answer of `presign_get` that serves `path` so through `url`."""
        return PresignedDownload(
            document_id=upload_document_id(tenant_id, path),
            url=url,
            content_type=self.content_type,
            filename=self.filename,
            disposition=self.disposition,
            expires_at=expires_at,
        )

    @property
    def content_disposition(self) -> str:
        """The header: the name as an ASCII fallback and as RFC 5987 UTF-8."""
        fallback = re.sub(r'[^\x20-\x7e]|["\\]', "_", self.filename)
        return f"{self.disposition}; filename=\"{fallback}\"; filename*=UTF-8''{quote(self.filename, safe='')}"


def served(path: str, content_type: str | None) -> Served:
    """How the object at `path`, stored with `content_type`, is served to a browser."""
    media_type = (content_type or "application/octet-stream").split(";", 1)[0].strip().lower()
    return Served(media_type, "inline" if media_type in INLINE_TYPES else "attachment", path.rsplit("/", 1)[-1])


def indexed_version(current: SourceObject | None, path: str, version: str) -> tuple[SourceObject, Served]:
    """The object a store's `head` found at `path`, if it is still the `version` that was indexed, and how
    to serve it: what both stores check before they sign a download. NotFoundError when it is gone,
    `changed_since_indexed` when it was replaced since."""
    if current is None:
        raise NotFoundError("the document's file is no longer stored", details={"path": path})
    if current.version != version:
        raise changed_since_indexed(path)
    return current, served(path, current.content_type)


def changed_since_indexed(path: str) -> ConflictError:
    """The error of a download whose object was replaced after the version the caller asked for."""
    return ConflictError(
        "the document changed since it was indexed; its new version is being ingested: try again shortly",
        details={"path": path},
    )


def too_large(size: int, limit: int, **details: str) -> PayloadTooLargeError:
    """The error for a document of `size` bytes over the store's `limit`."""
    return PayloadTooLargeError(
        f"document is {size} bytes; the limit is {limit}", details={**details, "size": size, "limit": limit}
    )


def check_upload_size(size: int, limit: int) -> None:
    """Refuse a write (or an upload URL) of `size` bytes unless it is 1 to `limit` bytes."""
    if size < 1:
        raise ValidationError("size must be at least 1 byte", details={"field": "size"})
    if size > limit:
        raise too_large(size, limit)


def described_document(path: str) -> str:
    """The path of the document an object belongs to: a sidecar's document, or the object itself."""
    return validate_path(path.removesuffix(SIDECAR_SUFFIX)) if is_sidecar(path) else path


def upload_document_id(tenant_id: str, path: str) -> str:
    """The id of the document an upload to `path` writes (a sidecar writes its document's metadata)."""
    return document_id(tenant_id, described_document(path))


def stored_object(
    *,
    tenant_id: str,
    path: str,
    size: int,
    version: str,
    etag: str,
    content_type: str | None,
    metadata: Mapping[str, str],
    sidecar: Sidecar | None,
    load: Callable[[], bytes],
    channel: str,
    max_bytes: int,
    last_modified: datetime | None = None,
) -> SourceObject:
    """A SourceObject from what an adapter read: owner and visibility from the metadata, attributes from
    the remaining metadata and from the sidecar (whose keys win) if it was signed for this owner."""
    visibility, unreadable = _visibility(metadata)
    defect: CitewiseError | None = unreadable
    owner = metadata.get(OWNER_KEY) or DEFAULT_OWNER
    attributes: dict[str, AttributeValue] = {}
    refused_sidecar: RefusedSidecar | None = None
    try:
        # Written straight to the bucket under a name presign would refuse: FAILED with the reason.
        validate_document_name(path)
        user = {key: value for key, value in metadata.items() if key not in (OWNER_KEY, VISIBILITY_KEY)}
        attributes = dict(validate_user_metadata(user))
        if size > max_bytes:
            raise too_large(size, max_bytes, path=path)
        if sidecar is not None:
            sidecar_owner = sidecar.metadata.get(OWNER_KEY) or DEFAULT_OWNER
            document = _Access(tenant_id, owner, visibility)
            if may_modify(object_writer(_Access(tenant_id, sidecar_owner, visibility)), document):
                attributes |= _sidecar_attributes(sidecar, path)
            else:
                refused_sidecar = RefusedSidecar(sidecar_owner, sidecar.version)
        check_limits(attributes)
        check_versions(attributes)
    except (ValidationError, PayloadTooLargeError) as exc:
        defect = defect or exc
    return SourceObject(
        tenant_id=tenant_id,
        path=path,
        size=size,
        version=version,
        etag=etag,
        content_type=content_type,
        owner=owner,
        visibility=visibility,
        load=load,
        channel=channel,
        last_modified=last_modified,
        metadata=dict(metadata),
        attributes=attributes,
        defect=defect,
        refused_sidecar=refused_sidecar,
    )


@dataclass(frozen=True)
class _Access:
    """The access facts of an object (see `citewise.domain.access.Owned`)."""

    tenant_id: str
    owner: str
    visibility: Visibility


def _visibility(metadata: Mapping[str, str]) -> tuple[Visibility, ValidationError | None]:
    """The object's visibility; an unreadable value is a defect, and counts as private meanwhile."""
    try:
        return Visibility(metadata.get(VISIBILITY_KEY, Visibility.SHARED.value)), None
    except ValueError:
        return Visibility.PRIVATE, ValidationError(
            f"object metadata '{VISIBILITY_KEY}' must be one of: " + ", ".join(v.value for v in Visibility),
            details={"field": VISIBILITY_KEY},
        )


def _sidecar_attributes(sidecar: Sidecar, path: str) -> dict[str, AttributeValue]:
    name = path.rsplit("/", 1)[-1] + SIDECAR_SUFFIX
    if sidecar.size > MAX_SIDECAR_BYTES:  # before reading it
        raise ValidationError(
            f"{name}: metadata file is larger than {MAX_SIDECAR_BYTES} bytes", details={"path": path + SIDECAR_SUFFIX}
        )
    return parse_sidecar(sidecar.load(), name)


def is_sidecar(path: str) -> bool:
    """Whether `path` names a sidecar metadata file rather than a document."""
    return path.endswith(SIDECAR_SUFFIX)


def _header_value(key: str, value: str) -> str:
    # S3 sends metadata as HTTP headers: non-ASCII would be mangled, control characters are unsafe.
    if not _PRINTABLE_ASCII_RE.fullmatch(value):
        raise ValidationError(f"metadata '{key}' must be printable ASCII", details={"field": "metadata", "key": key})
    return value


def object_key(tenant_id: str, path: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The key of `path` in `tenant_id`'s prefix, refusing ids and paths that could escape it."""
    return f"{prefix}{validate_tenant_id(tenant_id)}/{validate_path(path)}"


def parse_key(key: str, prefix: str = DEFAULT_PREFIX) -> tuple[str, str]:
    """(tenant_id, path) of a raw object key, or ValidationError if the key is outside the layout."""
    tenant_id, separator, path = key.removeprefix(prefix).partition("/")
    if not key.startswith(prefix) or not separator:
        raise ValidationError(
            f"object key is outside the {prefix}{{tenant_id}}/{{path}} layout", details={"field": "key"}
        )
    return validate_tenant_id(tenant_id), validate_path(path)


def key_to_location(event_key: str, prefix: str = DEFAULT_PREFIX) -> tuple[str, str]:
    """(tenant_id, path) of a key from an S3 event notification, which S3 URL-encodes (`+` for space).

    Only for notification keys: a raw key containing `+` or `%` would be decoded wrongly (`parse_key`).
    """
    return parse_key(unquote_plus(event_key), prefix)
