"""The REST API: the shared route table, auth on every method but the public ones, one error body for
API Gateway's own rejections, a throttled and logged stage, and the Cognito pool behind it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from citewise_infra.api import CHALLENGED, GATEWAY_ERRORS
from citewise_infra.constants import API_FUNCTIONS, FUNCTIONS_DIR, STREAM_RUNTIME, STREAMED_TIMEOUT_S

from citewise.api.routes import HUMAN_ROUTES, MACHINE_PREFIX, ROUTES
from citewise.domain.access import ADMIN_GROUP, OPERATOR_GROUP
from citewise.runtime import cors
from citewise.runtime.resource_metadata import METADATA_PATH

from .conftest import Synth, synthesize
from .templates import flat, method_paths, references

# The responses the issue names, and the code each must answer with.
REQUIRED_RESPONSES = {
    "DEFAULT_4XX": "VALIDATION_ERROR",
    "DEFAULT_5XX": "INTERNAL_ERROR",
    "UNAUTHORIZED": "UNAUTHORIZED",
    "ACCESS_DENIED": "FORBIDDEN",
    "THROTTLED": "THROTTLED",
    "BAD_REQUEST_BODY": "VALIDATION_ERROR",
    "MISSING_AUTHENTICATION_TOKEN": "NOT_FOUND",
    "INTEGRATION_TIMEOUT": "TIMEOUT",
}


def routed_methods(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    return {key: value for key, value in method_paths(synth).items() if key[0] != "OPTIONS"}


def test_the_api_serves_exactly_the_shared_route_table(synth: Synth) -> None:
    assert set(routed_methods(synth)) == {(route.method, route.path) for route in ROUTES}


def test_each_route_reaches_its_function_through_a_proxy_integration(synth: Synth) -> None:
    methods = routed_methods(synth)
    for route in ROUTES:
        integration = methods[(route.method, route.path)]["Integration"]
        function = getattr(synth.stack.functions, route.function).function
        assert integration["Type"] == "AWS_PROXY" and integration["IntegrationHttpMethod"] == "POST"
        assert synth.logical_id(function) in references(integration["Uri"]), route


def test_cognito_authorizes_every_method_but_health_and_the_api_description(dev: Synth, prod: Synth) -> None:
    for synth in (dev, prod):
        (authorizer_id,) = synth.of_type("AWS::ApiGateway::Authorizer")
        methods = routed_methods(synth)
        for route in ROUTES:
            method = methods[(route.method, route.path)]
            if route.authenticated:
                assert method["AuthorizationType"] == "COGNITO_USER_POOLS", route
                assert method["AuthorizerId"] == {"Ref": authorizer_id}, route
            else:
                assert method["AuthorizationType"] == "NONE" and "AuthorizerId" not in method, route
        assert {r.path for r in ROUTES if not r.authenticated} == {"/v1/health", "/v1/openapi.json", METADATA_PATH}
        (authorizer,) = synth.of_type("AWS::ApiGateway::Authorizer").values()
        assert authorizer["Properties"]["Type"] == "COGNITO_USER_POOLS"
        assert authorizer["Properties"]["IdentitySource"] == "method.request.header.Authorization"


def test_programs_reach_their_routes_under_m2m_with_an_access_token_only(dev: Synth, prod: Synth) -> None:
    for synth in (dev, prod):
        methods = routed_methods(synth)
        # Every route a credential may use has a twin under /m2m/ that requires one of the two scopes: API
        # Gateway then takes an access token (a program's) there and never an ID token
        twins = {route.path for route in ROUTES if route.scopes}
        assert twins == {MACHINE_PREFIX + route.path for route in HUMAN_ROUTES if route.programs is not None}
        for route in ROUTES:
            method = methods[(route.method, route.path)]
            if route.scopes:
                assert method["AuthorizationType"] == "COGNITO_USER_POOLS", route
                assert sorted(method["AuthorizationScopes"]) == ["citewise/full", "citewise/read"], route
            else:  # a person's routes take ID tokens only, and no credential reaches these
                assert "AuthorizationScopes" not in method, route
        # No program reaches the operator's routes, the credentials' or the settings' change
        assert not {p for p in twins if "/admin/" in p or "/credentials" in p}
        assert ("PUT", MACHINE_PREFIX + "/v1/settings") not in methods


def test_the_pool_defines_the_two_scopes_and_a_token_endpoint(dev: Synth) -> None:
    (server,) = dev.of_type("AWS::Cognito::UserPoolResourceServer").values()
    assert server["Properties"]["Identifier"] == "citewise"
    assert {scope["ScopeName"] for scope in server["Properties"]["Scopes"]} == {"read", "full"}
    (domain,) = dev.of_type("AWS::Cognito::UserPoolDomain").values()
    assert "CustomDomainConfig" not in domain["Properties"]  # a Cognito prefix domain
    # The documents function is told where programs get tokens and which pool holds the credentials
    function = dev.resources[dev.logical_id(dev.stack.functions.documents.function)]["Properties"]
    variables = function["Environment"]["Variables"]
    assert {"CITEWISE_USER_POOL_ID", "CITEWISE_CREDENTIAL_TOKEN_URL"} <= set(variables)
    assert "/oauth2/token" in json.dumps(variables["CITEWISE_CREDENTIAL_TOKEN_URL"])
    # The people's API client keeps OAuth off: the domain serves programs' tokens, and the console's
    # sign-in to its own client only (tests/infrastructure/test_console.py)
    assert api_client(dev)["AllowedOAuthFlowsUserPoolClient"] is False
    clients = [c["Properties"] for c in dev.of_type("AWS::Cognito::UserPoolClient").values()]
    assert dev.stack.console is not None and dev.stack.console.client is not None
    console_client = dev.resources[dev.logical_id(dev.stack.console.client)]["Properties"]
    assert [c for c in clients if c["AllowedOAuthFlowsUserPoolClient"]] == [console_client]


def api_client(synth: Synth) -> dict[str, Any]:
    """The properties of the app client people's programs and browsers use with the API (no OAuth)."""
    return synth.resources[synth.logical_id(synth.stack.api.user_pool_client)]["Properties"]  # type: ignore[no-any-return]


