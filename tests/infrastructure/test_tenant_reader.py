"""The tenant-reader role of search mode s3vectors, on the template: only in that mode, its reads on the
tenant indexes of the vector bucket, a session of at most an hour, its ARN given to the reading functions
alone. tests/integration/test_tenant_isolation.py evaluates its policy with the session policies."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from cfnlint.api import ManualArgs, lint_file
from citewise_infra.constants import FUNCTION_KEYS

from citewise.aws.tenant_sessions import READ_ACTIONS, SESSION_SECONDS

from .conftest import Synth, synthesize
from .templates import role_statements
from .test_app import findings

VARIABLE = "CITEWISE_TENANT_READER_ROLE_ARN"
READERS = ("query", "mcp")


@pytest.fixture(scope="module")
def s3vectors(tmp_path_factory: pytest.TempPathFactory, _no_default_account: None) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-s3vectors"), "dev", {"search": {"mode": "s3vectors"}})


def _variables(synth: Synth, key: str) -> dict[str, object]:
    function = getattr(synth.stack.functions, key).function
    properties = synth.resources[synth.logical_id(function)]["Properties"]
    return properties["Environment"]["Variables"]  # type: ignore[no-any-return]


def test_only_the_s3vectors_mode_has_a_tenant_reader(dev: Synth) -> None:
    assert not hasattr(dev.stack, "tenant_reader")
    assert not dev.of_type("AWS::S3Vectors::VectorBucket")
    for key in FUNCTION_KEYS:
        assert VARIABLE not in _variables(dev, key)


def test_the_reader_role_reads_the_tenant_indexes_of_the_bucket_for_an_hour_at_most(s3vectors: Synth) -> None:
    reader = s3vectors.stack.tenant_reader
    role_id = s3vectors.logical_id(reader.role)
    assert s3vectors.resources[role_id]["Properties"]["MaxSessionDuration"] == SESSION_SECONDS
    statements = role_statements(s3vectors, role_id)
    reads = [s for s in statements if any(a.startswith("s3vectors:") for a in s.actions)]
    assert len(reads) == 1 and reads[0].actions == set(READ_ACTIONS)
    bucket_id = s3vectors.stack.get_logical_id(s3vectors.stack.vectors.bucket)
    [resource] = reads[0].resources
    assert resource.endswith("/index/t-*") and bucket_id in resource
    decrypt = [s for s in statements if s.actions == {"kms:Decrypt"}]
    assert len(decrypt) == 1 and len(statements) == 2


def test_the_reading_functions_alone_are_told_the_role_and_may_assume_it(s3vectors: Synth) -> None:
    role_id = s3vectors.logical_id(s3vectors.stack.tenant_reader.role)
    for key in FUNCTION_KEYS:
        variables = _variables(s3vectors, key)
        if key in READERS:
            assert variables[VARIABLE] == {"Fn::GetAtt": [role_id, "Arn"]}
        else:
            assert VARIABLE not in variables
    for key in READERS:
        function_role = s3vectors.logical_id(getattr(s3vectors.stack.functions, key).role)
        s3vectors.assertions.has_resource_properties(
            "AWS::IAM::Policy",
            {
                "Roles": [{"Ref": function_role}],
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [{"Action": "sts:AssumeRole", "Effect": "Allow", "Resource": {"Fn::GetAtt": [role_id, "Arn"]}}]
                    )
                },
            },
        )


def test_the_s3vectors_template_passes_cdk_nag_and_cfn_lint(s3vectors: Synth) -> None:
    # A synth with an unacknowledged finding raises: this one returned, with a clean report
    assert findings(s3vectors.outdir / "validation-report.json") == set()
    template = s3vectors.outdir / f"{s3vectors.stack.stack_name}.template.json"
    matches = lint_file(template, ManualArgs(regions=[s3vectors.stack.config.region]))
    assert [f"{m.rule.id}: {m.message}" for m in matches if m.rule.id != "W3005"] == []
