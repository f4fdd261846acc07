"""Search (a managed domain or a Serverless collection) and the index bootstrap custom resource."""

from __future__ import annotations

import json

from citewise_infra.constants import INDEX_RESOURCE_TYPE

from .conftest import Synth
from .templates import flat, references


def test_the_managed_domain_encrypts_everything_and_trusts_only_the_account(dev: Synth, prod: Synth) -> None:
    for synth in (dev, prod):
        (domain,) = synth.of_type("AWS::OpenSearchService::Domain").values()
        properties = domain["Properties"]
        assert properties["NodeToNodeEncryptionOptions"] == {"Enabled": True}
        assert properties["EncryptionAtRestOptions"] == {
            "Enabled": True,
            "KmsKeyId": {"Ref": synth.logical_id(synth.stack.storage.key)},
        }
        assert properties["DomainEndpointOptions"] == {
            "EnforceHTTPS": True,
            "TLSSecurityPolicy": "Policy-Min-TLS-1-2-2019-07",
        }
        assert "AdvancedSecurityOptions" not in properties  # IAM decides, per role and index path
        (statement,) = properties["AccessPolicies"]["Statement"]
        assert flat(statement["Principal"]["AWS"]) == "arn:aws:iam::<AWS::AccountId>:root"
        assert (
            flat(statement["Resource"])
            == f"arn:aws:es:us-east-1:<AWS::AccountId>:domain/citewise-{synth.stack.config.name}/*"
        )
        assert set(properties["LogPublishingOptions"]) == {"SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS", "ES_APPLICATION_LOGS"}
        assert properties["EngineVersion"] == "OpenSearch_2.19"
        assert properties["EBSOptions"]["VolumeType"] == "gp3"
        # the log publishing policy exists before the domain tries to publish
        (publishing_id,) = synth.of_type("AWS::Logs::ResourcePolicy")
        assert publishing_id in domain["DependsOn"]


def test_dev_is_one_small_node_and_prod_spreads_over_zones_with_masters(dev: Synth, prod: Synth) -> None:
    (dev_domain,) = dev.of_type("AWS::OpenSearchService::Domain").values()
    assert dev_domain["Properties"]["ClusterConfig"] == {
        "DedicatedMasterEnabled": False,
        "InstanceCount": 1,
        "InstanceType": "t3.small.search",
        "MultiAZWithStandbyEnabled": False,
        "ZoneAwarenessEnabled": False,
    }
    (prod_domain,) = prod.of_type("AWS::OpenSearchService::Domain").values()
    cluster = prod_domain["Properties"]["ClusterConfig"]
    assert cluster["ZoneAwarenessEnabled"] is True and cluster["ZoneAwarenessConfig"] == {"AvailabilityZoneCount": 2}
    assert cluster["DedicatedMasterEnabled"] is True and cluster["DedicatedMasterCount"] == 3
    assert prod_domain["DeletionPolicy"] == "RetainExceptOnCreate" and dev_domain["DeletionPolicy"] == "Delete"


def test_the_serverless_collection_has_encryption_network_and_data_policies(serverless_iam: Synth) -> None:
    synth = serverless_iam
    (collection,) = synth.of_type("AWS::OpenSearchServerless::Collection").values()
    assert collection["Properties"]["Type"] == "VECTORSEARCH"
    assert collection["Properties"]["Name"] == "citewise-dev"
    policies = {
        p["Properties"]["Type"]: (key, p)
        for key, p in synth.of_type("AWS::OpenSearchServerless::SecurityPolicy").items()
    }
    encryption = json.loads(flat(policies["encryption"][1]["Properties"]["Policy"]))
    assert encryption["AWSOwnedKey"] is False
    assert encryption["KmsARN"] == f"<{synth.logical_id(synth.stack.storage.key)}.Arn>"
    assert encryption["Rules"] == [{"ResourceType": "collection", "Resource": ["collection/citewise-dev"]}]
    (network,) = json.loads(policies["network"][1]["Properties"]["Policy"])
    assert network["Rules"] == [{"ResourceType": "collection", "Resource": ["collection/citewise-dev"]}]
    # the collection can only be created once its encryption policy exists
    assert {policies["encryption"][0], policies["network"][0]} <= set(collection["DependsOn"])
    names = [p["Properties"]["Name"] for p in synth.of_type("AWS::OpenSearchServerless::AccessPolicy").values()]
    assert all(len(name) <= 32 for name in names + [p[1]["Properties"]["Name"] for p in policies.values()])


def test_the_functions_are_told_the_right_signing_service(dev: Synth, serverless_iam: Synth) -> None:
    for synth, service in ((dev, "es"), (serverless_iam, "aoss")):
        for fn in (synth.stack.functions.query, synth.stack.functions.ingest):
            env = synth.resources[synth.logical_id(fn.function)]["Properties"]["Environment"]["Variables"]
            assert env["CITEWISE_OPENSEARCH_SERVICE"] == service
            assert flat(env["CITEWISE_OPENSEARCH_ENDPOINT"]).startswith(("https://", "<"))


def test_the_index_bootstrap_custom_resource_creates_the_configured_index(synth: Synth) -> None:
    (resource,) = synth.of_type(INDEX_RESOURCE_TYPE).values()
    properties = resource["Properties"]
    config = synth.stack.config
    assert properties["IndexName"] == config.search.index_name
    assert properties["Embedder"] == config.models.embedder
    assert properties["Dimension"] == str(config.models.embedding_dimension)
    assert references(properties["Endpoint"])  # the domain's or collection's endpoint
    # its service token is the provider framework, which invokes the bootstrap function
    (provider_id,) = references(properties["ServiceToken"])
    provider = synth.resources[provider_id]["Properties"]
    bootstrap_id = synth.logical_id(synth.stack.functions.bootstrap.function)
    assert provider["Environment"]["Variables"]["USER_ON_EVENT_FUNCTION_ARN"] == {"Fn::GetAtt": [bootstrap_id, "Arn"]}
    # Delete never reaches the handler: the resource is retained, and the handler's Delete is a no-op anyway
    assert resource["DeletionPolicy"] == "Retain"


def test_on_serverless_the_bootstrap_waits_for_its_data_access_policy(serverless_iam: Synth) -> None:
    (resource,) = serverless_iam.of_type(INDEX_RESOURCE_TYPE).values()
    bootstrap_policy = [
        key
        for key, policy in serverless_iam.of_type("AWS::OpenSearchServerless::AccessPolicy").items()
        if "citewise bootstrap function" in flat(policy["Properties"]["Policy"])
    ]
    assert bootstrap_policy and set(bootstrap_policy) <= set(resource["DependsOn"])