def test_iam_mode_signs_every_method_but_the_public_ones(serverless_iam: Synth) -> None:
    assert not serverless_iam.of_type("AWS::ApiGateway::Authorizer")
    assert not serverless_iam.of_type("AWS::Cognito::UserPool")
    for route in ROUTES:
        method = routed_methods(serverless_iam)[(route.method, route.path)]
        assert method["AuthorizationType"] == ("AWS_IAM" if route.authenticated else "NONE"), route


def test_every_method_is_validated_and_post_bodies_must_be_json_objects(synth: Synth) -> None:
    (validator_id,) = synth.of_type("AWS::ApiGateway::RequestValidator")
    validator = synth.resources[validator_id]["Properties"]
    assert validator["ValidateRequestBody"] is True and validator["ValidateRequestParameters"] is True
    (model_id, model) = next(iter(synth.of_type("AWS::ApiGateway::Model").items()))
    assert model["Properties"]["Schema"]["type"] == "object"
    for (verb, path), method in routed_methods(synth).items():
        assert method["RequestValidatorId"] == {"Ref": validator_id}, (verb, path)
        if verb == "POST":
            assert method["RequestModels"] == {"application/json": {"Ref": model_id}}
        # every path parameter is required, and only those (`/v1/admin/tenants/{tenant_id}/credentials/{id}` has two)
        names = re.findall(r"\{(\w+)\}", path)
        if names:
            assert method["RequestParameters"] == {f"method.request.path.{name}": True for name in names}, path


def render(template: str) -> dict[str, Any]:
    """A gateway response template as API Gateway would render it (with stand-in context values)."""
    text = template.replace("$context.error.messageString", '"Unauthorized"').replace("$context.requestId", "req-1")
    assert "$" not in text
    return json.loads(text)  # type: ignore[no-any-return]


