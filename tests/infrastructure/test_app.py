"""The app as a whole: environments from cdk.json, cdk-nag with every finding acknowledged for a reason (and
every acknowledgement still needed), cfn-lint clean, outputs for the deploy walkthrough."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_s3 as s3
from cfnlint.api import ManualArgs, lint_file
from citewise_infra import nag
from citewise_infra.config import ConfigError, load_environment
from citewise_infra.constants import CDK_JSON, CONTEXT_ENVIRONMENTS, Outputs, stack_name

from .conftest import MANAGED, Synth, cdk_context


def environments() -> dict[str, Any]:
    return json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"][CONTEXT_ENVIRONMENTS]  # type: ignore[no-any-return]


# --- environments ------------------------------------------------------------------------------------


def test_cdk_json_defines_dev_and_prod_and_both_are_valid() -> None:
    blocks = environments()
    assert {"dev", "prod"} <= set(blocks)
    dev, prod = load_environment(blocks, "dev"), load_environment(blocks, "prod", "ops@example.com")
    # dev is the disposable one, on the cheapest mode that works (docs/deploy.md); prod keeps its data and
    # spreads over zones
    assert (dev.search.mode, dev.destroy_on_delete) == ("s3vectors", True)
    assert prod.destroy_on_delete is False
    assert prod.search.availability_zones >= 2 and prod.search.master_nodes == 3
    assert prod.auth.mfa == "required"


def test_prod_refuses_to_synthesize_without_an_alarm_subscriber() -> None:
    # Given cdk.json as committed (prod requires a subscriber and names none)
    with pytest.raises(
        ConfigError, match=r"alarms: .*requires an alarm subscriber: set alarms.email .* -c alarm_email="
    ):
        load_environment(environments(), "prod")
    # And the address from the command line's context is enough
    assert load_environment(environments(), "prod", "ops@example.com").alarms.email == "ops@example.com"
    # dev needs none
    assert load_environment(environments(), "dev").alarms.email is None


def test_an_environment_must_be_chosen_and_must_exist() -> None:
    with pytest.raises(ConfigError, match=r"-c env=NAME \(one of: dev, prod"):
        load_environment(environments(), None)
    with pytest.raises(ConfigError, match="unknown environment 'staging': cdk.json defines dev, prod"):
        load_environment(environments(), "staging")


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        ("search", {"mode": "elastic"}, "search.mode"),
        ("search", {"serach_mode": "managed"}, "search.serach_mode: Extra inputs are not permitted"),
        ("search", {"master_nodes": 3}, "master_nodes and master_node_type go together"),
        ("search", {"data_nodes": 3, "availability_zones": 2}, "multiple of availability_zones"),
        ("models", {"guardrail_id": "abc"}, "guardrail_id and guardrail_version go together"),
        ("models", {"embedding_dimension": 768}, "Titan v2 embeds in 256, 512 or 1024"),
        ("models", {"generation_model_id": "arn:aws:bedrock:us-east-1::foundation-model/x"}, "generation_model_id"),
        ("auth", {"mode": "iam", "tenant_map": {}}, "needs a tenant_map"),
        ("auth", {"mode": "iam", "tenant_map": {"acme-role": "acme"}}, "not an IAM principal ARN"),
        (
            "auth",
            {"mode": "iam", "tenant_map": {"arn:aws:iam::123456789012:role/r": "bad tenant!"}},
            "not a valid tenant id",
        ),
        ("auth", {"operator_principals": ["arn:aws:iam::123456789012:role/ops"]}, "applies to iam mode only"),
        (
            "auth",
            {
                "mode": "iam",
                "tenant_map": {"arn:aws:iam::123456789012:role/r": "acme"},
                "operator_principals": ["arn:aws:iam::123456789012:role/r"],
            },
            "an operator is no tenant member",
        ),
        (
            "auth",
            {"mode": "iam", "tenant_map": {"arn:aws:iam::123456789012:role/r": "acme"}, "operator_principals": ["ops"]},
            "not an IAM principal ARN",
        ),
        ("data", {"log_retention_days": 8}, "CloudWatch Logs keeps logs for one of"),
        ("api", {"cors_allow_origins": ["localhost"]}, "not an origin"),
        ("query", {"timeout_s": 29}, "query.timeout_s is 29: an API function must time out by 24 s"),
        ("mcp", {"timeout_s": 25}, "5 s under API Gateway's 29 s integration timeout"),
        ("prices", {"per_million": {"output_tokens": 0.24}}, "'output_tokens' is no usage counter"),
        ("prices", {"per_million": {"generation_output_tokens": 240000000}}, "must be from 0 to 1,000,000"),
    ],
)
def test_invalid_settings_fail_naming_the_environment_and_field(
    section: str, values: dict[str, Any], message: str
) -> None:
    blocks = environments()
    blocks["dev"] = {**blocks["dev"], section: {**blocks["dev"].get(section, {}), **values}}
    with pytest.raises(ConfigError, match="environment 'dev' in cdk.json is invalid") as raised:
        load_environment(blocks, "dev")
    assert message in str(raised.value)


def test_a_synthesized_environment_is_one_stack_in_its_region_for_any_account(synth: Synth) -> None:
    config = synth.stack.config
    assert synth.stack.stack_name == stack_name(config.name)
    assert synth.stack.region == config.region
    # No account in cdk.json and none in the environment: the template works in any account
    assert "Ref" in json.dumps(synth.template) and "AWS::AccountId" in json.dumps(synth.template)
    assert synth.stack.termination_protection is (not config.destroy_on_delete)


def test_outputs_for_the_deploy_walkthrough(dev: Synth, serverless_iam: Synth) -> None:
    common = {
        Outputs.API_URL,
        Outputs.DOCUMENTS_BUCKET,
        Outputs.REGISTRY_TABLE,
        Outputs.SEARCH_ENDPOINT,
        Outputs.INGEST_QUEUE_URL,
        Outputs.DEAD_LETTER_QUEUE_URL,
        Outputs.ERASURE_QUEUE_URL,
        Outputs.ALARM_TOPIC_ARN,
        Outputs.DASHBOARD_NAME,
        Outputs.AUDIT_LOG_GROUP,
    }
    assert set(dev.template["Outputs"]) == common | {
        Outputs.USER_POOL_ID,
        Outputs.USER_POOL_CLIENT_ID,
        Outputs.CREDENTIAL_TOKEN_URL,
        Outputs.CONSOLE_URL,
        Outputs.CONSOLE_CLIENT_ID,
        Outputs.CONSOLE_BUCKET,
    }
    assert set(serverless_iam.template["Outputs"]) == common  # no user pool in IAM mode


# --- cdk-nag -------------------------------------------------------------------------------------------


def acknowledgements(synth: Synth) -> dict[tuple[str, str], str]:
    """(construct path, rule) -> reason, as recorded in the cloud assembly."""
    found: dict[tuple[str, str], str] = {}
    for path, entries in synth.metadata().items():
        for entry in entries:
            if entry["type"] == "aws:cdk:acknowledged-rules":
                for rule, reason in entry["data"].items():
                    found[(path.lstrip("/"), rule.removeprefix(f"{nag.PLUGIN}::"))] = reason
    return found


def findings(report_file: Path) -> set[tuple[str, str]]:
    """(construct path, rule) of every violation in a validation report."""
    report = json.loads(report_file.read_text(encoding="utf-8"))
    return {
        (construct["constructPath"], violation["ruleName"])
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    }


def covers(ack_path: str, finding_path: str) -> bool:
    return finding_path == ack_path or finding_path.startswith(ack_path + "/")


def test_every_synth_passed_cdk_nag_and_every_acknowledgement_has_a_reason(synth: Synth) -> None:
    # A synth with an unacknowledged finding raises; this one returned, and its report is clean
    assert findings(synth.outdir / "validation-report.json") == set()
    acknowledged = acknowledgements(synth)
    assert acknowledged, "cdk-nag acknowledgements must be recorded in the assembly"
    for (path, rule), reason in acknowledged.items():
        assert rule.startswith("AwsSolutions-"), (path, rule)
        assert len(reason) >= nag.MIN_REASON_LENGTH, (path, rule, reason)


@pytest.mark.parametrize(("fixture", "overrides"), [("s3vectors", {}), ("dev", MANAGED)], ids=["s3vectors", "managed"])
def test_without_acknowledgements_dev_fails_exactly_on_the_acknowledged_findings(
    fixture: str,
    overrides: dict[str, dict[str, Any]],
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Given the dev app (cdk.json's, and on a domain) synthesized with every acknowledgement switched off
    dev: Synth = request.getfixturevalue(fixture)
    outdir = tmp_path_factory.mktemp("cdk-dev-raw")
    context = {**cdk_context("dev", overrides), nag.CONTEXT_ACKNOWLEDGE: "false"}
    app = App(context=context, outdir=str(outdir))
    from citewise_infra.app import build

    build(app)
    # When it is synthesized, cdk-nag fails it
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    raw = findings(outdir / "validation-report.json")
    acknowledged = set(acknowledgements(dev))
    # Then each raw finding is one the real synth acknowledges, and each acknowledgement is still needed
    unacknowledged = [f for f in raw if not any(rule == f[1] and covers(path, f[0]) for path, rule in acknowledged)]
    stale = [a for a in acknowledged if not any(a[1] == rule and covers(a[0], path) for path, rule in raw)]
    assert unacknowledged == [] and stale == []
    assert len(raw) >= len(acknowledged) > 10


def test_cdk_nag_fails_a_synth_on_a_finding(tmp_path: Path) -> None:
    # The plugin wiring itself: a bucket without TLS enforcement or access logs is refused
    app = App(outdir=str(tmp_path))
    s3.Bucket(Stack(app, "Bad"), "Bucket")
    nag.enable(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert ("Bad/Bucket/Resource", "AwsSolutions-S10") in findings(tmp_path / "validation-report.json")


def test_an_acknowledgement_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="must say why"):
        nag.acknowledge(Stack(App(), "S"), "AwsSolutions-S1", "because")


# --- cfn-lint -------------------------------------------------------------------------------------------


def test_cfn_lint_finds_nothing_but_cdks_redundant_depends_on(synth: Synth) -> None:
    template = synth.outdir / f"{synth.stack.stack_name}.template.json"
    matches = lint_file(template, ManualArgs(regions=[synth.stack.config.region]))
    assert [f"{m.rule.id}: {m.message}" for m in matches if m.rule.id != "W3005"] == []
