"""Ranking signals and the tenant settings document through the API, on both stacks: an admin turns
freshness and credibility on for one tenant; its fresh official document then outranks a stale community
note that the fused ranking puts first, while another tenant with the same documents keeps the fused
order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.handlers.harness import Stack, claims

SIGNALS = {
    "freshness_weight": 0.6,
    "freshness_half_life_days": 90,
    "credibility_weight": 0.5,
    "source_credibility": {"community": 0.3, "handbook": 1},
}
DEFAULTS = {
    "freshness_weight": None,
    "freshness_half_life_days": None,
    "credibility_weight": None,
    "source_credibility": {},
    "feedback_weight": None,
    "feedback_min_votes": None,
    "routing_aliases": None,
    "routing_time_zone": None,
    "updated_at": None,
    "updated_by": None,
}
"""A tenant that never saved settings: every field absent, so every default applies."""
QUERY = {"query": "roll back a deployment", "route": False}


@pytest.fixture(autouse=True)
def _rank_fusion(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reciprocal-rank fusion, whose scores of two close documents stay close (0.86 and 1.0 here): what
    is tested is how bounded signals reorder close fused scores, the same on every fusion method. The
    default relevance fusion scores the note's many matching words far above the release page (and z-score
    puts the last of so short a list at the floor): gaps no bounded signal is meant to close."""
    monkeypatch.setenv("CITEWISE_FUSION_METHOD", "rrf")


def _documents(stack: Stack, tenant: str) -> None:
    fresh = (datetime.now(UTC) - timedelta(days=5)).date().isoformat()
    official = f"---\nupdated: {fresh}\n---\n# Releases\n\nTo roll back, redeploy the previous release tag.\n"
    note = (
        "---\nupdated: 2021-01-04\n---\n# Roll back a deployment\n\n"
        "Roll back a deployment: roll back the deployment by hand, a deployment roll back note.\n"
    )
    user = claims(tenant, "alice")
    stack.upload_and_ingest(user, "handbook/releases.md", official.encode())
    stack.upload_and_ingest(user, "community/rollback-notes.md", note.encode())


def _paths(body: dict[str, Any]) -> list[str]:
    """Documents in the order of their best hit."""
    return list(dict.fromkeys(hit["chunk"]["document"]["path"] for hit in body["hits"]))


def test_signals_reorder_only_the_tenant_that_turned_them_on(stack: Stack) -> None:
    # Given two tenants with the same two documents, and signals on for acme only
    for tenant in ("acme", "beta"):
        _documents(stack, tenant)
    status, saved = stack.api("PUT", "/v1/settings", body=SIGNALS, identity=claims("acme", "root", groups="admin"))
    assert status == 200, saved
    assert saved["updated_by"] == "root" and saved["source_credibility"] == {"community": 0.3, "handbook": 1.0}
    # When both search
    status, off = stack.api("POST", "/v1/search", body=QUERY, identity=claims("beta", "alice"))
    assert status == 200, off
    status, on = stack.api("POST", "/v1/search", body=QUERY, identity=claims("acme", "alice"))
    assert status == 200, on
    # Then without signals the order is the fused one, the stale note first, and the scores are the fused ones
    assert _paths(off) == ["community/rollback-notes.md", "handbook/releases.md"]
    for hit in off["hits"]:
        assert hit["components"] == {
            "fused": hit["score"],
            "freshness": None,
            "credibility": None,
            "feedback": None,
            "final": hit["score"],
        }
    # And with them the fresh official document ranks first, each hit showing how its score was made
    assert _paths(on) == ["handbook/releases.md", "community/rollback-notes.md"]
    for hit in on["hits"]:
        parts = hit["components"]
        assert hit["score"] == parts["final"] <= parts["fused"]
        if hit["chunk"]["document"]["source"] == "handbook":
            assert parts["freshness"] > 0.9 and parts["credibility"] == 1.0
        else:
            assert parts["freshness"] < 0.01 and parts["credibility"] == 0.3
    # And /v1/query's sources carry the same components
    status, answer = stack.api("POST", "/v1/query", body=QUERY, identity=claims("acme", "alice"))
    assert status == 200, answer
    assert answer["sources"] and all(source["components"]["freshness"] is not None for source in answer["sources"])


def test_only_an_admin_changes_settings_and_bad_values_are_named(stack: Stack) -> None:
    member, admin = claims("acme", "alice"), claims("acme", "root", groups="admin")
    # A member may read the (empty) settings but not change them
    assert stack.api("GET", "/v1/settings", identity=member) == (200, DEFAULTS)
    status, body = stack.api("PUT", "/v1/settings", body={"freshness_weight": 0.5}, identity=member)
    assert status == 403 and body["error"]["code"] == "FORBIDDEN"
    # Out-of-range weights, a zero half-life, an unknown time zone and unknown fields are refused, by name
    for bad, field in (
        ({"freshness_weight": 1.5}, "freshness_weight"),
        ({"source_credibility": {"community": -0.1}}, "source_credibility"),
        ({"freshness_half_life_days": 0}, "freshness_half_life_days"),
        ({"routing_time_zone": "Mars/Olympus"}, "routing_time_zone"),
        ({"freshness": 0.5}, "freshness"),
    ):
        status, body = stack.api("PUT", "/v1/settings", body=bad, identity=admin)
        assert status == 400 and body["error"]["code"] == "VALIDATION_ERROR", body
        assert any(field in error["loc"] for error in body["error"]["details"]["errors"]), body
    assert stack.api("GET", "/v1/settings", identity=member) == (200, DEFAULTS)
    # A valid document is stored and read back by any member
    status, _ = stack.api("PUT", "/v1/settings", body={"routing_time_zone": "Europe/Berlin"}, identity=admin)
    assert status == 200
    status, body = stack.api("GET", "/v1/settings", identity=member)
    assert status == 200 and body["routing_time_zone"] == "Europe/Berlin" and body["updated_by"] == "root"


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"freshness_weight": "0.5"}, "freshness_weight"),
        ({"freshness_weight": True}, "freshness_weight"),
        ({"credibility_weight": False}, "credibility_weight"),
        ({"source_credibility": {"community": "0.3"}}, "source_credibility"),
        ({"source_credibility": {"community": True}}, "source_credibility"),
        ({"freshness_half_life_days": "30"}, "freshness_half_life_days"),
        ({"freshness_half_life_days": True}, "freshness_half_life_days"),
    ],
    ids=lambda value: str(value)[:40],
)
def test_a_number_setting_takes_a_json_number_only_never_a_string_or_a_boolean(
    stack: Stack, bad: dict[str, object], field: str
) -> None:
    admin = claims("acme", "root", groups="admin")
    # When a weight or a half-life is sent as a string or a boolean, it is refused by name, not converted
    status, body = stack.api("PUT", "/v1/settings", body=bad, identity=admin)
    assert status == 400 and body["error"]["code"] == "VALIDATION_ERROR", body
    assert any(field in error["loc"] for error in body["error"]["details"]["errors"]), body
    assert stack.api("GET", "/v1/settings", identity=claims("acme", "alice")) == (200, DEFAULTS)
    # While a JSON integer is a number like any other
    status, saved = stack.api(
        "PUT", "/v1/settings", body={"freshness_weight": 1, "source_credibility": {"x": 0}}, identity=admin
    )
    assert status == 200 and (saved["freshness_weight"], saved["source_credibility"]) == (1.0, {"x": 0.0})
