"""The web console on AWS: a private bucket that only its distribution reads, strict security headers, a
public app client that may sign in with the authorization code (and PKCE) at the distribution's URL only,
and an API whose CORS names the distribution."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aws_cdk import App
from citewise_infra.app import build
from citewise_infra.config import ConfigError, load_environment
from citewise_infra.console import ANY_CLOUDFRONT_ORIGIN, CONSOLE_SCOPES, HASHED_ASSETS, IMMUTABLE, REVALIDATE
from citewise_infra.constants import CONTEXT_CONSOLE_ASSETS, Outputs

from citewise.aws.s3 import s3_client
from citewise.runtime.console_headers import PERMISSIONS_POLICY, REFERRER_POLICY

from .conftest import SERVERLESS_IAM, Synth, cdk_context
from .templates import flat, method_paths, references


@pytest.fixture(params=["dev", "prod", "s3vectors"])
def console_synth(request: pytest.FixtureRequest) -> Synth:
    """Each environment of cdk.json that has the console (dev on both search modes, prod)."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def distribution_of(synth: Synth) -> tuple[str, dict[str, Any]]:
    (item,) = synth.of_type("AWS::CloudFront::Distribution").items()
    return item


def console_url(synth: Synth) -> str:
    """The distribution's https URL, as `flat` renders it."""
    distribution_id, _ = distribution_of(synth)
    return f"https://<{distribution_id}.DomainName>/"


def console_client(synth: Synth) -> dict[str, Any]:
    assert synth.stack.console is not None and synth.stack.console.client is not None
    return synth.resources[synth.logical_id(synth.stack.console.client)]["Properties"]  # type: ignore[no-any-return]


def security_headers(synth: Synth) -> dict[str, Any]:
    (policy,) = synth.of_type("AWS::CloudFront::ResponseHeadersPolicy").values()
    return policy["Properties"]["ResponseHeadersPolicyConfig"]  # type: ignore[no-any-return]


def directives(csp: str) -> dict[str, list[str]]:
    """A content security policy as directive -> sources."""
    parsed: dict[str, list[str]] = {}
    for directive in csp.split(";"):
        name, *sources = directive.split()
        assert name not in parsed, f"{name} twice"
        parsed[name] = sources
    return parsed


# --- the bucket and the distribution -------------------------------------------------------------------------


