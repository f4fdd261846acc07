"""Documents, uploads, health and the OpenAPI document: the routes of the documents function."""

from __future__ import annotations

import re
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from citewise import __version__
from citewise.api.admin import add_admin_routes
from citewise.api.app import SECURED, responses
from citewise.api.audit import note
from citewise.api.credentials import add_credential_routes
from citewise.api.identity import request_scope
from citewise.api.schemas import Health
from citewise.api.sources import add_source_routes
from citewise.api.tenant_settings import add_settings_routes
from citewise.api.usage import add_usage_routes
from citewise.domain.metadata import SIDECAR_SUFFIX, SYSTEM_KEYS
from citewise.domain.models import Document, DocumentStatus
from citewise.domain.tenancy import MAX_PATH_BYTES, MAX_SEGMENT_BYTES
from citewise.ingest.documents import (
    UploadRequest,
    delete_document,
    document_download,
    readable_text,
    request_upload,
    visible_document,
)
from citewise.ingest.layout import MAX_TEXT_CHARS, DocumentText
from citewise.ingest.parsing import SUPPORTED_CONTENT_TYPES, SUPPORTED_EXTENSIONS
from citewise.ports.blobstore import (
    CONTENT_TYPE_RE,
    DOWNLOAD_SECONDS,
    MAX_USER_METADATA_BYTES,
    PresignedDownload,
    PresignedUpload,
)
from citewise.ports.cursors import CURSOR_PATTERN, MAX_CURSOR_CHARS
from citewise.ports.registry import DocumentPage
from citewise.runtime.settings import Settings

DocumentId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="The document id (32 hex digits).")]

# The rules `request_upload` and the blob store enforce, in JSON Schema terms (ECMA-262 patterns), so a
# schema-driven client knows them without trial. What a schema cannot say is in the descriptions: the path
# limit counts UTF-8 bytes, and metadata is limited in total bytes (the schema's per-entry limits keep any
# map it allows inside that total, owner and visibility included).
# A file name's pattern cannot say the naming policy (NFC, one script a word, bytes per segment, the
# Unicode categories refused), so it admits the part of it a pattern can: segments of printable ASCII but
# `/` and `\` (one byte each, up to the segment limit), or of those and the Latin letters U+00C0-U+017F
# (precomposed, so NFC; two bytes at most, so half as many). Every name it admits the API accepts; the
# description states the whole rule, which accepts more (docs/api.md, "Document names").
_ASCII = r"[ -.0-\[\]-~]"
_LATIN = r"[ -.0-\[\]-~\u00c0-\u017f]"
_SEGMENT = rf"(?!\.\.?(?:/|$))(?:{_ASCII}{{1,{MAX_SEGMENT_BYTES}}}|{_LATIN}{{1,{MAX_SEGMENT_BYTES // 2}}})"
FILENAME_PATTERN = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
_METADATA_ENTRIES = 8
_METADATA_VALUE_CHARS = 120
_METADATA_KEY_CHARS = 100


