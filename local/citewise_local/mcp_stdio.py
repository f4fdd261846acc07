"""`citewise mcp`: the agent tools on stdio, served by the official MCP SDK for a local client (Claude
Desktop, Claude Code, any MCP client that starts a command).

The identity is fixed when the process starts (`--tenant`, `--user`, `--group`), as for every CLI
command: the client launching the process is the user, and no tool argument can change who that is.
The tools are the library's `citewise.mcp.tools.Toolbox`, the same as behind `/mcp` on `citewise serve`
and on AWS; only the transport differs. Each call runs on a worker thread (retrieval and synthesis
block) with a fresh correlation id in its log lines, which go to stderr: stdout is the protocol's. A call
that carries a progress token (`_meta.progressToken`) gets progress notifications: what an answer tool
retrieved, then its answer's text as it is written.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from citewise import __version__
from citewise.domain.models import Caller
from citewise.mcp.protocol import INSTRUCTIONS, SERVER_NAME
from citewise.mcp.tools import Toolbox
from citewise.runtime.observability import logger


def stdio_app(toolbox: Toolbox, caller: Caller) -> Server[Any]:
    """An SDK server whose tools are `toolbox`'s, every call made as `caller`."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in toolbox.definitions()])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        request_id = f"stdio-{uuid.uuid4()}"
        token = (ctx.meta or {}).get("progress_token")
        sent = 0

        def progress(message: str) -> None:
            """One progress notification, sent from the worker thread through the event loop."""
            nonlocal sent
            sent += 1
            if token is not None:
                anyio.from_thread.run(ctx.session.send_progress_notification, token, sent, None, message)

        def run() -> dict[str, Any]:
            logger.set_correlation_id(request_id)
            logger.append_keys(tenant_id=caller.tenant_id)
            return toolbox.call(
                caller, params.name, params.arguments, request_id, progress=progress if token is not None else None
            )

        return types.CallToolResult.model_validate(await anyio.to_thread.run_sync(run))

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(toolbox: Toolbox, caller: Caller) -> None:
    """Serve MCP on this process's stdin and stdout until the client closes stdin."""

    async def main() -> None:
        server = stdio_app(toolbox, caller)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