def test_the_bucket_is_private_encrypted_tls_only_logged_and_read_by_the_distribution_alone(
    console_synth: Synth,
) -> None:
    synth = console_synth
    assert synth.stack.console is not None
    bucket_id = synth.logical_id(synth.stack.console.bucket)
    bucket = synth.resources[bucket_id]["Properties"]
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (encryption,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert bucket["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": synth.logical_id(synth.stack.storage.access_logs)},
        "LogFilePrefix": "console/",
    }
    assert "WebsiteConfiguration" not in bucket  # no S3 website endpoint: CloudFront's origin is the REST one
    # Its policy: deny plain HTTP, and let CloudFront read objects only when signing for this distribution
    (policy,) = (
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synth.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    )
    allows = [s for s in policy if s["Effect"] == "Allow"]
    distribution_id, _ = distribution_of(synth)
    # CloudFront reads, for this distribution only; and in dev, CDK empties the bucket when the stack goes
    (read,) = [s for s in allows if "Service" in s["Principal"]]
    others = [s["Principal"]["AWS"]["Fn::GetAtt"][0] for s in allows if s is not read]
    assert all(role.startswith("CustomS3AutoDeleteObjectsCustomResourceProviderRole") for role in others)
    assert bool(others) == synth.stack.config.destroy_on_delete
    assert read["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert read["Action"] == "s3:GetObject"
    assert flat(read["Resource"]).endswith("/*")
    (source,) = read["Condition"]["StringEquals"].values()
    assert flat(source).endswith(f"distribution/<{distribution_id}>")
    denies = [s for s in policy if s["Effect"] == "Deny"]
    assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


def test_the_distribution_uses_origin_access_control_https_and_the_security_headers(console_synth: Synth) -> None:
    synth = console_synth
    _, distribution = distribution_of(synth)
    config = distribution["Properties"]["DistributionConfig"]
    (origin,) = config["Origins"]
    # Origin access control (signed requests), not an origin access identity
    (oac_id,) = synth.of_type("AWS::CloudFront::OriginAccessControl")
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    oac = synth.resources[oac_id]["Properties"]["OriginAccessControlConfig"]
    assert (oac["OriginAccessControlOriginType"], oac["SigningBehavior"], oac["SigningProtocol"]) == (
        "s3",
        "always",
        "sigv4",
    )
    assert not synth.of_type("AWS::CloudFront::CloudFrontOriginAccessIdentity")
    behavior = config["DefaultCacheBehavior"]
    assert behavior["ViewerProtocolPolicy"] == "redirect-to-https"
    assert behavior["AllowedMethods"] == ["GET", "HEAD"]
    (policy_id,) = synth.of_type("AWS::CloudFront::ResponseHeadersPolicy")
    assert behavior["ResponseHeadersPolicyId"] == {"Ref": policy_id}
    assert config["DefaultRootObject"] == "index.html"
    # The page is reached at / only (the hosted UI returns there): no error is answered with the page
    assert "CustomErrorResponses" not in config


def test_the_content_security_policy_is_strict_and_names_the_api_the_hosted_ui_and_the_documents(
    console_synth: Synth,
) -> None:
    synth = console_synth
    headers = security_headers(synth)["SecurityHeadersConfig"]
    policy = headers["ContentSecurityPolicy"]
    assert policy["Override"] is True
    csp = directives(flat(policy["ContentSecurityPolicy"]))
    # Code only from the console's own origin: no inline script, no eval, no other host
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"]
    assert csp["style-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"]
    assert csp["base-uri"] == ["'none'"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["worker-src"] == ["'self'", "blob:"]  # pdf.js's worker
    # Nothing unsafe at all, style attributes included
    unsafe = {name for name, sources in csp.items() if any("unsafe" in source for source in sources)}
    assert unsafe == set()
    # It connects to the API, the hosted UI's token endpoint and the documents bucket's presigned URLs only
    (api_id,) = synth.of_type("AWS::ApiGateway::RestApi")
    (domain_id,) = synth.of_type("AWS::Cognito::UserPoolDomain")
    bucket = f"<{synth.logical_id(synth.stack.storage.bucket)}>"
    assert csp["connect-src"] == [
        "'self'",
        f"https://<{api_id}>.execute-api.<AWS::Region>.<AWS::URLSuffix>",
        f"https://<{domain_id}>.auth.{synth.stack.config.region}.amazoncognito.com",
        f"https://{bucket}.s3.<AWS::URLSuffix>",
        f"https://{bucket}.s3.<AWS::Region>.<AWS::URLSuffix>",
    ]
    # The rest of the headers
    assert headers["ContentTypeOptions"] == {"Override": True}
    assert headers["FrameOptions"] == {"FrameOption": "DENY", "Override": True}
    assert headers["ReferrerPolicy"] == {"ReferrerPolicy": REFERRER_POLICY, "Override": True}
    hsts = headers["StrictTransportSecurity"]
    assert hsts["AccessControlMaxAgeSec"] >= 365 * 24 * 3600 and hsts["IncludeSubdomains"] is True
    custom = {h["Header"]: h["Value"] for h in security_headers(synth)["CustomHeadersConfig"]["Items"]}
    assert custom == {"Cross-Origin-Opener-Policy": "same-origin", "Permissions-Policy": PERMISSIONS_POLICY}


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_the_policy_admits_the_urls_the_documents_adapter_presigns(
    s3vectors: Synth, region: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the CSP's sources as deployed in `region`, the documents bucket named
    bucket = "citewise-dev-storagedocuments-abc123"
    deployed = {
        f"<{s3vectors.logical_id(s3vectors.stack.storage.bucket)}>": bucket,
        "<AWS::Region>": region,
        "<AWS::URLSuffix>": "amazonaws.com",
    }
    policy = security_headers(s3vectors)["SecurityHeadersConfig"]["ContentSecurityPolicy"]
    csp = directives(flat(policy["ContentSecurityPolicy"]))
    sources = set()
    for source in csp["connect-src"]:
        for reference, value in deployed.items():
            source = source.replace(reference, value)
        sources.add(source)
    # When the S3 adapter presigns an upload and a download there (offline: signing needs no network)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = s3_client(region)
    key = "tenants/acme/handbook.pdf"
    urls = [
        client.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=60),
        client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=60),
    ]
    # Then the page may fetch both
    for url in urls:
        parts = urlsplit(url)
        assert f"{parts.scheme}://{parts.netloc}" in sources, url


# --- sign-in --------------------------------------------------------------------------------------------------


def test_the_console_client_is_public_code_grant_only_and_returns_to_the_distribution(console_synth: Synth) -> None:
    synth = console_synth
    client = console_client(synth)
    assert client["GenerateSecret"] is False  # a public client: the page proves itself with PKCE
    assert client["AllowedOAuthFlowsUserPoolClient"] is True
    assert client["AllowedOAuthFlows"] == ["code"]  # no implicit grant, no client credentials
    assert sorted(client["AllowedOAuthScopes"]) == sorted(scope.scope_name for scope in CONSOLE_SCOPES)
    assert [flat(url) for url in client["CallbackURLs"]] == [console_url(synth)]
    assert [flat(url) for url in client["LogoutURLs"]] == [console_url(synth)]
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    # No password or SRP sign-in through the API with this client: the hosted UI only, then refreshes
    assert client["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]
    assert client["PreventUserExistenceErrors"] == "ENABLED"
    assert client["EnableTokenRevocation"] is True
    # The ID token the page sends carries the tenant; the page writes no attribute
    assert "custom:tenant_id" in client["ReadAttributes"]
    assert client["WriteAttributes"] == []
    units = client["TokenValidityUnits"]
    assert (client["IdTokenValidity"], units["IdToken"]) == (60, "minutes")
    assert (client["RefreshTokenValidity"], units["RefreshToken"]) == (720, "minutes")
    # The pool's one domain serves its hosted UI
    (domain_id,) = synth.of_type("AWS::Cognito::UserPoolDomain")
    assert references(client["UserPoolId"]) == references(synth.resources[domain_id]["Properties"]["UserPoolId"])


def test_the_api_client_still_has_no_oauth(console_synth: Synth) -> None:
    # The console's client is the only one the hosted UI signs in for
    client = console_synth.resources[console_synth.logical_id(console_synth.stack.api.user_pool_client)]
    assert "AllowedOAuthFlows" not in client["Properties"]
    assert client["Properties"]["AllowedOAuthFlowsUserPoolClient"] is False


def test_the_page_gets_its_configuration_and_files_with_the_right_caching(console_synth: Synth) -> None:
    synth = console_synth
    console = synth.stack.console
    assert console is not None and console.client is not None
    deployments = {
        d["Properties"]["SystemMetadata"]["cache-control"]: d["Properties"]
        for d in synth.of_type("Custom::CDKBucketDeployment").values()
    }
    assert set(deployments) == {IMMUTABLE, REVALIDATE}
    hashed, pages = deployments[IMMUTABLE], deployments[REVALIDATE]
    for deployment in (hashed, pages):
        assert deployment["DestinationBucketName"] == {"Ref": synth.logical_id(console.bucket)}
    # Hashed files are added, never pruned: a page loaded before a deploy still finds the files it names
    assert (hashed["Exclude"], hashed["Include"], hashed["Prune"]) == (["*"], [HASHED_ASSETS], False)
    # The pages (and config.json) are synced and pruned, the hashed files left alone
    assert (pages["Exclude"], pages["Prune"]) == ([HASHED_ASSETS], True)
    # config.json, with the values CloudFormation knows at deploy time
    (markers,) = [m for m in pages["SourceMarkers"] if m]
    written = {json.loads(flat(value)) for value in markers.values()}
    (api_id,) = synth.of_type("AWS::ApiGateway::RestApi")
    (domain_id,) = synth.of_type("AWS::Cognito::UserPoolDomain")
    expected = {
        "api_url": f"https://<{api_id}>.execute-api.<AWS::Region>.<AWS::URLSuffix>/{synth.stack.config.api.stage_name}",
        "auth": {
            "kind": "cognito",
            "domain": f"https://<{domain_id}>.auth.{synth.stack.config.region}.amazoncognito.com",
            "client_id": f"<{synth.logical_id(console.client)}>",
            "redirect_uri": console_url(synth),
            "logout_uri": console_url(synth),
            "scopes": ["openid", "email", "profile"],
        },
    }
    assert rendered(synth, console.page_config) == expected
    assert {expected["api_url"], *(v for k, v in expected["auth"].items() if k not in ("kind", "scopes"))} == written


def rendered(synth: Synth, value: Any) -> Any:
    """`value` with every string as CloudFormation will produce it, rendered by `flat`."""
    resolved = synth.stack.resolve(value)
    if isinstance(resolved, dict) and not ({"Ref", "Fn::Join", "Fn::GetAtt"} & set(resolved)):
        return {key: rendered(synth, item) for key, item in resolved.items()}
    if isinstance(resolved, list):
        return [rendered(synth, item) for item in resolved]
    return flat(resolved)


# --- CORS -----------------------------------------------------------------------------------------------------


def test_the_api_answers_the_console_origin(console_synth: Synth) -> None:
    synth = console_synth
    origin = console_url(synth).rstrip("/")
    # The functions' responses
    for key in ("query", "documents", "mcp"):
        function = synth.resources[synth.logical_id(getattr(synth.stack.functions, key).function)]
        variable = flat(function["Properties"]["Environment"]["Variables"]["CITEWISE_CORS_ALLOW_ORIGINS"])
        configured = list(synth.stack.config.api.cors_allow_origins)
        assert json.loads(variable) == [*configured, origin]
    # The gateway's preflights
    options = [m for (verb, _), m in method_paths(synth).items() if verb == "OPTIONS"]
    assert options
    response = options[0]["Integration"]["IntegrationResponses"][0]
    allowed = {flat(response["ResponseParameters"]["method.response.header.Access-Control-Allow-Origin"])}
    allowed |= {flat(template) for template in response.get("ResponseTemplates", {}).values()}
    assert any(origin in value for value in allowed)
    # The gateway's own errors (an expired token's 401 above all) are readable by the console
    for gateway_response in synth.of_type("AWS::ApiGateway::GatewayResponse").values():
        parameters = gateway_response["Properties"]["ResponseParameters"]
        assert flat(parameters["gatewayresponse.header.Access-Control-Allow-Origin"]) == f"'{origin}'"


def test_the_documents_bucket_lets_the_console_upload_and_read_presigned_urls(console_synth: Synth) -> None:
    synth = console_synth
    bucket = synth.resources[synth.logical_id(synth.stack.storage.bucket)]["Properties"]
    rules = bucket["CorsConfiguration"]["CorsRules"]
    (console_rule,) = [rule for rule in rules if rule["AllowedOrigins"] == [ANY_CLOUDFRONT_ORIGIN]]
    assert sorted(console_rule["AllowedMethods"]) == ["GET", "PUT"]
    assert "Content-Range" in console_rule["ExposedHeaders"]


def test_outputs_name_the_console(console_synth: Synth) -> None:
    synth = console_synth
    assert synth.stack.console is not None and synth.stack.console.client is not None
    outputs = synth.template["Outputs"]
    assert flat(outputs[Outputs.CONSOLE_URL]["Value"]) == console_url(synth)
    assert outputs[Outputs.CONSOLE_CLIENT_ID]["Value"] == {"Ref": synth.logical_id(synth.stack.console.client)}
    assert outputs[Outputs.CONSOLE_BUCKET]["Value"] == {"Ref": synth.logical_id(synth.stack.console.bucket)}


# --- configuration ---------------------------------------------------------------------------------------------


def test_iam_mode_has_no_console_and_says_why() -> None:
    environments = {"dev": {"region": "us-east-1", **SERVERLESS_IAM, "console": {"enabled": True}}}
    with pytest.raises(ConfigError, match="console signs people in on the Cognito hosted UI.*console.enabled to false"):
        load_environment(environments, "dev")
    del environments["dev"]["console"]
    assert load_environment(environments, "dev").console.enabled is False  # off unless asked for


def test_iam_mode_builds_no_console(serverless_iam: Synth) -> None:
    assert serverless_iam.stack.console is None
    assert not serverless_iam.of_type("AWS::CloudFront::Distribution")


def test_a_missing_build_fails_the_synth_with_the_directory_named(tmp_path: Path) -> None:
    app = App(context={**cdk_context("dev"), CONTEXT_CONSOLE_ASSETS: str(tmp_path)}, outdir=str(tmp_path / "out"))
    with pytest.raises(Exception, match=f"no index.html in {tmp_path}"):
        build(app)


def test_a_build_with_its_own_configuration_is_refused(tmp_path: Path) -> None:
    # The stack writes config.json: a second one in the build could land instead of it
    (tmp_path / "index.html").write_text("<!doctype html>", encoding="utf-8")
    (tmp_path / "config.json").write_text('{"auth": {"kind": "local"}}', encoding="utf-8")
    app = App(context={**cdk_context("dev"), CONTEXT_CONSOLE_ASSETS: str(tmp_path)}, outdir=str(tmp_path / "out"))
    with pytest.raises(Exception, match="holds a config.json: the stack writes the console's own"):
        build(app)
