"""/v1/sources: a tenant's web sources (`citewise.ingest.sources`, docs/sources.md).

A tenant admin registers, refreshes and removes them (a credential has no group, so a program never
does); every member of the tenant, and a program's `read` credential, lists and reads them: which sites
feed the tenant's answers is no secret within it. Another tenant's source is 404 NOT_FOUND, as an unknown
one. Served by the documents function: it writes the registry table's source partitions, deletes the
objects of a removed source's pages (their notifications remove chunks and records, as for any delete),
and queues a refresh on the refresh function's queue.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Path

from citewise.api.app import SECURED, responses
from citewise.api.audit import note
from citewise.api.identity import request_scope
from citewise.domain.models import Frozen
from citewise.domain.sources import SOURCE_ID_PATTERN, Source, SourceSpec
from citewise.ingest.sources import register_source, remove_source, request_refresh, visible_source

SourceId = Annotated[str, Path(pattern=SOURCE_ID_PATTERN, description="The source's id (32 hex digits).")]


class SourceList(Frozen):
    """The tenant's sources, oldest first."""

    items: list[Source]


def add_source_routes(app: APIGatewayRestResolver) -> None:
    """Register POST and GET /v1/sources, GET and DELETE /v1/sources/{id}, POST /v1/sources/{id}/refresh."""

    @app.post(
        "/v1/sources",
        operation_id="createSource",
        summary="Register a web source (tenant admins only)",
        description=(
            "A sitemap, a URL prefix to crawl, or a list of URLs. Its pages become documents of the tenant, "
            "shared, owned by you, with `source_id`, `url`, `category` and `version` in their metadata and the "
            "category as their source (the key of the credibility table). The first refresh runs at the next "
            "tick of the schedule. A URL with credentials, of another scheme than http(s), or naming a private "
            "address is 400 with `details.reason` (`credentials`, `scheme`, `private_address`, `host`)."
        ),
        tags=["sources"],
        security=SECURED,
        status_code=201,
        responses=responses(400, 401, 403, 409, 415, 429, 502, success=201, described="Registered."),
    )
    def create(spec: SourceSpec) -> Response[Source]:
        services, caller = request_scope(app)
        source = register_source(
            services.sources, caller, spec, now=datetime.now(UTC), allow_loopback=services.settings.web_allow_loopback
        )
        note(app, resources=[source.source_id])
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=source)

    @app.get(
        "/v1/sources",
        operation_id="listSources",
        summary="Your tenant's web sources",
        description="Each with its last refresh (requests, pages not modified, changed, new, removed, failed, "
        "and the cap it stopped at) and the refresh running now, with its progress.",
        tags=["sources"],
        security=SECURED,
        responses=responses(400, 401, 403, 409, 429, 502),
    )
    def list_sources() -> SourceList:
        services, caller = request_scope(app)
        return SourceList(items=services.sources.tenant_sources(caller.tenant_id))

    @app.get(
        "/v1/sources/<id>",
        operation_id="getSource",
        summary="A web source and its refreshes",
        tags=["sources"],
        security=SECURED,
        responses=responses(400, 401, 403, 404, 409, 429, 502),
    )
    def get_source(id: SourceId) -> Source:  # noqa: A002 - the path parameter's name
        services, caller = request_scope(app)
        return visible_source(services.sources, caller, id)

    @app.delete(
        "/v1/sources/<id>",
        operation_id="deleteSource",
        summary="Remove a web source and its documents (tenant admins only)",
        description="Every document its pages became is deleted. Refused (409 `REFRESH_RUNNING`) while a "
        "refresh of it runs.",
        tags=["sources"],
        security=SECURED,
        status_code=204,
        responses=responses(400, 401, 403, 404, 409, 429, 502, success=204, described="Removed."),
    )
    def delete_source(id: SourceId) -> Response[str]:  # noqa: A002
        services, caller = request_scope(app)
        remove_source(services.sources, services.document_writer, caller, id, now=datetime.now(UTC))
        return Response(status_code=204, body="")

    @app.post(
        "/v1/sources/<id>/refresh",
        operation_id="refreshSource",
        summary="Refresh a web source now (tenant admins only)",
        description="Queues a refresh and answers at once with the source holding it (`running`); read the "
        "source to follow its progress. A refresh already running refuses a second: 409 `REFRESH_RUNNING`.",
        tags=["sources"],
        security=SECURED,
        status_code=202,
        responses=responses(400, 401, 403, 404, 409, 429, 502, success=202, described="Queued."),
    )
    def refresh(id: SourceId) -> Response[Source]:  # noqa: A002
        services, caller = request_scope(app)
        source = request_refresh(services.sources, services.refresh_queue, caller, id, now=datetime.now(UTC))
        return Response(status_code=202, content_type=content_types.APPLICATION_JSON, body=source)
