"""The REST API: routes from `citewise.api.routes.ROUTES`, Cognito or IAM auth, one error body everywhere.

The route table is the one the local server uses, so the deployed API and `citewise serve` cannot
disagree about which function serves a path or which paths need an identity (health and the OpenAPI
document do not). API Gateway's own rejections (no token, throttled, body not JSON, unknown route)
answer with the library's error body `{"error": {"code", "message", "details", "request_id"}}`, so a
client parses every error the same way, whoever produced it.

Cognito mode: a user pool whose users carry an immutable `custom:tenant_id` set by an administrator (no
self sign-up, and the app client cannot write it), and a Cognito authorizer that checks the ID token.
IAM mode: SigV4 on every authenticated method; the functions map the caller's principal to a tenant
with `tenant_map`, or recognise the platform operator by `operator_principals`.

The operator's routes (`/v1/admin/`) take the same authorizer as every other: the Cognito authorizer
cannot tell an operator from a tenant's user (both hold valid ID tokens of the pool), so the function
decides, from the claims, and refuses every tenant identity with 403 (`citewise.api.admin`).
"""

from __future__ import annotations

import json

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from citewise.api.routes import ROUTES, Route
from citewise.domain.access import ADMIN_GROUP, OPERATOR_GROUP
from citewise.domain.credentials import RESOURCE_SERVER, CredentialScope
from citewise.domain.errors import (
    CitewiseError,
    ForbiddenError,
    FunctionTimeoutError,
    NotFoundError,
    PayloadTooLargeError,
    ThrottledError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from citewise.runtime.cors import ALLOWED_HEADERS, MAX_AGE_S
from citewise.runtime.resource_metadata import challenge
from citewise_infra.config import EnvironmentConfig
from citewise_infra.constants import COGNITO_TENANT_ATTRIBUTE, STREAMED_TIMEOUT_S
from citewise_infra.functions import CitewiseFunction
from citewise_infra.nag import acknowledge

# API Gateway response type -> (error class whose code it answers with, status override or None).
GATEWAY_ERRORS: dict[str, tuple[type[CitewiseError], str | None]] = {
    "DEFAULT_4XX": (ValidationError, None),
    "DEFAULT_5XX": (CitewiseError, None),  # INTERNAL_ERROR
    "BAD_REQUEST_BODY": (ValidationError, None),
    "BAD_REQUEST_PARAMETERS": (ValidationError, None),
    "UNSUPPORTED_MEDIA_TYPE": (UnsupportedMediaTypeError, None),
    "REQUEST_TOO_LARGE": (PayloadTooLargeError, None),
    "UNAUTHORIZED": (UnauthorizedError, None),
    "EXPIRED_TOKEN": (UnauthorizedError, "401"),
    "INVALID_SIGNATURE": (UnauthorizedError, "401"),
    "ACCESS_DENIED": (ForbiddenError, None),
    "WAF_FILTERED": (ForbiddenError, None),
    "THROTTLED": (ThrottledError, None),
    "QUOTA_EXCEEDED": (ThrottledError, None),
    "RESOURCE_NOT_FOUND": (NotFoundError, None),
    # A function that has not answered within the integration timeout (29 s): 504, as `citewise serve` answers.
    "INTEGRATION_TIMEOUT": (FunctionTimeoutError, None),
    # API Gateway's answer to a path or method it has no route for (it says "Missing Authentication Token").
    "MISSING_AUTHENTICATION_TOKEN": (NotFoundError, "404"),
}
CHALLENGED = ("UNAUTHORIZED", "EXPIRED_TOKEN")
"""The Cognito authorizer's 401s: a missing, invalid or expired token."""
_NO_ROUTE = "no route matches this method and path"
_NO_ROUTE_IAM = _NO_ROUTE + ", or the request is not signed with SigV4"


def error_template(code: str, message_expression: str) -> str:
    """A gateway response body in the library's error shape; `message_expression` is a JSON value
    (a quoted string, or `$context.error.messageString`, which API Gateway renders quoted)."""
    return (
        f'{{"error": {{"code": {json.dumps(code)}, "message": {message_expression}, '
        f'"details": {{}}, "request_id": "$context.requestId"}}}}'
    )


_READ_SCOPE = "Query, search, read documents and settings, the MCP tools"
_FULL_SCOPE = "Also upload, replace and delete the service user's documents"


class Api(Construct):
    """The REST API, its auth, its routes and its gateway responses."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        functions: dict[str, CitewiseFunction],
        erasure: CitewiseFunction,
        origins: tuple[str, ...],
        console_origin: str | None = None,
    ) -> None:
        """`origins`: the browser origins the API answers (`api.cors_allow_origins`, and the console's);
        `console_origin`: the console's, if the stack has one (its gateway responses name it)."""
        super().__init__(scope, construct_id)
        self._config = config
        self._origins = origins
        self._console_origin = console_origin
        self.user_pool: cognito.UserPool | None = None
        self.user_pool_client: cognito.UserPoolClient | None = None
        self.user_pool_domain: cognito.UserPoolDomain | None = None
        self.credential_token_url: str | None = None
        self.rest_api = self._build_rest_api()
        # The stack outputs the URL under its own key (constants.Outputs.API_URL); drop CDK's duplicate.
        self.rest_api.node.try_remove_child("Endpoint")
        # Built from the API's id rather than its `url`, which would make whatever names it (a function's
        # environment, a gateway response) depend on the stage, whose deployment depends on them.
        self.origin = f"https://{self.rest_api.rest_api_id}.execute-api.{Aws.REGION}.{Aws.URL_SUFFIX}"
        """The API's origin (scheme and host)."""
        self.base_url = f"{self.origin}/{config.api.stage_name}"
        """The stage's base URL, no trailing slash."""
        self._authorizer = self._build_cognito() if config.auth.mode == "cognito" else None
        self._build_routes(functions)
        self._challenge = self._build_resource_metadata(functions["mcp"], self.user_pool) if self.user_pool else None
        if self.user_pool is not None:
            self.credential_token_url = self._build_credentials(self.user_pool, functions["documents"], erasure)
        self._build_gateway_responses()
        self._acknowledge_api()

    # --- the API and its stage ---------------------------------------------------------------------------

    def _build_rest_api(self) -> apigw.RestApi:
        config = self._config
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=config.data.log_retention,
            removal_policy=config.removal,
        )
        cors = None
        if self._origins:
            cors = apigw.CorsOptions(
                allow_origins=list(self._origins),
                allow_methods=sorted({route.method for route in ROUTES}),
                allow_headers=list(ALLOWED_HEADERS),
                max_age=Duration.seconds(MAX_AGE_S),
            )
        rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"citewise-{config.name}",
            description=f"citewise {config.name}: question answering with citations (v1)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Stage logging needs the account-level CloudWatch role; a fresh account has none.
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN,
            default_cors_preflight_options=cors,
            deploy_options=apigw.StageOptions(
                stage_name=config.api.stage_name,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # would log request bodies: questions and document metadata
                metrics_enabled=True,
                tracing_enabled=True,
                throttling_rate_limit=config.api.throttle_rate_limit,
                throttling_burst_limit=config.api.throttle_burst_limit,
            ),
        )
        # API Gateway writes execution logs (level ERROR) to a group of this name, created without
        # retention unless it exists: create it first, with the environment's.
        execution_logs = logs.LogGroup(
            self,
            "ExecutionLogs",
            log_group_name=f"API-Gateway-Execution-Logs_{rest_api.rest_api_id}/{config.api.stage_name}",
            retention=config.data.log_retention,
            removal_policy=config.removal,
        )
        rest_api.deployment_stage.node.add_dependency(execution_logs)
        return rest_api

    # --- Cognito -----------------------------------------------------------------------------------------

    def _build_cognito(self) -> apigw.CognitoUserPoolsAuthorizer:
        config = self._config
        required = config.auth.mfa == "required"
        pool = cognito.UserPool(
            self,
            "Users",
            user_pool_name=f"citewise-{config.name}",
            self_sign_up_enabled=False,  # an administrator creates users, and sets their tenant
            sign_in_aliases=cognito.SignInAliases(email=True),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            standard_attributes=cognito.StandardAttributes(
                email=cognito.StandardAttribute(required=True, mutable=True)
            ),
            custom_attributes={
                # Immutable: set at creation, never changed by anyone afterwards, so a user cannot move
                # between tenants; 1-64 characters as `citewise.domain.models.TENANT_ID_PATTERN` allows.
                COGNITO_TENANT_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=64, mutable=False),
            },
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            mfa=cognito.Mfa.REQUIRED if required else cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=cognito.FeaturePlan.ESSENTIALS,
            deletion_protection=not config.destroy_on_delete,
            removal_policy=config.removal,
        )
        self.user_pool = pool
        self.user_pool_client = pool.add_client(
            "ApiClient",
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=config.auth.password_auth),
            generate_secret=False,  # a public client: command lines and browser apps keep no secret
            prevent_user_existence_errors=True,
            read_attributes=cognito.ClientAttributes()
            .with_standard_attributes(email=True, email_verified=True)
            .with_custom_attributes(COGNITO_TENANT_ATTRIBUTE),
            write_attributes=cognito.ClientAttributes().with_standard_attributes(email=True),
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            refresh_token_validity=Duration.days(30),
            enable_token_revocation=True,
            # Clients sign in with SRP (or a password) and send the ID token; there is no hosted UI, so no
            # OAuth at all: CDK's default would allow the implicit flow to a https://example.com callback.
            disable_o_auth=True,
        )
        # Members of `admin` may change their tenant's settings and delete others' shared documents
        # (`citewise.domain.access`); docs/deploy.md says how to add a user to it.
        pool.add_group(
            "AdminGroup",
            group_name=ADMIN_GROUP,
            description="citewise tenant administrators: change the tenant's settings, manage its shared documents",
        )
        # The platform operator (`citewise.domain.tenancy.operator_from_claims`): members created WITHOUT
        # custom:tenant_id reach the /v1/admin/ routes and no tenant route. Only whoever holds IAM rights
        # on this pool (cognito-idp:AdminAddUserToGroup) can add members; no citewise route or token can.
        # A tenant's user added by mistake keeps its immutable tenant, so stays a tenant identity.
        pool.add_group(
            "OperatorsGroup",
            group_name=OPERATOR_GROUP,
            description="citewise platform operators: created without a tenant; the /v1/admin/ routes only",
        )
        if not required:
            acknowledge(
                pool,
                "AwsSolutions-COG2",
                f"MFA is optional in {config.name} so a test user can sign in from the command line; "
                "environments with real users set auth.mfa to required (TOTP) in cdk.json.",
            )
        acknowledge(
            pool,
            "AwsSolutions-COG8",
            "The Essentials plan is deliberate: the Plus plan (threat protection) costs per active user, and "
            "users are created by an administrator only, with MFA available.",
        )
        # The ID token carries custom:tenant_id (an access token does not): clients send the ID token.
        return apigw.CognitoUserPoolsAuthorizer(self, "Authorizer", cognito_user_pools=[pool])

    # --- routes ---------------------------------------------------------------------------------------------

    def _build_routes(self, functions: dict[str, CitewiseFunction]) -> None:
        api = self.rest_api
        validator = api.add_request_validator("Validator", validate_request_body=True, validate_request_parameters=True)
        # JSON bodies must at least be JSON objects; the functions validate the fields (one message style).
        json_object = api.add_model(
            "JsonObject",
            content_type="application/json",
            schema=apigw.JsonSchema(
                schema=apigw.JsonSchemaVersion.DRAFT4, title="JsonObject", type=apigw.JsonSchemaType.OBJECT
            ),
        )
        integrations = {
            key: apigw.LambdaIntegration(fn.function, allow_test_invoke=False) for key, fn in functions.items()
        }
        # A route that may answer with events: API Gateway passes them on as the function writes them
        # (InvokeWithResponseStream; the function's runtime loop streams, citewise.api.streaming_runtime).
        streamed = {
            key: apigw.LambdaIntegration(
                fn.function,
                allow_test_invoke=False,
                response_transfer_mode=apigw.ResponseTransferMode.STREAM,
                timeout=Duration.seconds(STREAMED_TIMEOUT_S),
            )
            for key, fn in functions.items()
            if any(route.streams and route.function == key for route in ROUTES)
        }
        for route in ROUTES:
            resource = api.root.resource_for_path(route.path.lstrip("/"))
            parameters = {
                f"method.request.path.{segment[1:-1]}": True
                for segment in route.path.split("/")
                if segment.startswith("{") and segment.endswith("}")
            }
            authorization_type, authorizer = self._auth(route)
            method = resource.add_method(
                route.method,
                (streamed if route.streams else integrations)[route.function],
                request_validator=validator,
                request_models={"application/json": json_object} if route.method in ("POST", "PUT") else None,
                request_parameters=parameters or None,
                authorization_type=authorization_type,
                authorizer=authorizer,
                # A program's routes (`/m2m/`): the authorizer then takes access tokens granting one of them.
                authorization_scopes=list(route.scopes) if route.scopes and self._authorizer is not None else None,
            )
            self._acknowledge_route(route, method)

    def _auth(self, route: Route) -> tuple[apigw.AuthorizationType, apigw.IAuthorizer | None]:
        if not route.authenticated:
            return apigw.AuthorizationType.NONE, None
        if self._authorizer is not None:
            return apigw.AuthorizationType.COGNITO, self._authorizer
        return apigw.AuthorizationType.IAM, None

    # --- credentials for agents and services -----------------------------------------------------------------

    def _build_credentials(self, pool: cognito.UserPool, documents: CitewiseFunction, erasure: CitewiseFunction) -> str:
        """The `citewise` resource server (scopes `read`, `full`), the user pool domain whose token endpoint
        programs use (client-credentials grant), and what the documents function needs to make and revoke
        credentials: the pool's id, the token URL, and creating and deleting the pool's app clients
        (`citewise.aws.cognito_credentials`); and the erasure function, deleting them (a tenant's erasure
        withdraws its credentials, `citewise.ports.credentials.TenantCredentials`). Returns the token URL.

        The domain is a Cognito-hosted prefix (`citewise-<env>-<account>`: unique per region, no certificate
        to manage); its sign-in page serves the console's app client only (`citewise_infra.console`), since
        the people's API client has OAuth off."""
        pool.add_resource_server(
            "CredentialScopes",
            identifier=RESOURCE_SERVER,
            user_pool_resource_server_name="citewise API",
            scopes=[
                cognito.ResourceServerScope(scope_name=CredentialScope.READ.value, scope_description=_READ_SCOPE),
                cognito.ResourceServerScope(scope_name=CredentialScope.FULL.value, scope_description=_FULL_SCOPE),
            ],
        )
        domain = pool.add_domain(
            "TokenDomain",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=f"citewise-{self._config.name}-{Aws.ACCOUNT_ID}"),
        )
        self.user_pool_domain = domain
        token_url = f"{domain.base_url()}/oauth2/token"
        documents.function.add_environment("CITEWISE_USER_POOL_ID", pool.user_pool_id)
        documents.function.add_environment("CITEWISE_CREDENTIAL_TOKEN_URL", token_url)
        documents.add(
            iam.PolicyStatement(
                actions=["cognito-idp:CreateUserPoolClient", "cognito-idp:DeleteUserPoolClient"],
                resources=[pool.user_pool_arn],
            )
        )
        erasure.function.add_environment("CITEWISE_USER_POOL_ID", pool.user_pool_id)
        erasure.function.add_environment("CITEWISE_CREDENTIAL_TOKEN_URL", token_url)
        erasure.add(iam.PolicyStatement(actions=["cognito-idp:DeleteUserPoolClient"], resources=[pool.user_pool_arn]))
        return token_url

    # --- the MCP endpoint's OAuth metadata (RFC 9728) ---------------------------------------------------------

    def _build_resource_metadata(self, mcp: CitewiseFunction, pool: cognito.UserPool) -> str:
        """The MCP function serves the protected-resource metadata (its public route in ROUTES) naming the
        user pool as the authorization server; the `WWW-Authenticate` value of the API's 401s, pointing at it."""
        mcp.function.add_environment("CITEWISE_PUBLIC_URL", self.base_url)
        mcp.function.add_environment("CITEWISE_AUTHORIZATION_SERVER", pool.user_pool_provider_url)
        return challenge(self.base_url)

    # --- errors ---------------------------------------------------------------------------------------------

    def _build_gateway_responses(self) -> None:
        headers = None
        # Let a browser read the error body (an expired token's 401 above all). A gateway response has one
        # value to send: the console's origin, else the one configured origin; with several, none.
        origin = self._console_origin or (self._origins[0] if len(self._origins) == 1 else None)
        if origin is not None:
            headers = {"Access-Control-Allow-Origin": f"'{origin}'"}
        no_route = _NO_ROUTE if self._config.auth.mode == "cognito" else _NO_ROUTE_IAM
        for response_type, (error, status) in GATEWAY_ERRORS.items():
            message = json.dumps(no_route) if response_type == "MISSING_AUTHENTICATION_TOKEN" else None
            response_headers = headers
            if self._challenge is not None and response_type in CHALLENGED:
                # Every 401 (a gateway response is the whole API's): where the MCP endpoint's metadata is.
                response_headers = {**(headers or {}), "WWW-Authenticate": f"'{self._challenge}'"}
            self.rest_api.add_gateway_response(
                response_type,
                type=getattr(apigw.ResponseType, _enum_name(response_type)),
                status_code=status,
                response_headers=response_headers,
                templates={"application/json": error_template(error.code, message or "$context.error.messageString")},
            )

    # --- cdk-nag ----------------------------------------------------------------------------------------

    def _acknowledge_route(self, route: Route, method: apigw.Method) -> None:
        if not route.authenticated:
            reason = (
                f"{route.method} {route.path} is public by design (health check, API description, the MCP "
                "endpoint's OAuth metadata): it reads no tenant data, and the stage throttling limits it like "
                "every other method."
            )
            acknowledge(method, "AwsSolutions-APIG4", reason)
            acknowledge(method, "AwsSolutions-COG4", reason)
        elif self._authorizer is None:
            acknowledge(
                method,
                "AwsSolutions-COG4",
                f"{route.method} {route.path} uses IAM (SigV4) authorization, the configured auth mode of "
                f"{self._config.name}; the caller's principal maps to a tenant.",
            )

    def _acknowledge_api(self) -> None:
        acknowledge(
            self.rest_api,
            "AwsSolutions-APIG3",
            "No WAF web ACL: every data route needs a Cognito or SigV4 identity, the stage is throttled, and "
            "a web ACL costs a monthly fee per environment; attach one to the stage where traffic warrants.",
        )
        role = self.rest_api.node.try_find_child("CloudWatchRole")
        if role is not None:
            acknowledge(
                role,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
                "API Gateway's account-level logging role must carry this AWS managed policy; it only "
                "lets API Gateway write the stage's access and execution logs.",
            )


def _enum_name(response_type: str) -> str:
    """`DEFAULT_4XX` -> `DEFAULT_4_XX`: the Python name of the ResponseType member."""
    return response_type.replace("4XX", "4_XX").replace("5XX", "5_XX")
