"""Search mode s3vectors with a KMS key per tenant (`search.key_per_tenant`), read from the synthesized
template: the option's validation, each role's KMS grants (exactly what `citewise.aws.tenant_keys` calls,
on keys carrying the stack's tag), the functions' settings, cdk-nag and cfn-lint clean; and a policy
evaluation of the tenant-reader role with a tenant's session policy over tenant keys."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file
from citewise_infra.config import ConfigError, load_environment
from citewise_infra.constants import FUNCTION_KEYS, FunctionKey

from citewise.aws.s3vectors_requests import index_name
from citewise.aws.tenant_keys import STACK_TAG, TENANT_TAG
from citewise.aws.tenant_sessions import session_policy
from citewise.runtime.settings import load_settings
from tests.integration.handlers.iam import ACCOUNT, PARTITION, REGION, Deployment, Request, session_allows

from .conftest import Synth
from .templates import Statement, role_statements
from .test_app import findings
from .test_functions import SETTINGS, code_directory, deploy_time, variables

SCOPE = "citewise-dev"
KEYS = "arn:aws:kms:us-east-1:<AWS::AccountId>:key/*"  # dev's region
ALIASES = f"arn:aws:kms:us-east-1:<AWS::AccountId>:alias/{SCOPE}/t-*"
ON_STACK_KEYS = {"StringEquals": {f"aws:ResourceTag/{STACK_TAG}": SCOPE}}
# What each function's code calls on tenant keys, and nothing more.
KEY_ACTIONS: dict[str, set[str]] = {
    "ingest": {"kms:CreateKey", "kms:TagResource", "kms:CreateAlias", "kms:DescribeKey", "kms:ScheduleKeyDeletion"},
    "erasure": {"kms:DeleteAlias", "kms:DescribeKey", "kms:ScheduleKeyDeletion"},
    "documents": set(),
    "query": set(),
    "mcp": set(),
}


def tenant_key_statements(synth: Synth, role: Any) -> list[Statement]:
    """The role's statements on tenant keys or aliases, or on `*` with a KMS action (CreateKey)."""
    return [
        s
        for s in role_statements(synth, synth.logical_id(role))
        if any(a.startswith("kms:") for a in s.actions) and set(s.resources) & {KEYS, ALIASES, "*"}
    ]


# --- the option -------------------------------------------------------------------------------------------


def test_a_key_per_tenant_needs_search_mode_s3vectors() -> None:
    environments = {"dev": {"region": "us-east-1", "search": {"mode": "managed", "key_per_tenant": True}}}
    with pytest.raises(ConfigError, match="key_per_tenant applies to search mode s3vectors only"):
        load_environment(environments, "dev")
    environments["dev"]["search"]["mode"] = "s3vectors"
    config = load_environment(environments, "dev")
    assert config.search.key_per_tenant and config.search.key_deletion_days == 7
    assert not load_environment({"dev": {"region": "us-east-1"}}, "dev").search.key_per_tenant
    for days in (6, 31):
        block = {"dev": {"region": "us-east-1", "search": {"mode": "s3vectors", "key_deletion_days": days}}}
        with pytest.raises(ConfigError, match="key_deletion_days"):
            load_environment(block, "dev")


# --- the grants -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(KEY_ACTIONS))
def test_each_function_gets_exactly_the_kms_calls_of_its_code(s3vectors_keys: Synth, key: str) -> None:
    statements = tenant_key_statements(s3vectors_keys, getattr(s3vectors_keys.stack.functions, key).role)
    assert {a for s in statements for a in s.actions} == KEY_ACTIONS[key]
    for statement in statements:
        if statement.resources == (KEYS,):  # a key: only one carrying the stack's tag
            assert statement.condition == ON_STACK_KEYS
        elif statement.resources == (ALIASES,):  # an alias: only the stack's tenant aliases
            assert statement.actions <= {"kms:CreateAlias", "kms:DeleteAlias"} and not statement.condition
        else:  # a new key: only with the stack's tag and a tenant's, no other tag
            assert statement.resources == ("*",) and statement.actions == {"kms:CreateKey", "kms:TagResource"}
            assert statement.condition == {
                "StringEquals": {f"aws:RequestTag/{STACK_TAG}": SCOPE},
                "StringLike": {f"aws:RequestTag/{TENANT_TAG}": "t-*"},
                "ForAllValues:StringEquals": {"aws:TagKeys": [STACK_TAG, TENANT_TAG]},
            }


def test_an_alias_call_is_granted_on_the_alias_and_on_the_key(s3vectors_keys: Synth) -> None:
    # KMS authorizes CreateAlias and DeleteAlias on both (the KMS API reference, "Required permissions")
    for key, action in (("ingest", "kms:CreateAlias"), ("erasure", "kms:DeleteAlias")):
        statements = tenant_key_statements(s3vectors_keys, getattr(s3vectors_keys.stack.functions, key).role)
        assert {s.resources for s in statements if action in s.actions} == {(KEYS,), (ALIASES,)}


def test_the_reader_role_decrypts_with_tenant_keys_only_through_s3_vectors(s3vectors_keys: Synth) -> None:
    statements = tenant_key_statements(s3vectors_keys, s3vectors_keys.stack.tenant_reader.role)
    assert [(s.actions, s.resources) for s in statements] == [({"kms:Decrypt"}, (KEYS,))]
    assert statements[0].condition == {
        "StringEquals": {
            "kms:ViaService": "s3vectors.us-east-1.amazonaws.com",
            f"aws:ResourceTag/{STACK_TAG}": SCOPE,
        }
    }


