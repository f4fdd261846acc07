"""The pure parts of a tenant's read session: its session policy within STS's limit and naming one index,
its session name within STS's rules and naming the tenant."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from citewise.aws.s3vectors_requests import index_name
from citewise.aws.tenant_keys import TENANT_TAG
from citewise.aws.tenant_sessions import (
    MAX_SESSION_POLICY,
    READ_ACTIONS,
    bucket_arn,
    session_name,
    session_policy,
)
from citewise.domain.models import TENANT_ID_PATTERN

# The AssumeRole API reference: RoleSessionName is 2-64 characters of [\w+=,.@-].
SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,64}$")
TENANT_IDS = st.from_regex(TENANT_ID_PATTERN, fullmatch=True)


def test_the_longest_session_policy_fits_stss_plaintext_limit() -> None:
    # Given the longest names there are: a 63-character bucket, a 63-character index, a long partition
    index = "t-" + "x" * 61
    arn = f"{bucket_arn('aws-iso-b', 'ap-southeast-5', '123456789012', 'b' * 63)}/index/{index}"
    # When its policy is built
    policy = session_policy(arn, "ap-southeast-5")
    # Then it is within the 2,048 characters of an inline session policy, with room to spare
    assert len(policy) <= MAX_SESSION_POLICY / 3, len(policy)


def test_the_session_policy_allows_the_reads_on_that_index_only() -> None:
    arn = "arn:aws:s3vectors:eu-west-1:123456789012:bucket/vectors/index/t-acme-0123"
    document = json.loads(session_policy(arn, "eu-west-1"))
    reads, decrypt = document["Statement"]
    assert reads == {"Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": arn}
    assert not any(action.endswith(("PutVectors", "DeleteVectors", "*")) for action in reads["Action"])
    # decryption only as S3 Vectors asks for it; the role's policy names the key
    assert decrypt["Action"] == "kms:Decrypt"
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "s3vectors.eu-west-1.amazonaws.com"}}


@given(TENANT_IDS)
def test_every_tenants_session_name_is_one_sts_accepts_and_names_its_index(tenant_id: str) -> None:
    name = session_name(tenant_id)
    assert SESSION_NAME.match(name), name
    assert name == index_name(tenant_id)


def test_tenants_differing_in_case_get_different_sessions() -> None:
    assert session_name("Acme") != session_name("acme")


def test_with_a_key_per_tenant_the_session_decrypts_with_its_tenants_key_only() -> None:
    # Given the longest names, and a key per tenant (`citewise.aws.tenant_keys`: the key carries its index's name)
    index = "t-" + "x" * 61
    arn = f"{bucket_arn('aws-iso-b', 'ap-southeast-5', '123456789012', 'b' * 63)}/index/{index}"
    policy = session_policy(arn, "ap-southeast-5", tenant_key=index)
    # Then decryption is narrowed to the key tagged with that index, still through S3 Vectors only
    _, decrypt = json.loads(policy)["Statement"]
    assert decrypt["Condition"] == {
        "StringEquals": {
            "kms:ViaService": "s3vectors.ap-southeast-5.amazonaws.com",
            f"aws:ResourceTag/{TENANT_TAG}": index,
        }
    }
    assert len(policy) <= MAX_SESSION_POLICY / 3, len(policy)
