"""The query function: POST /v1/query and POST /v1/search (routes in `citewise.api.query`).

Settings: `QuerySettings` (the index, the embedder, the synthesizer, the identity mode). Adapters, each
built by the first request that needs it: the retriever (index + embedder) and the synthesizer; never the
registry or the bucket. Powertools logger (API Gateway's request id as correlation id), metrics and
tracer wrap it, in `citewise.api.handler`. `stream_handler` is the same function answering in the
streamed response format (a streamed answer's events as they are written; docs/aws.md).
"""

from citewise.runtime.coldstart import init_phase

with init_phase():
    from citewise.api.handler import api_handlers
    from citewise.api.query import add_query_routes
    from citewise.runtime.settings import QuerySettings

    lambda_handler, stream_handler = api_handlers(QuerySettings, add_query_routes)
