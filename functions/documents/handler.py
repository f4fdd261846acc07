"""The documents function: documents, uploads, health and the OpenAPI document (`citewise.api.documents`).

Settings: `DocumentsSettings` (the registry, the bucket, the index, the identity mode). Adapters, each
built by the first request that needs it: the registry (listings, reads), the blob store (upload URLs,
deletes) and the ingestor (a delete removes the chunks). Powertools logger (API Gateway's request id as
correlation id), metrics and tracer wrap it, in `citewise.api.handler`.
"""

from citewise.runtime.coldstart import init_phase

with init_phase():
    from citewise.api.documents import add_document_routes
    from citewise.api.handler import api_handler
    from citewise.runtime.settings import DocumentsSettings

    lambda_handler = api_handler(DocumentsSettings, add_document_routes)
