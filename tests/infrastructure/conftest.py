"""Synthesize the CDK app offline, once per environment per session, for the infrastructure tests.

Asset bundling is skipped (`aws:cdk:bundling-stacks = []`): the layer would otherwise be pip-installed
for every synth; `make synth` bundles it for real. cdk-nag runs as in `make synth`, so a synth that
returns at all has no unacknowledged finding. Nothing here contacts AWS.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "cdk"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from citewise_infra.app import build  # noqa: E402
from citewise_infra.constants import CDK_JSON, CONTEXT_BUNDLING_STACKS, CONTEXT_ENV, CONTEXT_ENVIRONMENTS  # noqa: E402
from citewise_infra.stack import CitewiseStack  # noqa: E402

OPERATOR_ROLE = "arn:aws:iam::123456789012:role/citewise-operator"
# A Serverless collection with IAM auth (and a platform operator's role), a guardrail and a plain
# foundation model id: the branches that dev and prod do not take.
SERVERLESS_IAM = {
    "search": {"mode": "serverless"},
    "auth": {
        "mode": "iam",
        "tenant_map": {"arn:aws:iam::123456789012:role/acme-app": "acme"},
        "operator_principals": [OPERATOR_ROLE],
        "mfa": "optional",
    },
    "models": {
        "generation_model_id": "anthropic.claude-3-haiku-20240307-v1:0",
        "router": "bedrock",
        "router_model_id": "anthropic.claude-3-5-haiku-20241022-v1:0",
        "guardrail_id": "gr0abc123",
        "guardrail_version": "3",
    },
    "api": {"cors_allow_origins": []},
    # The console signs in on Cognito's hosted UI: none in IAM mode (`citewise_infra.config.ConsoleConfig`).
    "console": {"enabled": False},
}


S3VECTORS = {"search": {"mode": "s3vectors"}}
"""Search mode s3vectors: a vector bucket, an index per tenant, no OpenSearch (`citewise_infra.vectors`);
cdk.json's dev is in it."""
S3VECTORS_KEYS = {"search": {"mode": "s3vectors", "key_per_tenant": True}}
"""Search mode s3vectors with a KMS key per tenant (`citewise.aws.tenant_keys`): the KMS grants."""
MANAGED = {"search": {"mode": "managed"}}
"""Search mode managed: an OpenSearch domain of the environment's sizes (`make synth SEARCH_MODE=managed`)."""

PROD_ALARM_EMAIL = "ops@example.com"


def cdk_context(environment: str, overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The context the CLI would give the app for `-c env=<environment>`, bundling skipped."""
    cdk_json = json.loads(CDK_JSON.read_text(encoding="utf-8"))
    context: dict[str, Any] = copy.deepcopy(cdk_json["context"])
    block = context[CONTEXT_ENVIRONMENTS][environment]
    for section, values in (overrides or {}).items():
        block[section] = {**block.get(section, {}), **values}
    context[CONTEXT_ENV] = environment
    context[CONTEXT_BUNDLING_STACKS] = []
    # What the CLI passes for `"versionReporting": false` in cdk.json.
    context["aws:cdk:version-reporting"] = cdk_json.get("versionReporting", True)
    return context


@dataclass
class Synth:
    """One synthesized environment."""

    stack: CitewiseStack
    template: dict[str, Any]
    outdir: Path
    _assertions: Template | None = field(default=None, repr=False)

    @property
    def assertions(self) -> Template:
        """CDK's `Template` assertions over the synthesized template."""
        if self._assertions is None:
            self._assertions = Template.from_json(self.template)
        return self._assertions

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]  # type: ignore[no-any-return]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """Logical id -> resource, for every resource of `resource_type`."""
        return {key: value for key, value in self.resources.items() if value["Type"] == resource_type}

    def logical_id(self, construct: Any) -> str:
        """The logical id of an L2 construct's CloudFormation resource."""
        return str(self.stack.get_logical_id(construct.node.default_child))

    def metadata(self) -> dict[str, list[dict[str, Any]]]:
        """The stack's construct metadata from the cloud assembly (acknowledgements live there)."""
        path = self.outdir / f"{self.stack.stack_name}.metadata.json"
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def synthesize(outdir: Path, environment: str, overrides: dict[str, dict[str, Any]] | None = None) -> Synth:
    """Synthesize one environment of the real app into `outdir`."""
    app = App(context=cdk_context(environment, overrides), outdir=str(outdir))
    stack = build(app)
    assembly = app.synth()
    template = assembly.get_stack_artifact(stack.artifact_id).template
    return Synth(stack=stack, template=template, outdir=outdir)


@pytest.fixture(scope="session")
def _no_default_account() -> Iterator[None]:
    """Synthesize account-agnostic templates whatever the shell exports."""
    patch = pytest.MonkeyPatch()
    patch.delenv("CDK_DEFAULT_ACCOUNT", raising=False)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory, _no_default_account: None) -> Synth:
    """dev on an OpenSearch domain (`MANAGED`): the domain path that most grants, alarms and outputs are
    checked on. cdk.json's dev itself runs on S3 Vectors: the fixture `s3vectors`."""
    return synthesize(tmp_path_factory.mktemp("cdk-dev"), "dev", MANAGED)


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory, _no_default_account: None) -> Synth:
    # prod refuses to synthesize without an alarm subscriber (`-c alarm_email=...` at deploy time)
    return synthesize(tmp_path_factory.mktemp("cdk-prod"), "prod", {"alarms": {"email": PROD_ALARM_EMAIL}})


@pytest.fixture(scope="session")
def serverless_iam(tmp_path_factory: pytest.TempPathFactory, _no_default_account: None) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-serverless-iam"), "dev", SERVERLESS_IAM)


@pytest.fixture(scope="session")
def s3vectors(tmp_path_factory: pytest.TempPathFactory, _no_default_account: None) -> Synth:
    """dev as cdk.json has it: search mode s3vectors, the cheapest mode that works (docs/deploy.md)."""
    return synthesize(tmp_path_factory.mktemp("cdk-s3vectors"), "dev")


@pytest.fixture(scope="session")
def s3vectors_keys(tmp_path_factory: pytest.TempPathFactory, _no_default_account: None) -> Synth:
    """dev in search mode s3vectors with a key per tenant."""
    return synthesize(tmp_path_factory.mktemp("cdk-s3vectors-keys"), "dev", S3VECTORS_KEYS)


@pytest.fixture(scope="session", params=["dev", "prod", "serverless_iam"])
def synth(request: pytest.FixtureRequest) -> Synth:
    """Each synthesized environment in turn."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]
