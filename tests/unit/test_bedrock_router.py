"""The LLM router: what it asks Converse, how tool calls become constraints, and its fallback.

Converse calls go through a real botocore client answered by a `Stubber` (which validates each request
against the Converse API model, tool configuration included) with the recorded tool-use responses of
tests/fixtures/converse_router.json. The constraints must mean exactly what the deterministic router's
mean (`constraint_filter` is shared), and any failure must leave the deterministic router's route with
the reason, never an error.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from citewise.aws import bedrock_router
from citewise.aws.bedrock_router import BedrockRouter, tool_specs
from citewise.domain.models import Caller, SearchRequest
from citewise.ports.router import DateRange
from citewise.query.retrieval import Retriever, RoutingOptions
from citewise.query.routing import DEFAULT_ID_PATTERN, DeterministicRouter, constraint_filter
from citewise.runtime.services import Services, build_router
from citewise.runtime.settings import load_settings
from tests.unit.test_routing import CONTEXT, ZONE

MODEL = "us.amazon.nova-lite-v1:0"
RECORDED = json.loads((Path(__file__).parents[1] / "fixtures" / "converse_router.json").read_text(encoding="utf-8"))
DETERMINISTIC = DeterministicRouter()


def _recorded(name: str) -> tuple[str, dict[str, Any]]:
    entry = RECORDED["responses"][name]
    return entry["question"], entry["response"]


@pytest.fixture
def router(client: Any) -> BedrockRouter:
    return BedrockRouter(MODEL, fallback=DETERMINISTIC, client=client)


def test_tool_calls_become_the_same_constraints_and_filter_as_the_deterministic_router(
    router: BedrockRouter, stub: Stubber
) -> None:
    # Given a model that reports a date phrase and a source phrase
    question, response = _recorded("jira_since_december")
    stub.add_response(
        "converse",
        response,
        {
            "modelId": MODEL,
            "system": ANY,
            "messages": ANY,
            "toolConfig": ANY,
            "inferenceConfig": {"maxTokens": 512, "temperature": 0.0},
        },
    )
    # When it routes the question
    route = router.route(question, CONTEXT)
    # Then the phrases are consumed and the constraints mean what the deterministic router's mean
    assert route.router == "bedrock" and route.fallback is None
    assert route.consumed_phrases == ["in Jira", "since December"]
    assert route.text == "incidents about the queue"
    assert route.constraints.dates == [DateRange(start=datetime(2025, 12, 1, tzinfo=ZONE))]
    assert route.constraints.sources == ["jira"]
    deterministic = DETERMINISTIC.route(question, CONTEXT)
    assert constraint_filter(route.constraints) == constraint_filter(deterministic.constraints)
    assert route.text == deterministic.text


def test_several_tools_accumulate_and_identifiers_stay_in_the_text(router: BedrockRouter, stub: Stubber) -> None:
    question, response = _recorded("last_week_and_id")
    stub.add_response("converse", response)
    route = router.route(question, CONTEXT)
    assert route.router == "bedrock"
    assert route.constraints.dates == [
        DateRange(start=datetime(2026, 3, 2, tzinfo=ZONE), end=datetime(2026, 3, 9, tzinfo=ZONE))
    ]
    assert route.constraints.sources == ["runbooks"] and route.constraints.ids == ["PROJ-123"]
    assert route.text == "what did PROJ-123 change?"
    assert route.consumed_phrases == ["in the runbooks", "last week"]


def test_no_tool_call_is_no_constraint(router: BedrockRouter, stub: Stubber) -> None:
    question, response = _recorded("no_constraint")
    stub.add_response("converse", response)
    route = router.route(question, CONTEXT)
    assert (route.router, route.fallback, route.text) == ("bedrock", None, question)
    assert route.constraints.empty and route.consumed_phrases == []


def test_versions_are_read_as_the_deterministic_router_reads_them(router: BedrockRouter, stub: Stubber) -> None:
    # Given a model that calls no tool, and a question naming a version
    _, response = _recorded("no_constraint")
    stub.add_response("converse", response)
    question = "How do I set the event loop policy for Python 3.12?"

    # When routed / Then the version is read without a tool, the same as the deterministic router reads it
    route = router.route(question, CONTEXT)
    assert route.router == "bedrock" and route.text == question
    assert route.constraints.versions == DETERMINISTIC.route(question, CONTEXT).constraints.versions
    assert [(v.version, v.phrase) for v in route.constraints.versions] == [("3.12", "Python 3.12")]


def test_the_request_offers_one_tool_per_constraint_with_the_known_sources_and_the_clock(
    router: BedrockRouter, stub: Stubber
) -> None:
    question, response = _recorded("no_constraint")
    captured: dict[str, Any] = {}

    class Keep:
        def __eq__(self, other: object) -> bool:
            captured["value"] = other
            return True

    stub.add_response(
        "converse",
        response,
        {
            "modelId": MODEL,
            "system": Keep(),
            "messages": [{"role": "user", "content": [{"text": question}]}],
            "toolConfig": {"tools": tool_specs(CONTEXT), "toolChoice": {"auto": {}}},
            "inferenceConfig": ANY,
        },
    )
    router.route(question, CONTEXT)
    tools = {spec["toolSpec"]["name"]: spec["toolSpec"]["inputSchema"]["json"] for spec in tool_specs(CONTEXT)}
    assert list(tools) == ["date_range", "sources", "identifiers"]
    assert tools["sources"]["properties"]["sources"]["items"]["enum"] == sorted(set(CONTEXT.sources.values()))
    assert all(schema["additionalProperties"] is False for schema in tools.values())
    (system,) = captured["value"]
    assert "Wednesday 2026-03-11 15:30" in system["text"] and "Europe/Berlin" in system["text"]


def test_a_tenant_without_sources_is_offered_no_sources_tool() -> None:
    bare = CONTEXT.model_copy(update={"sources": {}})
    assert [spec["toolSpec"]["name"] for spec in tool_specs(bare)] == ["date_range", "identifiers"]


@pytest.mark.parametrize(
    ("recording", "reason"),
    [
        ("malformed_tool_call", "the input of date_range does not fit its schema"),
        ("unknown_tool", "unknown tool 'search_jira'"),
        ("invalid_json_input", "the input of date_range is not a JSON object"),
        ("unknown_source", "sources the tenant does not have: zendesk"),
        ("bad_date", "'December 1st' is not an ISO date"),
        ("invented_phrase", "a phrase to consume is not in the question"),
        ("cut_at_max_tokens", "stopped with 'max_tokens'"),
    ],
)
def test_an_unusable_answer_falls_back_to_the_deterministic_route(
    router: BedrockRouter, stub: Stubber, recording: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a model answering outside the tool contract
    question, response = _recorded(recording)
    stub.add_response("converse", response)
    # When it routes
    route = router.route(question, CONTEXT)
    # Then the deterministic router's route comes back, saying why
    expected = DETERMINISTIC.route(question, CONTEXT)
    assert route.router == "deterministic" and route.fallback is not None
    assert route.fallback.startswith("bedrock: unusable answer:") and reason in route.fallback
    assert route.model_copy(update={"fallback": None}) == expected
    # And the log says it fell back without the question's text
    assert "the LLM router failed" in caplog.text and "queue" not in caplog.text


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [("ThrottlingException", 429, "bedrock: THROTTLED"), ("AccessDeniedException", 403, "bedrock: GENERATION_ERROR")],
)
def test_a_failed_call_falls_back(router: BedrockRouter, stub: Stubber, code: str, status: int, reason: str) -> None:
    question = "incidents in Jira since December about the queue"
    stub.add_client_error("converse", service_error_code=code, http_status_code=status)
    route = router.route(question, CONTEXT)
    assert (route.router, route.fallback) == ("deterministic", reason)
    assert route.constraints == DETERMINISTIC.route(question, CONTEXT).constraints


def test_a_fallback_past_its_time_budget_says_both_reasons(client: Any, stub: Stubber) -> None:
    # Given a failed call, and a deterministic fallback whose clock runs a second per reading
    ticks = iter(range(1_000))
    fallback = DeterministicRouter(budget_seconds=0.5, clock=lambda: float(next(ticks)))
    stub.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    question = "incidents in Jira since December about the queue"
    # When the LLM router routes a question
    route = BedrockRouter(MODEL, fallback=fallback, client=client).route(question, CONTEXT)
    # Then the question is searched unrouted, and the report gives both reasons
    assert (route.router, route.text, route.constraints.empty) == ("deterministic", question, True)
    assert route.fallback is not None and route.fallback.startswith("bedrock: THROTTLED; deterministic: TIMEOUT")


def test_an_identifier_the_question_does_not_name_falls_back(router: BedrockRouter, stub: Stubber) -> None:
    question, response = _recorded("last_week_and_id")
    stub.add_response("converse", response)
    route = router.route(question.replace("PROJ-123", "the release"), CONTEXT)
    assert route.router == "deterministic" and "an identifier the model named" in str(route.fallback)


def test_the_client_is_made_on_the_first_question_with_few_retries(
    monkeypatch: pytest.MonkeyPatch, client: Any, stub: Stubber
) -> None:
    made: list[dict[str, Any]] = []

    def make(service: str, **config: Any) -> Any:
        made.append({"service": service, **config})
        return client

    monkeypatch.setattr(bedrock_router.aws, "client", make)
    router = BedrockRouter(MODEL, fallback=DETERMINISTIC, region="eu-west-1")
    assert made == []  # nothing at construction: a cold start pays nothing
    for _ in range(2):
        stub.add_response("converse", _recorded("no_constraint")[1])
        router.route("how do we rotate the signing key?", CONTEXT)
    assert made == [{"service": "bedrock-runtime", "region": "eu-west-1", "max_attempts": 2, "read_timeout": 10}]


def test_the_setting_chooses_the_router_and_its_model() -> None:
    assert isinstance(build_router(load_settings()), DeterministicRouter)
    chosen = build_router(load_settings(router="bedrock", generation_model_id=MODEL))
    assert isinstance(chosen, BedrockRouter) and chosen.model_id == MODEL
    own = build_router(load_settings(router="bedrock", router_model_id="anthropic.claude-3-5-haiku-20241022-v1:0"))
    assert isinstance(own, BedrockRouter) and own.model_id == "anthropic.claude-3-5-haiku-20241022-v1:0"


def test_a_search_reports_the_fallback_and_still_answers(services: Services, client: Any, stub: Stubber) -> None:
    # Given a retriever routed by the LLM router, and Bedrock throttling
    stub.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    routing = RoutingOptions(
        router=BedrockRouter(MODEL, fallback=DETERMINISTIC, client=client),
        id_patterns=(DEFAULT_ID_PATTERN,),
        clock=lambda: CONTEXT.now,
    )
    retriever = Retriever(services.index, services.embedder, routing=routing)
    # When a question is searched
    caller = Caller(tenant_id="acme", user_id="alice")
    retrieval = retriever.retrieve(caller, SearchRequest(query="what changed last week in the deployment runbook"))
    # Then the search is routed by the fallback, and the report says so
    assert retrieval.routing.router == "deterministic" and retrieval.routing.fallback == "bedrock: THROTTLED"
    # (the index is empty, so the routed date matched nothing and was dropped again: issue 26)
    assert retrieval.routing.filter_fallback is not None
    assert retrieval.routing.filter_fallback.dropped_phrases == ["last week"]
