"""The web console on AWS: its built files in a private bucket, served by CloudFront, signing in on Cognito.

The bucket is reachable only through the distribution (origin access control: CloudFront signs its
requests, the bucket policy admits that distribution alone). Every response carries the console's
security headers (`citewise.runtime.console_headers`), its content security policy naming the API, the
user pool's hosted UI and the documents bucket as the only places the page may connect to.

People sign in on the hosted UI of the pool's domain (the one whose token endpoint programs use) through
the console's own app client: a public client (no secret: a page keeps none) that may use the
authorization-code grant only, which the page runs with PKCE, and whose callback and logout URLs are the
distribution's. The page then sends the ID token, which carries `custom:tenant_id`, as every browser
client does. The page learns all this from `config.json`, written at deploy time beside its files.

The console's origin is the distribution's domain, known at deploy time only, and the API's CORS (its
preflights, its gateway responses, its functions' responses) must name it, so the stack builds the
distribution before the API: the policy's API and hosted UI origins are produced when the template is,
once `connect` has been given the API. A construct that the API depends on cannot otherwise name the API.

The documents bucket's CORS rule for the console allows any CloudFront origin, not this distribution's: the
policy names the documents bucket, so a rule naming the distribution would make a cycle CloudFormation
refuses. A CORS rule on a bucket reachable only with presigned URLs protects nothing anyway (the URL is
the credential, and a server can use it without CORS); the policy's connect-src, which keeps an injected
script from fetching anywhere else, is where the exact name protects, so it keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Aws, DefaultStackSynthesizer, Duration, IResolvable, IResolveContext, RemovalPolicy, Stack, Token
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from citewise.runtime.console_headers import (
    CROSS_ORIGIN_OPENER_POLICY,
    PERMISSIONS_POLICY,
    content_security_policy,
)
from citewise_infra.api import Api
from citewise_infra.config import EnvironmentConfig
from citewise_infra.constants import COGNITO_TENANT_ATTRIBUTE, CONSOLE_CONFIG_FILE, CONSOLE_ENTRY
from citewise_infra.nag import acknowledge

CONSOLE_SCOPES = (cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE)
ANY_CLOUDFRONT_ORIGIN = "https://*.cloudfront.net"
"""The documents bucket's CORS origin for the console (the module's docstring says why not the exact one)."""
HASHED_ASSETS = "assets/*"
"""Where the build puts the files whose names carry a hash of their content (Vite's `assets/`)."""
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
"""The entry page and `config.json`: a deploy takes effect at the next load, with no invalidation."""
HSTS_MAX_AGE = Duration.days(730)


class Console(Construct):
    """The console's bucket, distribution and security headers; `connect` adds its app client and config."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        assets: Path,
        access_logs: s3.IBucket,
        documents: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        if not (assets / CONSOLE_ENTRY).is_file():
            raise FileNotFoundError(f"the console's built files are missing: no {CONSOLE_ENTRY} in {assets}")
        if (assets / CONSOLE_CONFIG_FILE).exists():
            # Two sources of one key in a deployment: which one lands is not documented.
            raise ValueError(f"{assets} holds a {CONSOLE_CONFIG_FILE}: the stack writes the console's own")
        self._config = config
        self._assets = assets
        self._documents = documents
        # Set by `connect`, read when the template is produced (the policy's connect-src).
        self._api_origin: str | None = None
        self._sign_in_origin: str | None = None
        self.client: cognito.UserPoolClient | None = None
        self.page_config: dict[str, Any] = {}
        """What `config.json` tells the page (`connect` fills it): the API's URL, how to sign in."""
        self.bucket = self._build_bucket(access_logs)
        self.headers = self._build_headers()
        self.distribution = self._build_distribution()
        self.origin = f"https://{self.distribution.distribution_domain_name}"
        """The console's origin (scheme and host, no slash): what the API's CORS names."""
        self.url = f"{self.origin}/"
        """The console's address: its callback and logout URL."""

    # --- the site --------------------------------------------------------------------------------------------

    def _build_bucket(self, access_logs: s3.IBucket) -> s3.Bucket:
        # Only the build lives here, put back by every deploy; kept or emptied with the stack as every bucket.
        return s3.Bucket(
            self,
            "Site",
            encryption=s3.BucketEncryption.S3_MANAGED,  # CloudFront reads SSE-S3 objects with no key grant
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="console/",
            removal_policy=self._config.removal,
            auto_delete_objects=self._config.destroy_on_delete,
        )

    def _build_headers(self) -> cloudfront.ResponseHeadersPolicy:
        csp = Token.as_string(_Produced(self._content_security_policy))
        return cloudfront.ResponseHeadersPolicy(
            self,
            "SecurityHeaders",
            comment=f"citewise {self._config.name} console: security headers and content security policy",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=csp, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=HSTS_MAX_AGE, include_subdomains=True, override=True
                ),
            ),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(
                custom_headers=[
                    cloudfront.ResponseCustomHeader(
                        header="Cross-Origin-Opener-Policy", value=CROSS_ORIGIN_OPENER_POLICY, override=True
                    ),
                    cloudfront.ResponseCustomHeader(
                        header="Permissions-Policy", value=PERMISSIONS_POLICY, override=True
                    ),
                ]
            ),
        )

    def _content_security_policy(self) -> str:
        if self._api_origin is None or self._sign_in_origin is None:
            raise RuntimeError("Console.connect was not called: the policy has no API to name")
        bucket = self._documents.bucket_name
        # boto3 presigns virtual-hosted URLs: on the global endpoint in us-east-1, the regional one elsewhere.
        documents = (f"https://{bucket}.s3.{Aws.URL_SUFFIX}", f"https://{bucket}.s3.{Aws.REGION}.{Aws.URL_SUFFIX}")
        return content_security_policy((self._api_origin, self._sign_in_origin, *documents))

    def _build_distribution(self) -> cloudfront.Distribution:
        distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"citewise {self._config.name} console",
            default_root_object=CONSOLE_ENTRY,
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(
                    self.bucket, origin_access_levels=[cloudfront.AccessLevel.READ]
                ),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers,
                compress=True,
            ),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
        )
        acknowledge(
            distribution,
            "AwsSolutions-CFR1",
            "No geo restriction: the console is a sign-in page and static files; who may use it is decided by "
            "the user pool, wherever they are.",
        )
        acknowledge(
            distribution,
            "AwsSolutions-CFR2",
            "No WAF web ACL: the distribution serves static files only, and a web ACL costs a monthly fee per "
            "environment; every data request goes to the API, which authenticates and throttles it.",
        )
        acknowledge(
            distribution,
            "AwsSolutions-CFR3",
            "No CloudFront access logs: the distribution serves the same public build to everyone; the bucket's "
            "server access logs record its origin reads, and the API logs every data request.",
        )
        acknowledge(
            distribution,
            "AwsSolutions-CFR4",
            "The distribution uses the default *.cloudfront.net certificate, for which CloudFront fixes the "
            "viewer TLS policy; a custom domain with its own certificate and TLSv1.2_2021 is the way to pin it.",
        )
        return distribution

    # --- sign-in and the page's configuration ---------------------------------------------------------------

    def connect(self, api: Api) -> None:
        """Let people sign in through the console (an app client of `api`'s user pool on its hosted UI) and
        give the page its configuration; the security headers name `api` and the hosted UI from now on."""
        if api.user_pool is None or api.user_pool_domain is None:
            raise ValueError("the console needs the API's Cognito user pool and its domain (auth mode cognito)")
        sign_in = api.user_pool_domain.base_url()
        self._api_origin = api.origin
        self._sign_in_origin = sign_in
        self.client = client = api.user_pool.add_client(
            "ConsoleClient",
            user_pool_client_name=f"citewise-{self._config.name}-console",
            generate_secret=False,  # a page keeps no secret: PKCE stands in for it
            # Only refreshing tokens through the API: people sign in on the hosted UI, never with a password
            # sent by the page (SRP or plain).
            auth_flows=cognito.AuthFlow(user_srp=False),
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=list(CONSOLE_SCOPES),
                callback_urls=[self.url],
                logout_urls=[self.url],
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            prevent_user_existence_errors=True,
            read_attributes=cognito.ClientAttributes()
            .with_standard_attributes(email=True, email_verified=True)
            .with_custom_attributes(COGNITO_TENANT_ATTRIBUTE),
            write_attributes=cognito.ClientAttributes(),
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            # A browser's storage holds it: a working day, then the hosted UI again.
            refresh_token_validity=Duration.hours(12),
            auth_session_validity=Duration.minutes(5),
            enable_token_revocation=True,
        )
        self._deploy(api, sign_in, client)

    def _deploy(self, api: Api, sign_in: str, client: cognito.UserPoolClient) -> None:
        """The build and `config.json`: hashed files cached for good, the rest revalidated at every load."""
        # Both run in CDK's one deployment function of the stack, which logs here; a deploy-time log is no
        # data, so it goes with the stack.
        log_group = logs.LogGroup(
            self, "DeploymentLogs", retention=self._config.data.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        hashed = s3deploy.BucketDeployment(
            self,
            "HashedFiles",
            sources=[s3deploy.Source.asset(str(self._assets))],
            destination_bucket=self.bucket,
            exclude=["*"],
            include=[HASHED_ASSETS],
            cache_control=[s3deploy.CacheControl.from_string(IMMUTABLE)],
            log_group=log_group,
            # A page loaded before a deploy still finds the files it names.
            prune=False,
        )
        self.page_config = {
            "api_url": api.base_url,
            "auth": {
                "kind": "cognito",
                "domain": sign_in,
                "client_id": client.user_pool_client_id,
                "redirect_uri": self.url,
                "logout_uri": self.url,
                "scopes": [scope.scope_name for scope in CONSOLE_SCOPES],
            },
        }
        pages = s3deploy.BucketDeployment(
            self,
            "Pages",
            sources=[
                s3deploy.Source.asset(str(self._assets)),
                s3deploy.Source.json_data(CONSOLE_CONFIG_FILE, self.page_config),
            ],
            destination_bucket=self.bucket,
            exclude=[HASHED_ASSETS],  # neither copied nor pruned here
            cache_control=[s3deploy.CacheControl.from_string(REVALIDATE)],
            log_group=log_group,
        )
        # The entry page names the hashed files: they are there before it is.
        pages.node.add_dependency(hashed)
        self._acknowledge_deployments(pages)

    def _acknowledge_deployments(self, deployment: s3deploy.BucketDeployment) -> None:
        # Both deployments run in CDK's one function of the stack, which `handler_role` belongs to.
        handler = deployment.handler_role.node.scope
        assert handler is not None
        acknowledge(
            handler,
            "AwsSolutions-L1",
            "The function that copies the console's files at deploy time is CDK's own (BucketDeployment), on "
            "the runtime that CDK release chose and tested; it runs only during a deployment.",
        )
        acknowledge(
            handler,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "CDK's deployment function only writes its logs through the AWS managed basic execution policy.",
        )
        bucket_id = Stack.of(self).get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        qualifier = DefaultStackSynthesizer.DEFAULT_QUALIFIER
        assets = f"arn:aws:s3:::cdk-{qualifier}-assets-<AWS::AccountId>-{self._config.region}"
        reason = (
            "CDK's deployment function reads the zipped build from the CDK assets bucket and syncs it into the "
            "console's bucket (list, get, put, delete, abort): CDK's grant, limited to those two buckets."
        )
        for finding in (
            "Action::s3:GetBucket*",
            "Action::s3:GetObject*",
            "Action::s3:List*",
            "Action::s3:Abort*",
            "Action::s3:DeleteObject*",
            f"Resource::{assets}/*",
            f"Resource::<{bucket_id}.Arn>/*",
        ):
            acknowledge(handler, f"AwsSolutions-IAM5[{finding}]", reason)


@jsii.implements(IResolvable)
class _Produced:
    """A value that `compute` gives when the template is produced (`Lazy`'s producers cannot be Python
    functions: jsii does not pass them the context they are declared to take)."""

    def __init__(self, compute: Callable[[], str]) -> None:
        self._compute = compute

    @property
    def creation_stack(self) -> list[str]:
        return []

    def resolve(self, context: IResolveContext) -> Any:  # noqa: ARG002 - IResolvable's signature
        return self._compute()

    def to_string(self) -> str:
        return Token.as_string(self)
