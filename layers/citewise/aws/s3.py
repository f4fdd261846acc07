"""The BlobStore on S3: objects under `tenants/{tenant_id}/{path}` in one bucket.

Keys: the tenant and path pass `validate_tenant_id` / `validate_path` before they become a key, so no
input can address another tenant's prefix; a write (`put`, `presign_put`) also needs a name that meets
the naming policy (`validate_document_name`); keys from S3 event notifications arrive URL-encoded (a space
as `+`) and are decoded and checked against the same layout by `key_to_location`.

Versions: the VersionId on a versioned bucket (the CDK bucket is versioned), else the ETag. `get` reads
the object's facts with one HEAD and pins the later download to that version (or ETag), so the bytes
indexed are the bytes the registry records.

Size limit: `get` marks an object over `max_bytes` as a defect after the HEAD, before any download.
Uploads use a presigned PUT, which (unlike a presigned POST policy) cannot carry a
`content-length-range` condition; instead the caller declares the size and the exact `Content-Length`
is signed, so S3 rejects any other body. Objects written by other S3 clients are bounded only by the
`get` check, which is why it exists.

Conditional writes: a presigned PUT signs `If-None-Match: *` (the path was free) or `If-Match: <ETag>`
(it replaces that object), so a URL cannot displace what another user wrote after it was issued: S3
answers 412. An object that got past that anyway (another S3 client, an old URL from before this rule)
and is refused by ingestion is undone by `restore_previous`: the bucket is versioned, so the displaced
version is copied back over it (conditionally, if nothing newer landed meanwhile) and the refused
version stays in the history until the noncurrent-version lifecycle expires it.

Presigned URLs are SigV4 and virtual-hosted (SigV2 is deprecated and unavailable in newer regions); a
URL signed with a Lambda role's temporary credentials stops working when those expire, even if its
`url_ttl` has not passed.

Downloads (`presign_get`, the original behind a citation) are presigned GETs of the indexed VersionId,
served inline only when they are PDFs (`citewise.ports.blobstore.served`): they need `s3:GetObjectVersion`.

Missing objects: S3 answers 403 rather than 404 for a missing key unless the caller may
`s3:ListBucket` the prefix; the roles that read need that permission for NotFoundError to work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from citewise.aws import clients as aws
from citewise.domain.errors import CitewiseError, NotFoundError
from citewise.domain.metadata import SIDECAR_SUFFIX
from citewise.domain.models import Visibility
from citewise.domain.objects import SourceObject
from citewise.domain.tenancy import validate_document_name, validate_tenant_id
from citewise.ports.blobstore import (
    DEFAULT_MAX_BYTES,
    DEFAULT_PREFIX,
    DOWNLOAD_SECONDS,
    PresignedDownload,
    PresignedUpload,
    Sidecar,
    check_upload_size,
    indexed_version,
    is_sidecar,
    object_key,
    object_metadata,
    stored_object,
    upload_document_id,
    upload_headers,
    validate_content_type,
)
from citewise.ports.erasure import ERASE_BATCH

MAX_URL_TTL = 7 * 24 * 3600  # the longest a SigV4 presigned URL can live
MAX_DELETE_KEYS = 1000  # S3's limit on the keys (versions) of one DeleteObjects
_MISSING_CODES = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchVersion"})


def s3_client(region: str | None = None) -> Any:
    """An S3 client with the shared retry config that presigns SigV4, virtual-hosted URLs."""
    config = aws.client_config().merge(Config(signature_version="s3v4", s3={"addressing_style": "virtual"}))
    return boto3.client("s3", region_name=region, config=config)


class S3BlobStore:
    """A `BlobStore` in one S3 bucket (see the module docstring for keys, versions and limits)."""

    channel = "s3"

    def __init__(
        self,
        bucket: str,
        *,
        client: Any | None = None,
        prefix: str = DEFAULT_PREFIX,
        max_bytes: int = DEFAULT_MAX_BYTES,
        url_ttl: int = 900,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if prefix.startswith("/") or (prefix and not prefix.endswith("/")):
            raise ValueError("prefix must be empty or a relative folder ending in '/'")
        if not 1 <= url_ttl <= MAX_URL_TTL:
            raise ValueError(f"url_ttl must be between 1 and {MAX_URL_TTL} seconds")
        self.bucket = bucket
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.url_ttl = url_ttl
        self._clock = clock
        self._client = client if client is not None else s3_client()

    def key(self, tenant_id: str, path: str) -> str:
        """The object key of a document (see `object_key`)."""
        return object_key(tenant_id, path, self.prefix)

    def get(self, tenant_id: str, path: str) -> SourceObject:
        key = self.key(tenant_id, path)
        if is_sidecar(path):
            return self._stored(tenant_id, path, None)
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=key + SIDECAR_SUFFIX)
        except ClientError as exc:
            if aws.error_code(exc) in _MISSING_CODES:
                return self._stored(tenant_id, path, None)
            raise aws.translate(exc, CitewiseError, "S3 GetObject") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "S3 GetObject") from exc
        # The sidecar's metadata says whose it is; its body is read only if it is the document's.
        with closing(response["Body"]) as body:
            metadata, size = response.get("Metadata", {}), int(response["ContentLength"])
            sidecar = Sidecar(metadata, size, _version(response), body.read)
            return self._stored(tenant_id, path, sidecar)

    def head(self, tenant_id: str, path: str) -> SourceObject | None:
        try:
            return self._stored(tenant_id, path, None)
        except NotFoundError:
            return None

    def restore_previous(self, tenant_id: str, path: str, version: str) -> bool:
        key = self.key(tenant_id, path)
        listing = self._call(
            "ListObjectVersions", path, self._client.list_object_versions, Bucket=self.bucket, Prefix=key, MaxKeys=50
        )
        versions = [entry for entry in listing.get("Versions", []) if entry["Key"] == key]
        current = next((entry for entry in versions if entry["IsLatest"]), None)
        if current is None or current["VersionId"] != version:
            return False  # something newer landed: it is that write's turn to be checked
        # What `version` displaced is the newest older entry; on a tie, a deletion (nothing to restore).
        older = [(entry["LastModified"], 0, entry) for entry in versions if entry is not current] + [
            (entry["LastModified"], 1, entry) for entry in listing.get("DeleteMarkers", []) if entry["Key"] == key
        ]
        if not older:
            return False
        _, deletion, displaced = max(older, key=lambda item: item[:2])
        if deletion:
            return False
        self._call(
            "CopyObject",
            path,
            self._client.copy_object,
            Bucket=self.bucket,
            Key=key,
            CopySource={"Bucket": self.bucket, "Key": key, "VersionId": displaced["VersionId"]},
            MetadataDirective="COPY",
            IfMatch=current["ETag"],
        )
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
        key = self.key(tenant_id, validate_document_name(path))
        check_upload_size(len(data), self.max_bytes)
        params: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": key,
            "Body": data,
            "Metadata": object_metadata(owner, visibility, metadata),
        }
        if content_type is not None:
            params["ContentType"] = validate_content_type(content_type)
        return _version(self._call("PutObject", path, self._client.put_object, **params))

    def delete(self, tenant_id: str, path: str) -> None:
        key = self.key(tenant_id, path)
        for target in (key,) if is_sidecar(path) else (key, key + SIDECAR_SUFFIX):
            self._call("DeleteObject", path, self._client.delete_object, Bucket=self.bucket, Key=target)

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
        key = self.key(tenant_id, validate_document_name(path))
        validate_content_type(content_type)
        check_upload_size(size, self.max_bytes)
        stored_metadata = object_metadata(owner, visibility, metadata)
        params: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": key,
            "ContentType": content_type,
            "ContentLength": size,
            "Metadata": stored_metadata,
        }
        # Signed, so the client must send it: the upload cannot displace what landed after this moment.
        params |= {"IfNoneMatch": "*"} if replaces is None else {"IfMatch": f'"{replaces}"'}
        try:
            url = self._client.generate_presigned_url(
                "put_object", Params=params, ExpiresIn=self.url_ttl, HttpMethod="PUT"
            )
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "S3 presign PutObject") from exc
        return PresignedUpload(
            document_id=upload_document_id(tenant_id, path),
            path=path,
            url=url,
            headers=upload_headers(content_type, stored_metadata, replaces),
            size=size,
            expires_at=self._clock() + timedelta(seconds=self.url_ttl),
        )

    def presign_get(self, tenant_id: str, path: str, *, version: str) -> PresignedDownload:
        current, how = indexed_version(self.head(tenant_id, validate_document_name(path)), path, version)
        params: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": self.key(tenant_id, path),
            "ResponseContentType": how.content_type,
            "ResponseContentDisposition": how.content_disposition,
            "ResponseCacheControl": "private, no-store",
        }
        if version != current.etag:  # a VersionId (a versioned bucket): the URL reads that version only
            params["VersionId"] = version
        try:
            url = self._client.generate_presigned_url("get_object", Params=params, ExpiresIn=DOWNLOAD_SECONDS)
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, "S3 presign GetObject") from exc
        return how.download(tenant_id, path, url, self._clock() + timedelta(seconds=DOWNLOAD_SECONDS))

    def erase_tenant(self, tenant_id: str, *, limit: int = ERASE_BATCH) -> int:
        """Delete up to `limit` (at most 1000, one DeleteObjects) of the tenant's object versions and
        delete markers: on a versioned bucket deleting a key only hides it, deleting each version erases."""
        listing = self._call(
            "ListObjectVersions",
            "",
            self._client.list_object_versions,
            Bucket=self.bucket,
            Prefix=self._tenant_prefix(tenant_id),
            MaxKeys=min(limit, MAX_DELETE_KEYS),
        )
        targets = [
            {"Key": entry["Key"], "VersionId": entry["VersionId"]}
            for entry in [*listing.get("Versions", []), *listing.get("DeleteMarkers", [])]
        ][:limit]
        if not targets:
            return 0
        answer = self._call(
            "DeleteObjects",
            "",
            self._client.delete_objects,
            Bucket=self.bucket,
            Delete={"Objects": targets, "Quiet": True},
        )
        if answer.get("Errors"):
            first = answer["Errors"][0]
            raise CitewiseError(
                f"S3 DeleteObjects refused {len(answer['Errors'])} of {len(targets)} versions",
                details={"code": first.get("Code"), "key": first.get("Key")},
            )
        return len(targets)

    def count_tenant(self, tenant_id: str) -> int:
        pages = self._client.get_paginator("list_object_versions").paginate(
            Bucket=self.bucket, Prefix=self._tenant_prefix(tenant_id)
        )
        try:
            return sum(len(page.get("Versions", [])) + len(page.get("DeleteMarkers", [])) for page in pages)
        except (ClientError, BotoCoreError) as exc:
            raise aws.translate(exc, CitewiseError, "S3 ListObjectVersions") from exc

    def _tenant_prefix(self, tenant_id: str) -> str:
        """The tenant's folder with its closing slash: `tenants/acme/` holds nothing of `acme-eu`."""
        return f"{self.prefix}{validate_tenant_id(tenant_id)}/"

    def _stored(self, tenant_id: str, path: str, sidecar: Sidecar | None) -> SourceObject:
        key = self.key(tenant_id, path)
        head = self._call("HeadObject", path, self._client.head_object, Bucket=self.bucket, Key=key)
        # Pin the download to what HEAD saw: an overwrite in between fails instead of mixing versions.
        pin = {"VersionId": head["VersionId"]} if _has_version_id(head) else {"IfMatch": head["ETag"]}

        def load() -> bytes:
            response = self._call("GetObject", path, self._client.get_object, Bucket=self.bucket, Key=key, **pin)
            with closing(response["Body"]) as body:
                data: bytes = body.read()
            return data

        return stored_object(
            tenant_id=tenant_id,
            path=path,
            size=int(head["ContentLength"]),
            version=_version(head),
            etag=str(head["ETag"]).strip('"'),
            content_type=head.get("ContentType"),
            metadata=head.get("Metadata", {}),
            sidecar=sidecar,
            load=load,
            channel=self.channel,
            max_bytes=self.max_bytes,
            last_modified=head.get("LastModified"),
        )

    @staticmethod
    def _call(action: str, path: str, operation: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        # No blob-store error code exists: a failing bucket is an internal fault (INTERNAL_ERROR, retried
        # by the queue), throttling (SlowDown) still becomes ThrottledError.
        try:
            return operation(**kwargs)
        except ClientError as exc:
            if aws.error_code(exc) in _MISSING_CODES:
                raise NotFoundError("no document at that path", details={"path": path}) from exc
            raise aws.translate(exc, CitewiseError, f"S3 {action}") from exc
        except BotoCoreError as exc:
            raise aws.translate(exc, CitewiseError, f"S3 {action}") from exc


def _has_version_id(response: Mapping[str, Any]) -> bool:
    # "null" is the VersionId of objects written while versioning was off or suspended: not unique.
    return response.get("VersionId") not in (None, "", "null")


def _version(response: Mapping[str, Any]) -> str:
    """The VersionId of a HEAD/PUT response, or its ETag (unquoted) on an unversioned bucket."""
    if _has_version_id(response):
        return str(response["VersionId"])
    return str(response["ETag"]).strip('"')
