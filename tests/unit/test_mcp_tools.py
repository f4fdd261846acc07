"""The MCP tools as library code: schemas, results, errors, profiles and the one access rule.

Driven through `Toolbox.call` on the local stack with the hashing embedder; the wire format of each result
is checked against the MCP SDK's own types (`mcp_types`), which the dispatcher does not import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from jsonschema import Draft202012Validator

from citewise.builtin.extractive import ExtractiveSynthesizer
from citewise.domain.errors import ValidationError
from citewise.domain.models import Answer, Caller, SearchHit, Visibility
from citewise.domain.sources import (
    RefreshRun,
    RefreshStatus,
    RefreshSummary,
    SourceCategory,
    SourceKind,
    SourceSpec,
)
from citewise.ingest.pipeline import Outcome
from citewise.ingest.sources import hold_source, register_source
from citewise.mcp.profiles import ToolProfile, load_profiles
from citewise.mcp.protocol import dispatch
from citewise.mcp.tools import Toolbox
from citewise.runtime.services import Services
from citewise.runtime.settings import Settings
from tests.factories import source

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ALICE = Caller(tenant_id="acme", user_id="alice")
BOB = Caller(tenant_id="acme", user_id="bob")
MALLORY = Caller(tenant_id="globex", user_id="alice")  # the same user name in another tenant

HANDBOOK = b"# Vacation\n\nEmployees get 25 days of paid vacation per year. Unused days expire in March.\n"
STANDARD = b"# Widgets\n\nThe widget standard requires a torque of 12 newton metres for every bolt.\n"
PRIVATE = b"# Salary\n\nAlice's salary review is scheduled for the vacation month of August.\n"
OTHER_TENANT = b"# Vacation\n\nGlobex employees get 40 days of paid vacation per year.\n"

PROFILES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_profiles.toml"


@pytest.fixture
def corpus(services: Services) -> dict[str, str]:
    """Shared documents of acme, alice's private one, and a document of another tenant; paths -> ids."""
    ids = {}
    for tenant, path, data, owner, visibility in (
        ("acme", "handbook/vacation.md", HANDBOOK, "alice", Visibility.SHARED),
        ("acme", "external/widgets.md", STANDARD, "carol", Visibility.SHARED),
        ("acme", "private/salary.md", PRIVATE, "alice", Visibility.PRIVATE),
        ("globex", "handbook/vacation.md", OTHER_TENANT, "alice", Visibility.SHARED),
    ):
        result = services.ingestor.ingest(source(tenant, path, data, owner=owner, visibility=visibility))
        assert result.outcome is Outcome.NEW
        ids[f"{tenant}:{path}"] = result.document.doc_id
    return ids


@pytest.fixture
def toolbox(services: Services) -> Toolbox:
    return Toolbox(services, profiles=load_profiles(PROFILES))


def call(toolbox: Toolbox, caller: Caller, name: str, **arguments: Any) -> types.CallToolResult:
    """One call, its wire form validated as the SDK's CallToolResult and against what the tool declares."""
    return declared(toolbox, name, toolbox.call(caller, name, arguments, "req-1"))


def declared(toolbox: Toolbox, name: str, wire: dict[str, Any]) -> types.CallToolResult:
    """`wire` as the SDK's CallToolResult, after the check a client makes (the MCP Inspector, the SDKs):
    any `structuredContent` must validate against the tool's `outputSchema`, on errors too."""
    result = types.CallToolResult.model_validate(wire)
    schemas = {tool["name"]: tool["outputSchema"] for tool in toolbox.definitions()}
    if result.structured_content is not None:
        Draft202012Validator(schemas[name]).validate(result.structured_content)
    return result


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None
    return result.structured_content


# --- definitions ------------------------------------------------------------------------------------------