def test_gateway_responses_answer_with_the_library_error_body(synth: Synth) -> None:
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in synth.of_type("AWS::ApiGateway::GatewayResponse").values()
    }
    assert set(REQUIRED_RESPONSES) <= set(responses) == set(GATEWAY_ERRORS)
    for response_type, properties in responses.items():
        body = render(properties["ResponseTemplates"]["application/json"])
        assert set(body) == {"error"}
        assert set(body["error"]) == {"code", "message", "details", "request_id"}
        assert body["error"]["request_id"] == "req-1"
        assert body["error"]["code"] == GATEWAY_ERRORS[response_type][0].code
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    for response_type, code in REQUIRED_RESPONSES.items():
        assert render(responses[response_type]["ResponseTemplates"]["application/json"])["error"]["code"] == code
    # An unknown route is a 404, not API Gateway's 403 "Missing Authentication Token"
    assert responses["MISSING_AUTHENTICATION_TOKEN"]["StatusCode"] == "404"


def test_error_bodies_are_readable_from_the_one_allowed_browser_origin(
    tmp_path: Path, _no_default_account: None, serverless_iam: Synth
) -> None:
    # dev without its console: one configured origin (with the console, the console's: test_console.py)
    dev = synthesize(tmp_path, "dev", {"console": {"enabled": False}})
    (origin,) = dev.stack.config.api.cors_allow_origins
    for response in dev.of_type("AWS::ApiGateway::GatewayResponse").values():
        parameters = response["Properties"]["ResponseParameters"].items()
        headers = {name: value for name, value in parameters if not name.endswith("WWW-Authenticate")}  # see below
        assert headers == {"gatewayresponse.header.Access-Control-Allow-Origin": f"'{origin}'"}
    # No origin at all: no CORS header
    assert all(
        "ResponseParameters" not in r["Properties"]
        for r in serverless_iam.of_type("AWS::ApiGateway::GatewayResponse").values()
    )


def test_a_401_points_to_the_mcp_endpoints_metadata_which_names_the_user_pool(
    dev: Synth, prod: Synth, serverless_iam: Synth
) -> None:
    for synth in (dev, prod):
        (api_id,) = synth.of_type("AWS::ApiGateway::RestApi")
        (pool_id,) = synth.of_type("AWS::Cognito::UserPool")
        base = (
            f"https://{{{api_id}}}.execute-api.{{AWS::Region}}.{{AWS::URLSuffix}}/{synth.stack.config.api.stage_name}"
        )
        responses = {
            r["Properties"]["ResponseType"]: r["Properties"]
            for r in synth.of_type("AWS::ApiGateway::GatewayResponse").values()
        }
        for response_type in CHALLENGED:
            header = responses[response_type]["ResponseParameters"]["gatewayresponse.header.WWW-Authenticate"]
            assert joined(header) == f"'Bearer resource_metadata=\"{base}{METADATA_PATH}\"'", response_type
        # The metadata is public and served by the MCP function, which knows the base URL and the issuer.
        method = routed_methods(synth)[("GET", METADATA_PATH)]
        assert method["AuthorizationType"] == "NONE"
        function = synth.resources[synth.logical_id(synth.stack.functions.mcp.function)]
        variables = function["Properties"]["Environment"]["Variables"]
        assert joined(variables["CITEWISE_PUBLIC_URL"]) == base
        # The pool's issuer, https://cognito-idp.<region>.amazonaws.com/<pool id>
        assert variables["CITEWISE_AUTHORIZATION_SERVER"] == {"Fn::GetAtt": [pool_id, "ProviderURL"]}
    # IAM mode has no authorization server to name: no challenge, and the function answers the route 404.
    assert not any(
        "ResponseParameters" in r["Properties"]
        for r in serverless_iam.of_type("AWS::ApiGateway::GatewayResponse").values()
    )
    function = serverless_iam.resources[serverless_iam.logical_id(serverless_iam.stack.functions.mcp.function)]
    assert "CITEWISE_AUTHORIZATION_SERVER" not in function["Properties"]["Environment"]["Variables"]


