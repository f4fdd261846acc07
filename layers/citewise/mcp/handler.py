"""The entry point of the MCP function, built once per cold start.

Settings and the tool profiles are validated when the module loads (a bad profile file fails the cold
start, naming the tool and field); the adapters are built by the first call that needs them
(`citewise.runtime.services.Services`): `initialize` and `tools/list` touch none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from citewise.mcp.http import respond
from citewise.mcp.profiles import load_profiles
from citewise.mcp.tools import Toolbox
from citewise.runtime.cors import with_cors
from citewise.runtime.observability import logger, metrics, tracer
from citewise.runtime.services import build_services
from citewise.runtime.settings import McpSettings, load_settings

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def mcp_handler(settings_kind: type[McpSettings] = McpSettings) -> LambdaHandler:
    """The handler of the MCP function: streamable HTTP over API Gateway proxy events."""
    settings = load_settings(settings_kind)
    toolbox = Toolbox(
        build_services(settings),
        profiles=load_profiles(settings.mcp_profiles),
        min_relevance_score=settings.mcp_min_relevance_score,
    )

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    @metrics.log_metrics(capture_cold_start_metric=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return respond(APIGatewayProxyEvent(event), toolbox, settings)

    return cast(LambdaHandler, with_cors(lambda_handler, settings.cors_allow_origins))