def test_every_tool_is_listed_with_described_parameters_and_an_output_schema(toolbox: Toolbox) -> None:
    tools = [types.Tool.model_validate(tool) for tool in toolbox.definitions()]
    assert [tool.name for tool in tools] == [
        "rag_query",
        "search",
        "list_documents",
        "get_document",
        "list_sources",
        "rag_query_external",
    ]
    for tool in tools:
        assert tool.description and tool.output_schema is not None
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
        properties = tool.input_schema["properties"]
        for name, schema in properties.items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
        assert not {"tenant", "tenant_id", "user", "user_id", "owner"} & set(properties)
    by_name = {tool.name: tool for tool in tools}
    assert by_name["rag_query"].input_schema["required"] == ["query"]
    assert by_name["rag_query"].input_schema["properties"]["max_sources"]["default"] == 3
    assert by_name["rag_query_external"].input_schema["properties"]["max_sources"]["default"] == 2
    assert by_name["rag_query_external"].description.startswith("Answer from the external reference documentation.")


def test_list_sources_shows_the_callers_tenants_sources_only(toolbox: Toolbox, services: Services) -> None:
    # Given a source of acme, refreshed once, and one of globex
    admin = Caller(tenant_id="acme", user_id="carol", groups=("admin",))
    spec = SourceSpec(
        kind=SourceKind.SITEMAP, url="https://docs.python.org/sitemap.xml", category=SourceCategory.OFFICIAL_DOCS,
        version_template="https://docs.python.org/{version}/",
    )  # fmt: skip
    registered = register_source(services.sources, admin, spec, now=NOW)
    message = hold_source(services.sources, "acme", registered.source_id, now=NOW)
    summary = RefreshSummary(changed=2, new=5)
    run = RefreshRun(
        run_id=message.run_id, started_at=NOW, finished_at=NOW, status=RefreshStatus.COMPLETED, summary=summary
    )
    assert services.sources.finish_run("acme", registered.source_id, run, NOW)
    other = admin.model_copy(update={"tenant_id": "globex"})
    register_source(
        services.sources, other, SourceSpec(kind=SourceKind.URLS, urls=["https://globex.example/a"]), now=NOW
    )
    # When alice (no admin) lists the sources
    result = call(toolbox, ALICE, "list_sources")
    # Then she sees acme's, with its last refresh, valid against the declared schema
    (shown,) = structured(result)["sources"]
    assert shown["source_id"] == registered.source_id and shown["category"] == "official_docs"
    assert shown["version"] == "https://docs.python.org/{version}/" and shown["refresh_hours"] == 24
    assert (shown["last_refresh"]["new"], shown["last_refresh"]["status"]) == (5, "completed")
    assert "official_docs" in result.content[0].text and "2 changed, 5 new" in result.content[0].text
    assert [s["source_id"] for s in structured(call(toolbox, MALLORY, "list_sources"))["sources"]] != [
        registered.source_id
    ]


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every object schema (one with `properties`) inside `schema`, nested ones included."""
    if isinstance(schema, dict):
        if "properties" in schema:
            yield schema
        for value in schema.values():
            yield from subschemas(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from subschemas(value)


def test_each_schema_defines_a_shared_part_once_and_every_reference_resolves(toolbox: Toolbox) -> None:
    for tool in toolbox.definitions():
        for kind in ("inputSchema", "outputSchema"):
            schema = tool[kind]
            Draft202012Validator.check_schema(schema)
            inline = [json.dumps(sub, sort_keys=True) for sub in subschemas(schema)]
            repeated = {sub[:80] for sub in inline if inline.count(sub) > 1}
            assert not repeated, f"{tool['name']} {kind} repeats {repeated}"
            for reference in re.findall(r'"\$ref": "#/\$defs/([^"]+)"', json.dumps(schema)):
                assert reference in schema["$defs"], f"{tool['name']} {kind}: {reference}"
    rag_query = toolbox.definitions()[0]["inputSchema"]
    assert rag_query["properties"]["filters"]["description"].startswith("Optional metadata filter")
    assert "Limits: at most" in rag_query["$defs"]["Filter"]["description"]


def test_the_tool_list_is_smaller_than_with_the_filter_inlined() -> None:
    # 31,374 bytes when the filter's groups were spelled out under andAll and under orAll (docs/mcp.md);
    # 25,644 with $defs, then 27,228 with the routing report's `filter_fallback` (issue 26, item 4: rag_query's
    # and search's output schemas each carry it), then 28,875 with rag_query's optional conversation (issue 29:
    # its argument, and the turn in each answering tool's output schema), then 33,863 with issue 31's six version
    # operators (a property at each level of the filter's spelled-out tree, and their operand's schema with the
    # version pattern, in rag_query's and search's input) and the routing report's `versions` (in both outputs),
    # then 36,938 with list_sources (issue 31: a compact summary of each source, not the REST API's whole
    # record), then 37,041 with the answers' `response_id` (issue 31's feedback), hence this bound.
    listed = json.dumps({"tools": Toolbox(services=None).definitions()}, separators=(",", ":"))  # type: ignore[arg-type]
    assert len(listed.encode()) < 38_000


def test_list_documents_describes_source_as_the_contents_origin(toolbox: Toolbox) -> None:
    schema = next(tool for tool in toolbox.definitions() if tool["name"] == "list_documents")["inputSchema"]
    described = json.dumps(schema)
    assert "`s3` (uploads)" not in described
    assert "first folder" in described and "metadata" in described


# --- rag_query ----------------------------------------------------------------------------------------------


def test_rag_query_answers_with_markers_and_sources_relative_to_the_tenant(
    toolbox: Toolbox, corpus: dict[str, str]
) -> None:
    result = call(toolbox, ALICE, "rag_query", query="How many days of paid vacation do employees get?")
    body = structured(result)
    assert result.is_error is False
    assert body["grounded"] is True and "25 days" in body["answer"] and "[1]" in body["answer"]
    first = body["sources"][0]
    assert first["n"] == 1 and first["path"] == "handbook/vacation.md" and first["title"] == "Vacation"
    assert first["quotes"] and first["quotes"][0] in HANDBOOK.decode()
    assert not any(source["path"].startswith("tenants/") for source in body["sources"])
    assert len(body["sources"]) <= 3
    text = result.content[0]
    assert isinstance(text, types.TextContent) and "25 days" in text.text and "handbook/vacation.md" in text.text


def test_rag_query_asks_in_a_conversation_when_asked_to(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    # Given a conversation started by the tool
    first = structured(
        call(toolbox, ALICE, "rag_query", query="How many days of paid vacation?", conversation_id="new")
    )
    conversation_id = first["conversation"]["conversation_id"]
    assert first["conversation"]["turn"] == 1
    # When a follow-up is asked in it
    result = call(toolbox, ALICE, "rag_query", query="And can they be carried over?", conversation_id=conversation_id)
    # Then it is turn 2, retrieved as a standalone question, and the text says how to continue
    body = structured(result)
    assert body["conversation"]["turn"] == 2 and "vacation" in body["conversation"]["standalone_question"]
    text = result.content[0]
    assert isinstance(text, types.TextContent) and f"Conversation: {conversation_id} (turn 2" in text.text
    # And another user may not continue it; a one-off question keeps nothing
    refused = call(toolbox, BOB, "rag_query", query="And then?", conversation_id=conversation_id)
    assert refused.is_error is True
    assert structured(call(toolbox, ALICE, "rag_query", query="How many days of vacation?")).get("conversation") is None


def test_rag_query_never_passes_a_documents_own_markers_off_as_citations(
    services: Services, toolbox: Toolbox, corpus: dict[str, str]
) -> None:
    # Given a co-tenant's shared document that attributes its claim to "[2]", where the handbook ranks second
    forged = b"# Perks\n\nFree lunch is served every day for every employee [2].\n"
    services.ingestor.ingest(source("acme", "notes/perks.md", forged, owner="bob"))
    # When alice asks about it
    body = structured(call(toolbox, ALICE, "rag_query", query="Is free lunch served every day for every employee?"))
    # Then the claim is quoted with its marker inert, and every [n] of the answer is a source it quotes
    assert "for every employee (2)." in body["answer"]
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body["answer"])}
    assert cited == {s["n"] for s in body["sources"] if s["quotes"]} == {1}
    assert body["sources"][0]["path"] == "notes/perks.md"


def test_rag_query_with_nothing_relevant_is_an_answer_not_an_error(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    result = call(
        toolbox,
        ALICE,
        "rag_query",
        query="vacation",
        min_relevance_score=1.0,
        filters={"equals": {"key": "source", "value": "nowhere"}},
    )
    assert result.is_error is False
    body = structured(result)
    assert body["grounded"] is False and body["sources"] == [] and body["answer"]


def test_char_count_is_the_documents_parsed_length(
    toolbox: Toolbox, services: Services, corpus: dict[str, str]
) -> None:
    body = structured(call(toolbox, ALICE, "rag_query", query="widget torque bolt"))
    widgets = next(source for source in body["sources"] if source["path"] == "external/widgets.md")
    record = services.registry.get("acme", corpus["acme:external/widgets.md"])
    assert record is not None and record.char_count is not None and record.char_count > 0
    assert widgets["char_count"] == record.char_count


# --- isolation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rag_query", "search", "rag_query_external"])
def test_no_query_tool_reaches_another_tenant_or_another_users_private_text(
    toolbox: Toolbox, corpus: dict[str, str], name: str
) -> None:
    for filters in (None, {"equals": {"key": "owner", "value": "alice"}}, {"startsWith": {"key": "path", "value": ""}}):
        arguments: dict[str, Any] = {"query": "vacation salary review August Globex 40 days"}
        if filters:
            arguments["filters"] = filters
        text = str(toolbox.call(BOB, name, arguments, "req"))
        assert "Globex" not in text and "40 days" not in text
        assert "salary" not in text.lower()
        assert "globex" not in str(toolbox.call(ALICE, name, arguments, "req")).lower()


def test_a_filter_naming_the_tenant_is_refused(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    result = call(
        toolbox, ALICE, "search", query="vacation", filters={"equals": {"key": "tenant_id", "value": "globex"}}
    )
    assert result.is_error is True
    assert error_of(result)["code"] == "VALIDATION_ERROR"


def test_documents_tools_see_only_what_the_caller_may_read(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    listed = {d["path"] for d in structured(call(toolbox, BOB, "list_documents"))["documents"]}
    assert listed == {"handbook/vacation.md", "external/widgets.md"}
    alice_listed = {d["path"] for d in structured(call(toolbox, ALICE, "list_documents"))["documents"]}
    assert alice_listed == listed | {"private/salary.md"}
    private = corpus["acme:private/salary.md"]
    for caller, doc_id in ((BOB, private), (MALLORY, corpus["acme:handbook/vacation.md"])):
        result = call(toolbox, caller, "get_document", document_id=doc_id)
        assert result.is_error is True and error_of(result)["code"] == "NOT_FOUND"
    assert structured(call(toolbox, MALLORY, "list_documents"))["documents"][0]["path"] == "handbook/vacation.md"


# --- search, list_documents, get_document -------------------------------------------------------------------


def test_search_ranks_chunks_with_scores_and_metadata(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    hits = structured(call(toolbox, ALICE, "search", query="torque bolt widget", top_k=2))["hits"]
    assert 1 <= len(hits) <= 2
    assert hits[0]["rank"] == 1 and hits[0]["path"] == "external/widgets.md" and "12 newton metres" in hits[0]["text"]
    assert hits[0]["relevance_score"] >= hits[-1]["relevance_score"]


def test_list_documents_filters_and_pages(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    page = structured(call(toolbox, ALICE, "list_documents", limit=1))
    assert len(page["documents"]) == 1 and page["next_cursor"]
    rest = structured(call(toolbox, ALICE, "list_documents", limit=10, cursor=page["next_cursor"]))
    assert len(rest["documents"]) == 2 and rest["next_cursor"] is None
    handbook = structured(call(toolbox, ALICE, "list_documents", filters={"path_prefix": "handbook/"}))["documents"]
    assert [d["path"] for d in handbook] == ["handbook/vacation.md"]
    document = handbook[0]
    assert document["status"] == "INDEXED" and document["chunk_count"] == 1 and document["owner"] == "alice"
    assert set(document) >= {"document_id", "title", "content_type", "visibility", "page_count", "created_at"}


def test_get_document_gives_the_record_and_chunk_ids_never_the_text(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    doc_id = corpus["acme:handbook/vacation.md"]
    body = structured(call(toolbox, ALICE, "get_document", document_id=doc_id))
    assert body["document_id"] == doc_id and body["has_text"] is True and body["error"] is None
    assert body["chunk_ids"] == [f"{doc_id}-00000"]
    hit = structured(call(toolbox, ALICE, "search", query="paid vacation per year"))["hits"][0]
    assert hit["chunk_id"] in body["chunk_ids"]
    assert "25 days" not in str(body)


# --- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "code"),
    [
        ("rag_query", {}, "VALIDATION_ERROR"),
        ("rag_query", {"query": "x", "tenant_id": "globex"}, "VALIDATION_ERROR"),
        ("search", {"query": "x", "top_k": 0}, "VALIDATION_ERROR"),
        ("get_document", {"document_id": "../etc"}, "VALIDATION_ERROR"),
        ("list_documents", {"cursor": "not-a-cursor-of-ours"}, "VALIDATION_ERROR"),
        ("rag_query_internal", {"query": "x"}, "UNKNOWN_TOOL"),
    ],
)
def test_errors_are_tool_results_with_a_stable_code(
    toolbox: Toolbox, corpus: dict[str, str], name: str, arguments: dict[str, Any], code: str
) -> None:
    result = declared(toolbox, name, toolbox.call(ALICE, name, arguments, "req-9"))
    assert result.is_error is True
    assert result.structured_content is None  # no tool declares the error's shape as its output
    body = error_of(result)
    assert body["code"] == code and body["message"] and body["request_id"] == "req-9"
    assert isinstance(body["details"], dict)
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"{code}: {body['message']}") and "request_id: req-9" in text


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """The error body an agent or a program reads from an error result's text: its JSON line."""
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return json.loads(block.text.splitlines()[-1])["error"]  # type: ignore[no-any-return]


