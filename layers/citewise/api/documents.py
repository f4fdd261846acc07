"""Documents, uploads, health and the OpenAPI document: the routes of the documents function."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from citewise import __version__
from citewise.api.app import SECURED, responses
from citewise.api.identity import request_scope
from citewise.api.schemas import Health
from citewise.blobstore.base import PresignedUpload
from citewise.documents import UploadRequest, delete_document, request_upload, visible_document
from citewise.models import Document, DocumentStatus
from citewise.registry.base import DocumentPage

DocumentId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="The document id (32 hex digits).")]


def add_document_routes(app: APIGatewayRestResolver) -> None:
    """Register the documents function's routes on `app`."""

    @app.get(
        "/v1/documents",
        summary="List the documents you can read, by path",
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 429, 502),
    )
    def list_documents(
        limit: Annotated[int, Query(ge=1, le=100, description="Page size.")] = 20,
        cursor: Annotated[str | None, Query(max_length=2048, description="`next_cursor` of the last page.")] = None,
        status: Annotated[DocumentStatus | None, Query(description="Only documents in this state.")] = None,
        source: Annotated[str | None, Query(max_length=256, description="Only documents from this source.")] = None,
        path_prefix: Annotated[str | None, Query(max_length=950, description="Only paths starting so.")] = None,
    ) -> DocumentPage:
        services, caller = request_scope(app)
        return services.registry.list(
            caller.tenant_id,
            visible_to=caller.user_id,
            status=status,
            source=source,
            path_prefix=path_prefix,
            limit=limit,
            cursor=cursor,
        )

    @app.get(
        "/v1/documents/<id>",
        summary="One document: status, counts, metadata, last error",
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 429, 502),
    )
    def get_document(id: DocumentId) -> Document:  # noqa: A002 - the path parameter's name
        services, caller = request_scope(app)
        return visible_document(services.registry, caller, id)

    @app.delete(
        "/v1/documents/<id>",
        summary="Delete a document: its stored object, its chunks and its record",
        description="Allowed to the document's owner and to members of the tenant's `admin` group.",
        tags=["documents"],
        security=SECURED,
        status_code=204,
        responses=responses(400, 401, 403, 404, 429, 502, success=204, described="Deleted."),
    )
    def delete(id: DocumentId) -> Response[str]:  # noqa: A002
        services, caller = request_scope(app)
        delete_document(services.ingestor, services.blobs, caller, id)
        return Response(status_code=204, body="")

    @app.post(
        "/v1/uploads",
        summary="A presigned PUT URL for a new document in your tenant",
        description=(
            "PUT the file to `url` with exactly the returned `headers` and `size` bytes before `expires_at`. "
            "Ingestion is asynchronous: poll GET /v1/documents/{document_id} until INDEXED or FAILED."
        ),
        tags=["documents"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 413, 415, 429, 502),
    )
    def upload(request: UploadRequest) -> PresignedUpload:
        services, caller = request_scope(app)
        return request_upload(services.registry, services.blobs, caller, request)

    @app.get("/v1/health", summary="Liveness (no authentication)", tags=["service"], responses=responses())
    def health() -> Health:
        return Health(version=__version__)

    @app.get("/v1/openapi.json", summary="This document (no authentication)", tags=["service"], responses=responses())
    def openapi() -> dict[str, Any]:
        from citewise.api.openapi import full_document  # it imports this module

        return full_document()
