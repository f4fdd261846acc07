"""The agent tools (Model Context Protocol): read-only tools over the same access rule as the REST API.

- `schemas`: each tool's arguments and result as models (their JSON schemas are what a client sees);
- `profiles`: operator-defined tools bound to a fixed scope, from a TOML file;
- `tools`: the `Toolbox` that lists the tools and runs a call for a `Caller`, errors as tool results;
- `protocol`: a small JSON-RPC dispatcher (initialize, ping, tools/list, tools/call) for stateless HTTP;
- `http`: streamable HTTP (POST, JSON responses) over an API Gateway proxy event;
- `handler`: the MCP Lambda function's entry point.

The local package serves the same `Toolbox` on stdio with the official MCP SDK; `citewise serve` answers
`/mcp` with the Lambda handler, as API Gateway does. No tool writes anything, and no argument names a
tenant: the caller always comes from the identity.
"""