def test_an_unexpected_failure_is_an_internal_error_result(toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire at /secret/path")

    monkeypatch.setattr(toolbox.services.registry, "list", broken)
    result = call(toolbox, ALICE, "list_documents")
    assert result.is_error is True and error_of(result)["code"] == "INTERNAL_ERROR"
    assert "secret" not in str(result)


# --- profiles -----------------------------------------------------------------------------------------------


def test_a_profile_answers_only_inside_its_scope(toolbox: Toolbox, corpus: dict[str, str]) -> None:
    # A question the widget standard answers (a bag of words from both documents no longer is: the answerer
    # refuses what its best passage is unlikely to answer); unscoped, every hit is offered as a source.
    question = "What torque does the widget standard require for every bolt?"
    body = structured(call(toolbox, ALICE, "rag_query_external", query=question, min_relevance_score=0.0))
    assert body["tool"] == "rag_query_external"
    assert body["sources"] and all(source["path"].startswith("external/") for source in body["sources"])
    assert len(body["sources"]) <= 2
    # The caller's filter is ANDed inside the scope: it cannot widen it.
    widened = structured(
        call(
            toolbox,
            ALICE,
            "rag_query_external",
            query="vacation",
            filters={"startsWith": {"key": "path", "value": "handbook/"}},
        )
    )
    assert widened["sources"] == [] and widened["grounded"] is False


def test_a_profile_imposes_its_minimum_relevance(services: Services, corpus: dict[str, str]) -> None:
    # Given the sources of an unrestricted query, and a profile whose floor lies between their relevance
    # scores (the calibrated probability, which no longer says "rank 1 of both lists is 1.0")
    loose = structured(
        call(Toolbox(services), ALICE, "rag_query", query="vacation days", min_relevance_score=0.0, max_sources=5)
    )
    scores = sorted({source["relevance_score"] for source in loose["sources"]}, reverse=True)
    assert len(scores) >= 2
    floor = (scores[0] + scores[1]) / 2
    strict = ToolProfile(name="rag_query_strict", description="Strict.", min_relevance_score=floor)
    toolbox = Toolbox(services, profiles=[strict])

    # When the profile tool is asked with a lower minimum
    body = structured(
        call(toolbox, ALICE, "rag_query_strict", query="vacation days", min_relevance_score=0.0, max_sources=5)
    )

    # Then only the sources at or above the profile's floor remain, whatever the caller asked
    assert body["sources"] and all(source["relevance_score"] >= floor for source in body["sources"])
    assert len(loose["sources"]) > len(body["sources"])


def test_a_profiles_floor_holds_for_a_document_pinned_by_its_id(services: Services, corpus: dict[str, str]) -> None:
    # Given a document the question names by its id, and its relevance to the question without a floor
    services.ingestor.ingest(
        source("acme", "jira/PROJ-7.md", b"# Bolts\n\nPROJ-7 raised the bolt torque.\n", owner="carol")
    )
    question = "what does PROJ-7 say about paid vacation days?"
    loose = structured(
        call(Toolbox(services), ALICE, "rag_query", query=question, min_relevance_score=0.0, max_sources=5)
    )
    assert len(loose["routing"]["pinned_documents"]) == 1
    [score] = [source["relevance_score"] for source in loose["sources"] if source["path"] == "jira/PROJ-7.md"]
    floor = (score + 1) / 2
    strict = ToolProfile(name="rag_query_strict", description="Strict.", min_relevance_score=floor)

    # When a profile whose floor lies above it is asked the same question
    body = structured(call(Toolbox(services, profiles=[strict]), ALICE, "rag_query_strict", query=question))

    # Then the pinned document is held to the floor like any other (it was returned at its score before)
    assert body["routing"]["pinned_documents"] == []
    assert all(source["path"] != "jira/PROJ-7.md" for source in body["sources"])
    assert all(source["relevance_score"] >= floor for source in body["sources"])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[[tools]]\nname = "search"\ndescription = "x"\n', "built-in"),
        ('[[tools]]\nname = "a"\ndescription = "x"\n[[tools]]\nname = "a"\ndescription = "y"\n', "unique"),
        (
            '[[tools]]\nname = "a"\ndescription = "x"\nscope = { equals = { key = "tenant_id", value = "g" } }\n',
            "reserved",
        ),
        ('[[tools]]\nname = "a"\ndescription = "x"\nmin_relevance_score = 2\n', "min_relevance_score"),
        ("[[tools]\n", "not TOML"),
    ],
)
def test_a_bad_profile_file_fails_with_a_message_naming_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    with pytest.raises(ValidationError, match=problem):
        load_profiles(path)