def joined(value: Any) -> str:
    """A CloudFormation string (`Fn::Join` of literals, `Ref`s and pseudo parameters) as one text, each
    reference written `{LogicalId}`."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"{{{value['Ref']}}}"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(joined(part) for part in parts)
    raise AssertionError(f"not a string expression: {value}")


def test_cors_preflight_exists_only_where_origins_are_configured(dev: Synth, serverless_iam: Synth) -> None:
    options = [m for (verb, _), m in method_paths(dev).items() if verb == "OPTIONS"]
    assert options and all(m["AuthorizationType"] == "NONE" for m in options)
    headers = options[0]["Integration"]["IntegrationResponses"][0]["ResponseParameters"]
    assert (
        headers["method.response.header.Access-Control-Allow-Origin"]
        == f"'{dev.stack.config.api.cors_allow_origins[0]}'"
    )
    # Neither an origin nor a console (prod has its console's: test_console.py): no preflight
    assert not [verb for (verb, _) in method_paths(serverless_iam) if verb == "OPTIONS"]


@pytest.mark.parametrize("key", API_FUNCTIONS)
def test_the_api_functions_answer_the_configured_origins_themselves(
    dev: Synth, serverless_iam: Synth, key: str
) -> None:
    # A proxy response carries CORS only if the function adds it: the functions get the stack's origins
    # (and the console's, last: test_console.py)
    def variables(synth: Synth) -> dict[str, Any]:
        function = synth.resources[synth.logical_id(getattr(synth.stack.functions, key).function)]
        return function["Properties"]["Environment"]["Variables"]  # type: ignore[no-any-return]

    configured = list(dev.stack.config.api.cors_allow_origins)
    assert json.loads(flat(variables(dev)["CITEWISE_CORS_ALLOW_ORIGINS"]))[: len(configured)] == configured
    assert "CITEWISE_CORS_ALLOW_ORIGINS" not in variables(serverless_iam)  # no origin, no console: no CORS at all
    # And the gateway's preflight allows the headers the functions' pages send (MCP's version header too)
    options = next(m for (verb, _), m in method_paths(dev).items() if verb == "OPTIONS")
    allowed = options["Integration"]["IntegrationResponses"][0]["ResponseParameters"]
    assert allowed["method.response.header.Access-Control-Allow-Headers"] == f"'{','.join(cors.ALLOWED_HEADERS)}'"


def test_the_stage_is_throttled_traced_and_logs_access_and_errors(synth: Synth) -> None:
    (stage,) = synth.of_type("AWS::ApiGateway::Stage").values()
    properties = stage["Properties"]
    config = synth.stack.config.api
    assert properties["StageName"] == config.stage_name
    assert properties["TracingEnabled"] is True
    assert "DestinationArn" in properties["AccessLogSetting"]
    assert "$context.requestId" in properties["AccessLogSetting"]["Format"]
    (settings,) = properties["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == config.throttle_rate_limit
    assert settings["ThrottlingBurstLimit"] == config.throttle_burst_limit
    assert settings["LoggingLevel"] == "ERROR" and settings["DataTraceEnabled"] is False
    assert (settings["HttpMethod"], settings["ResourcePath"]) == ("*", "/*")


def test_users_get_their_tenant_from_an_administrator_only(dev: Synth) -> None:
    (pool,) = dev.of_type("AWS::Cognito::UserPool").values()
    properties = pool["Properties"]
    assert properties["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    (tenant,) = [a for a in properties["Schema"] if a["Name"] == "tenant_id"]
    assert tenant["Mutable"] is False and tenant["AttributeDataType"] == "String"
    assert properties["Policies"]["PasswordPolicy"]["MinimumLength"] >= 12
    assert properties["MfaConfiguration"] == "OPTIONAL"
    client_properties = api_client(dev)
    assert client_properties["GenerateSecret"] is False
    assert "custom:tenant_id" in client_properties["ReadAttributes"]
    assert "custom:tenant_id" not in client_properties["WriteAttributes"]


@pytest.mark.parametrize("environment", ["dev", "prod"])
def test_the_pool_has_the_admin_and_operators_groups_and_its_client_no_oauth_flow(
    request: pytest.FixtureRequest, environment: str
) -> None:
    synth: Synth = request.getfixturevalue(environment)
    pool_id = synth.logical_id(synth.stack.api.user_pool)
    # The group tenant settings require (citewise.domain.access.ADMIN_GROUP) and the platform operator's
    # (OPERATOR_GROUP), in the pool, and no other
    groups = {
        g["Properties"]["GroupName"]: g["Properties"] for g in synth.of_type("AWS::Cognito::UserPoolGroup").values()
    }
    assert set(groups) == {ADMIN_GROUP, OPERATOR_GROUP} == {"admin", "operators"}
    assert all(group["UserPoolId"] == {"Ref": pool_id} for group in groups.values())
    assert "without a tenant" in groups[OPERATOR_GROUP]["Description"]
    # No hosted UI for it: no OAuth flow at all (CDK's default: implicit and code flows to https://example.com)
    properties = api_client(synth)
    assert properties["AllowedOAuthFlowsUserPoolClient"] is False
    assert not {"AllowedOAuthFlows", "CallbackURLs", "LogoutURLs", "AllowedOAuthScopes"} & set(properties)
    assert "example.com" not in json.dumps(properties)


def test_prod_requires_mfa_and_keeps_its_users(prod: Synth) -> None:
    (pool,) = prod.of_type("AWS::Cognito::UserPool").values()
    assert pool["Properties"]["MfaConfiguration"] == "ON"
    assert pool["Properties"]["DeletionProtection"] == "ACTIVE"
    assert pool["DeletionPolicy"] == "RetainExceptOnCreate"
    assert "ALLOW_USER_PASSWORD_AUTH" not in api_client(prod)["ExplicitAuthFlows"]


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_each_route_path_is_a_valid_api_gateway_path(route: Any) -> None:
    assert re.fullmatch(r"(/([A-Za-z0-9._-]+|\{[a-z_]+\}))+", route.path)


def test_the_operators_routes_are_behind_the_same_authorizer_as_every_route(dev: Synth, serverless_iam: Synth) -> None:
    # The function, not the authorizer, tells the operator from a tenant's user (both hold the pool's tokens)
    admin = [r for r in ROUTES if r.path.startswith("/v1/admin/")]
    assert {(r.method, r.path) for r in admin} >= {
        ("GET", "/v1/admin/tenants"),
        ("GET", "/v1/admin/usage"),
        ("GET", "/v1/admin/tenants/{tenant_id}/audit"),
        ("POST", "/v1/admin/tenants/{tenant_id}/erasure"),
        ("GET", "/v1/admin/tenants/{tenant_id}/erasure"),
        ("GET", "/v1/admin/tenants/{tenant_id}/quotas"),
        ("PUT", "/v1/admin/tenants/{tenant_id}/quotas"),
        ("POST", "/v1/admin/tenants/{tenant_id}/requeue"),
    }
    (authorizer_id,) = dev.of_type("AWS::ApiGateway::Authorizer")
    for route in admin:
        assert (route.function, route.authenticated) == ("documents", True), route
        method = routed_methods(dev)[(route.method, route.path)]
        assert (method["AuthorizationType"], method["AuthorizerId"]) == ("COGNITO_USER_POOLS", {"Ref": authorizer_id})
        assert routed_methods(serverless_iam)[(route.method, route.path)]["AuthorizationType"] == "AWS_IAM"


def test_only_the_streamed_routes_stream_with_the_same_function_and_authorizer(synth: Synth) -> None:
    # The streamed routes (POST /v1/query and its /m2m twin) are invoked with InvokeWithResponseStream and
    # may run past 29 s; every other route stays buffered. Their function and auth are asserted above.
    methods = routed_methods(synth)
    assert {route.path for route in ROUTES if route.streams} == {"/v1/query", MACHINE_PREFIX + "/v1/query"}
    for route in ROUTES:
        integration = methods[(route.method, route.path)]["Integration"]
        uri = json.dumps(integration["Uri"])
        if route.streams:
            assert integration["ResponseTransferMode"] == "STREAM", route
            assert (
                "response-streaming-invocations" in uri and integration["TimeoutInMillis"] == STREAMED_TIMEOUT_S * 1000
            )
        else:
            assert integration.get("ResponseTransferMode", "BUFFERED") == "BUFFERED", route
            assert "response-streaming-invocations" not in uri, route


def test_the_query_function_runs_the_streaming_runtime_loop(synth: Synth) -> None:
    function = synth.resources[synth.logical_id(synth.stack.functions.query.function)]["Properties"]
    assert function["Environment"]["Variables"]["AWS_LAMBDA_EXEC_WRAPPER"] == STREAM_RUNTIME
    wrapper = FUNCTIONS_DIR / "query" / Path(STREAM_RUNTIME).name
    assert wrapper.is_file() and os.access(wrapper, os.X_OK)
    assert "citewise.api.streaming_runtime" in wrapper.read_text()