def _any_case(text: str) -> str:
    """A pattern matching `text` in any letter case: JSON Schema patterns take no flags."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else "\\" + c if c in ".+" else c for c in text)


def upload_request_schema(schema: dict[str, Any]) -> None:
    """State the upload rules on the generated `UploadRequest` schema (in place)."""
    properties = schema["properties"]
    properties["filename"].update(
        pattern=FILENAME_PATTERN,
        maxLength=MAX_PATH_BYTES,
        description=(
            f"{properties['filename']['description']} A relative path of at most {MAX_PATH_BYTES} bytes of UTF-8: "
            "`/`-separated, no leading `/`, no empty, `.` or `..` segment, no backslash; in Unicode NFC, segments of "
            f"at most {MAX_SEGMENT_BYTES} bytes, no control, format or invisible character, and no word mixing "
            "scripts (Latin with Cyrillic, say). The pattern admits the names of printable ASCII and Latin letters "
            "it can check; any other name meeting these rules is accepted too."
        ),
    )
    properties["content_type"].update(pattern=CONTENT_TYPE_RE.pattern)
    limit = Settings.model_fields["max_document_bytes"].default
    properties["size"].update(
        maximum=limit,
        description=f"{properties['size']['description']} At most the deployment's limit ({limit} bytes by default).",
    )
    properties["metadata"].update(
        maxProperties=_METADATA_ENTRIES,
        propertyNames={
            "pattern": rf"^[a-z0-9][a-z0-9_.-]{{0,{_METADATA_KEY_CHARS - 1}}}$",
            "not": {"enum": sorted(SYSTEM_KEYS)},
        },
        additionalProperties={"type": "string", "pattern": r"^[\x20-\x7e]*$", "maxLength": _METADATA_VALUE_CHARS},
        description=(
            f"String attributes for filters, sent as S3 user metadata: lower-case keys, printable ASCII values, "
            f"{MAX_USER_METADATA_BYTES} bytes in all with the owner and visibility citewise adds; reserved keys "
            "are refused."
        ),
    )
    extensions = "|".join(_any_case(extension) for extension in SUPPORTED_EXTENSIONS)
    media_types = "|".join(_any_case(media_type) for media_type in SUPPORTED_CONTENT_TYPES)
    schema["anyOf"] = [
        {"properties": {"filename": {"pattern": rf"(?:^|/)[^/]+(?:{extensions})$"}}},
        {"properties": {"content_type": {"pattern": rf"^(?:{media_types})(?:;.*)?$"}}},
        {"properties": {"filename": {"pattern": rf"[^/]{re.escape(SIDECAR_SUFFIX)}$"}}},
    ]
    schema["description"] = (
        f"{schema['description']} The format comes from the file name's extension "
        f"({', '.join(SUPPORTED_EXTENSIONS)}), else from the content type ({', '.join(SUPPORTED_CONTENT_TYPES)}). "
        f"A name ending in `{SIDECAR_SUFFIX}` is the sidecar of the document it names (attributes as "
        '`{"metadataAttributes": {...}}`), any content type: uploading it changes that document, so only its '
        "owner or a tenant admin may."
    )


def add_document_routes(app: APIGatewayRestResolver) -> None:
    """Register the documents function's routes on `app` (the tenant's settings, its credentials, its web
    sources and the operator's routes included)."""
    add_settings_routes(app)
    add_credential_routes(app)
    add_source_routes(app)
    add_usage_routes(app)
    add_admin_routes(app)

    @app.get(
        "/v1/documents",
        operation_id="listDocuments",
        summary="List the documents you can read, by path",
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 429, 502),
    )
    def list_documents(
        limit: Annotated[int, Query(ge=1, le=100, description="Page size.")] = 20,
        cursor: Annotated[
            str | None,
            Query(
                max_length=MAX_CURSOR_CHARS,
                pattern=CURSOR_PATTERN,
                description="`next_cursor` of the last page, as given: opaque, and valid only with the same filters.",
            ),
        ] = None,
        status: Annotated[DocumentStatus | None, Query(description="Only documents in this state.")] = None,
        source: Annotated[str | None, Query(max_length=256, description="Only documents from this source.")] = None,
        path_prefix: Annotated[str | None, Query(max_length=950, description="Only paths starting so.")] = None,
    ) -> DocumentPage:
        services, caller = request_scope(app)
        page = services.registry.list(
            caller.tenant_id,
            visible_to=caller.user_id,
            status=status,
            source=source,
            path_prefix=path_prefix,
            limit=limit,
            cursor=cursor,
        )
        note(app, resources=[document.doc_id for document in page.items])
        return page

    @app.get(
        "/v1/documents/<id>",
        operation_id="getDocument",
        summary="One document: status, counts, metadata, last error",
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 429, 502),
    )
    def get_document(id: DocumentId) -> Document:  # noqa: A002 - the path parameter's name
        services, caller = request_scope(app)
        return visible_document(services.registry, caller, id)

    @app.get(
        "/v1/documents/<id>/content",
        operation_id="getDocumentContent",
        summary="A short-lived URL of the document's original file, at its indexed version",
        description=(
            f"GET `url` before `expires_at` (within {DOWNLOAD_SECONDS // 60} minutes): the bytes that were indexed, so "
            "every citation's quote is in them. PDFs are served inline (to render at a cited page), every other "
            "type as an attachment. 409 when the file changed since it was indexed (the new version is being "
            "ingested); 404 when it is no longer stored."
        ),
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 429, 502),
    )
    def get_content(id: DocumentId) -> PresignedDownload:  # noqa: A002
        services, caller = request_scope(app)
        return document_download(services.registry, services.blobs, caller, id)

    @app.get(
        "/v1/documents/<id>/text",
        operation_id="getDocumentText",
        summary="The document's parsed text, with its pages, sections and the spans of its chunks",
        description=(
            "What a citation points into: a citation's `chunk_id` is one of `chunks`, whose span "
            "`text[start - offset:end - offset]` holds the citation's `quote` verbatim. Offsets count characters "
            "of the whole parsed text; a response holds a window of it (`offset`, `limit`) and the spans that "
            "overlap it: follow `next_offset` for the rest. 409 until the document is INDEXED, or when its file "
            "changed since."
        ),
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 413, 429, 502),
    )
    def get_text(
        id: DocumentId,  # noqa: A002
        offset: Annotated[int, Query(ge=0, description="The first character of the window.")] = 0,
        limit: Annotated[
            int, Query(ge=1, le=MAX_TEXT_CHARS, description="Characters of text in the window.")
        ] = MAX_TEXT_CHARS,
    ) -> DocumentText:
        services, caller = request_scope(app)
        return readable_text(services.ingestor, services.blobs, caller, id, offset, limit)

    @app.delete(
        "/v1/documents/<id>",
        operation_id="deleteDocument",
        summary="Delete a document: its stored object, its chunks and its record",
        description="Allowed to the document's owner and to members of the tenant's `admin` group.",
        tags=["documents"],
        security=SECURED,
        status_code=204,
        responses=responses(400, 401, 403, 404, 409, 429, 502, success=204, described="Deleted."),
    )
    def delete(id: DocumentId) -> Response[str]:  # noqa: A002
        services, caller = request_scope(app)
        delete_document(services.ingestor, services.blobs, caller, id)
        return Response(status_code=204, body="")

    @app.post(
        "/v1/uploads",
        operation_id="createUpload",
        summary="A presigned PUT URL for a new document in your tenant",
        description=(
            "PUT the file to `url` with exactly the returned `headers` and `size` bytes before `expires_at`. "
            "Ingestion is asynchronous: poll GET /v1/documents/{document_id} until INDEXED or FAILED. A document "
            "that would take the tenant over its documents or stored bytes quota, or a day whose pages quota is "
            "spent, is refused here with 429 QUOTA_EXCEEDED."
        ),
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 413, 415, 429, 502),
    )
    def upload(request: UploadRequest) -> PresignedUpload:
        services, caller = request_scope(app)
        upload = request_upload(services.registry, services.blobs, caller, request, quotas=services.quotas)
        note(app, resources=[upload.document_id])
        return upload

    @app.get(
        "/v1/health",
        operation_id="health",
        summary="Liveness (no authentication)",
        tags=["service"],
        responses=responses(),
    )
    def health() -> Health:
        return Health(version=__version__)

    @app.get(
        "/v1/openapi.json",
        operation_id="openapi",
        summary="This document (no authentication)",
        tags=["service"],
        responses=responses(),
    )
    def openapi() -> dict[str, Any]:
        from citewise.api.openapi import full_document  # it imports this module

        return full_document()