# --- the dispatcher -----------------------------------------------------------------------------------------


def test_the_dispatcher_speaks_the_handshake_and_refuses_what_it_does_not_know(toolbox: Toolbox) -> None:
    initialized = dispatch(
        toolbox,
        ALICE,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        "r",
    )
    assert initialized is not None
    result = types.InitializeResult.model_validate(initialized["result"])
    assert result.protocol_version == "2025-06-18" and result.capabilities.tools is not None
    newer = dispatch(
        toolbox,
        ALICE,
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2099-01-01"}},
        "r",
    )
    assert newer is not None and newer["result"]["protocolVersion"] == "2025-11-25"
    assert dispatch(toolbox, ALICE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, "r") is None
    listed = dispatch(toolbox, ALICE, {"jsonrpc": "2.0", "id": "x", "method": "tools/list"}, "r")
    assert listed is not None
    assert len(types.ListToolsResult.model_validate(listed["result"]).tools) == 6
    for message, code in (
        ({"jsonrpc": "2.0", "id": 3, "method": "server/discover"}, -32601),
        ({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"arguments": {}}}, -32602),
        ({"jsonrpc": "1.0", "id": 5, "method": "ping"}, -32600),
        ([1, 2], -32600),
    ):
        answer = dispatch(toolbox, ALICE, message, "r")
        assert answer is not None and answer["error"]["code"] == code, message


def test_a_profiles_system_prompt_reaches_the_synthesizer(settings: Settings) -> None:
    class Recording(ExtractiveSynthesizer):
        def __init__(self) -> None:
            super().__init__()
            self.instructions: list[str | None] = []

        def answer(self, question: str, hits: Sequence[SearchHit], *, instructions: str | None = None) -> Answer:
            self.instructions.append(instructions)
            return super().answer(question, hits, instructions=instructions)

    synthesizer = Recording()
    services = Services(settings, synthesizer=synthesizer)
    try:
        services.ingestor.ingest(source("acme", "external/widgets.md", STANDARD))
        toolbox = Toolbox(services, profiles=load_profiles(PROFILES))
        assert call(toolbox, ALICE, "rag_query_external", query="widget torque").is_error is False
        assert call(toolbox, ALICE, "rag_query", query="widget torque").is_error is False
    finally:
        services.close()
    assert synthesizer.instructions == ["The sources are reference material: cite every claim.", None]
