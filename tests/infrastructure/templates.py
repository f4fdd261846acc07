"""Reading a synthesized CloudFormation template: a role's statements, a method's path, an intrinsic's refs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .conftest import Synth


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def references(value: Any) -> set[str]:
    """Logical ids a value refers to (Ref and Fn::GetAtt, at any depth)."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value:
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(value["Fn::GetAtt"][0])
        for item in value.values():
            found |= references(item)
    elif isinstance(value, list):
        for item in value:
            found |= references(item)
    return found


def flat(value: Any) -> str:
    """An intrinsic rendered as one string (`Fn::Join` parts concatenated, refs as `<Id>`), for matching."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return str(separator).join(flat(part) for part in parts)
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return f"<{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}>"
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Statement:
    """One Allow statement, with its resources flattened to strings."""

    actions: frozenset[str]
    resources: tuple[str, ...]
    condition: dict[str, Any]


def role_statements(synth: Synth, role_id: str) -> list[Statement]:
    """Every statement of every identity policy attached to the role (inline or AWS::IAM::Policy)."""
    documents: list[dict[str, Any]] = []
    role = synth.resources[role_id]
    documents += [policy["PolicyDocument"] for policy in role["Properties"].get("Policies", [])]
    assert not role["Properties"].get("ManagedPolicyArns"), f"{role_id} must not use managed policies"
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if role_id in references(policy["Properties"].get("Roles", [])):
            documents.append(policy["Properties"]["PolicyDocument"])
    statements = []
    for document in documents:
        for raw in document["Statement"]:
            assert raw["Effect"] == "Allow"
            statements.append(
                Statement(
                    actions=frozenset(as_list(raw["Action"])),
                    resources=tuple(flat(resource) for resource in as_list(raw["Resource"])),
                    condition=raw.get("Condition", {}),
                )
            )
    return statements


def actions_on(statements: list[Statement], resource_part: str) -> set[str]:
    """Actions allowed on any resource whose flattened ARN contains `resource_part`."""
    return {a for s in statements if any(resource_part in r for r in s.resources) for a in s.actions}


def all_actions(statements: list[Statement]) -> set[str]:
    return {action for statement in statements for action in statement.actions}


def method_paths(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    """(HTTP method, full resource path) -> the AWS::ApiGateway::Method resource's properties."""
    resources = synth.of_type("AWS::ApiGateway::Resource")
    rest_api_id = next(iter(synth.of_type("AWS::ApiGateway::RestApi")))

    def path_of(resource_ref: Any) -> str:
        if isinstance(resource_ref, dict) and "Fn::GetAtt" in resource_ref:
            assert resource_ref["Fn::GetAtt"] == [rest_api_id, "RootResourceId"]
            return ""
        resource = resources[resource_ref["Ref"]]["Properties"]
        return f"{path_of(resource['ParentId'])}/{resource['PathPart']}"

    methods = {}
    for method in synth.of_type("AWS::ApiGateway::Method").values():
        properties = method["Properties"]
        methods[(properties["HttpMethod"], path_of(properties["ResourceId"]) or "/")] = properties
    return methods
