"""The MCP function: POST /mcp, the read-only agent tools over stateless streamable HTTP (`citewise.mcp`).

Settings: `McpSettings` (the index, the embedder, the synthesizer, the registry, the identity mode, the
tool profiles). Adapters, each built by the first tool call that needs it: the retriever and the
synthesizer (rag_query, search) and the registry (the documents' records); never the bucket. Powertools
logger (API Gateway's request id as correlation id), metrics and tracer wrap it, in `citewise.mcp.handler`.
"""

from citewise.runtime.coldstart import init_phase

with init_phase():
    from citewise.mcp.handler import mcp_handler
    from citewise.runtime.settings import McpSettings

    lambda_handler = mcp_handler(McpSettings)