def test_without_the_option_no_role_may_touch_a_tenant_key(s3vectors: Synth) -> None:
    roles = [getattr(s3vectors.stack.functions, key).role for key in KEY_ACTIONS]
    for role in [*roles, s3vectors.stack.tenant_reader.role]:
        assert tenant_key_statements(s3vectors, role) == []


def test_the_functions_are_told_the_scope_the_bucket_arn_and_the_waiting_period(
    s3vectors_keys: Synth, s3vectors: Synth
) -> None:
    # Every function but the two that reach no tenant index: the bootstrap (none in this mode) and the refresh
    for key in (key for key in FUNCTION_KEYS if key not in ("bootstrap", "refresh")):
        function = getattr(s3vectors_keys.stack.functions, key).function
        variables = s3vectors_keys.resources[s3vectors_keys.logical_id(function)]["Properties"]["Environment"]
        assert variables["Variables"]["CITEWISE_TENANT_KEY_SCOPE"] == SCOPE
        assert variables["Variables"]["CITEWISE_TENANT_KEY_DELETION_DAYS"] == "7"
        assert "CITEWISE_VECTOR_BUCKET_ARN" in variables["Variables"]
        plain = getattr(s3vectors.stack.functions, key).function
        without = s3vectors.resources[s3vectors.logical_id(plain)]["Properties"]["Environment"]["Variables"]
        assert "CITEWISE_TENANT_KEY_SCOPE" not in without


@pytest.mark.parametrize("key", sorted(KEY_ACTIONS))
def test_the_keyed_environment_validates_as_each_functions_settings(
    s3vectors_keys: Synth, key: FunctionKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_ins = {
        "CITEWISE_VECTOR_BUCKET_ARN": f"arn:aws:s3vectors:us-east-1:{ACCOUNT}:bucket/citewise-dev-vectors",
        "CITEWISE_TENANT_READER_ROLE_ARN": f"arn:aws:iam::{ACCOUNT}:role/citewise-dev-TenantReaderRole-ABC",
    }
    for name, value in variables(s3vectors_keys, key).items():
        monkeypatch.setenv(name, stand_ins.get(name) or deploy_time(name, value))
    monkeypatch.chdir(code_directory(s3vectors_keys, key))
    settings = load_settings(SETTINGS[key])
    assert (settings.tenant_key_scope, settings.tenant_key_deletion_days) == (SCOPE, 7)
    assert settings.vector_bucket_arn == stand_ins["CITEWISE_VECTOR_BUCKET_ARN"]


def test_the_keyed_template_passes_cdk_nag_and_cfn_lint(s3vectors_keys: Synth) -> None:
    assert findings(s3vectors_keys.outdir / "validation-report.json") == set()
    template = s3vectors_keys.outdir / f"{s3vectors_keys.stack.stack_name}.template.json"
    matches = lint_file(template, ManualArgs(regions=[s3vectors_keys.stack.config.region]))
    assert [f"{m.rule.id}: {m.message}" for m in matches if m.rule.id != "W3005"] == []


# --- a tenant's session over tenant keys --------------------------------------------------------------------


def key(tenant: str | None, stack: str = SCOPE) -> tuple[str, dict[str, str]]:
    """A key's ARN and what a request on it carries: its tags (absent as ""), through S3 Vectors."""
    number = {"acme": "1", "globex": "2", None: "3"}[tenant]
    arn = f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/{number * 8}-2222-3333-4444-555555555555"
    conditions = {
        "kms:ViaService": f"s3vectors.{REGION}.amazonaws.com",
        f"aws:ResourceTag/{STACK_TAG}": stack if tenant else "",
        f"aws:ResourceTag/{TENANT_TAG}": index_name(tenant) if tenant else "",
    }
    return arn, conditions


def test_a_tenants_session_decrypts_with_its_own_key_only(s3vectors_keys: Synth) -> None:
    reader = s3vectors_keys.logical_id(s3vectors_keys.stack.tenant_reader.role)
    deploy = Deployment(template=s3vectors_keys.template, role_ids={"tenant_reader": reader}, physical={})
    role = deploy.policies("tenant_reader")
    index = f"arn:{PARTITION}:s3vectors:{REGION}:{ACCOUNT}:bucket/citewise-dev-vectors/index/{index_name('acme')}"
    session = json.loads(session_policy(index, REGION, tenant_key=index_name("acme")))

    def decrypts(arn: str, conditions: dict[str, str]) -> bool:
        return session_allows(role, session, Request("kms:Decrypt", arn, conditions))

    assert decrypts(*key("acme"))
    # the role alone would decrypt with globex's key: the session's tenant tag is what refuses it
    globex_arn, globex = key("globex")
    assert session_allows(role, json.loads(session_policy(index, REGION)), Request("kms:Decrypt", globex_arn, globex))
    assert not decrypts(globex_arn, globex)
    assert not decrypts(*key(None))  # a key of the account that is no tenant key of this stack
    assert not decrypts(*key("acme", stack="citewise-prod"))  # acme's key of another stack
    acme_arn, acme = key("acme")
    assert not decrypts(acme_arn, {**acme, "kms:ViaService": f"s3.{REGION}.amazonaws.com"})
