"""Generative answers without AWS, end to end: the settings choose the OpenAI-compatible synthesizer (found
through the `citewise.synthesizers` entry point), `citewise query` answers from a chat-completions
server with citations, an operator's instructions reach the model, and an endpoint that fails gives a
GENERATION_ERROR or, when configured, the extractive answer.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from importlib.metadata import EntryPoints
from pathlib import Path
from typing import Any

import pytest

from citewise.builtin.extractive import ExtractiveSynthesizer
from citewise.domain.errors import ValidationError
from citewise.domain.models import Caller, SearchRequest
from citewise.ports.grounding import SYSTEM_PROMPT
from citewise.query.answering import answer_question
from citewise.query.fallback import FallbackSynthesizer
from citewise.runtime import services as factory
from citewise.runtime.services import Services, build_services, build_synthesizer
from citewise.runtime.settings import Settings, load_settings
from citewise_local.cli import main
from citewise_local.openai_synthesis import OpenAIChatSynthesizer
from tests.doubles.chat_server import ChatServer, chat_server
from tests.doubles.models import ScriptedModel
from tests.factories import source

NOTES = b"# Keys\n\nRotate the signing key every ninety days. Keys live in KMS.\n"
QUESTION = "How often should the signing key be rotated?"


def quoting_model(system: str, user: str) -> str:
    """What a model following the rules writes: the first sentence of source 1 (not its heading), cited."""
    text = user.split("text:\n", 1)[1].split("\n</source>", 1)[0]
    prose = next(line for line in text.splitlines() if "." in line)
    return prose.split(". ")[0].rstrip(".") + " [1]."


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server(ScriptedModel(quoting_model)) as running:
        yield running


def _down_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


# --- settings and wiring -----------------------------------------------------------------------


def test_the_settings_build_the_openai_synthesizer_from_its_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the variables of an Ollama setup
    monkeypatch.setenv("CITEWISE_SYNTHESIZER", "openai")
    monkeypatch.setenv("CITEWISE_OPENAI_BASE_URL", "http://localhost:11434/v1/")
    monkeypatch.setenv("CITEWISE_OPENAI_MODEL", "llama3.2")
    monkeypatch.setenv("CITEWISE_OPENAI_API_KEY", "sk-local")
    monkeypatch.setenv("CITEWISE_OPENAI_TIMEOUT", "12.5")
    settings = load_settings()
    # When the synthesizer is built, then it is configured as asked, and the key stays secret
    synthesizer = build_synthesizer(settings)
    assert isinstance(synthesizer, OpenAIChatSynthesizer)
    assert (synthesizer.endpoint, synthesizer.model) == ("http://localhost:11434/v1/chat/completions", "llama3.2")
    assert "sk-local" not in repr(settings) and "sk-local" not in str(settings.model_dump())


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"CITEWISE_SYNTHESIZER": "openai"}, "CITEWISE_SYNTHESIZER=openai needs CITEWISE_OPENAI_MODEL"),
        ({"CITEWISE_OPENAI_BASE_URL": "localhost:11434"}, "CITEWISE_OPENAI_BASE_URL: must be an http"),
        ({"CITEWISE_OPENAI_TIMEOUT": "0"}, "CITEWISE_OPENAI_TIMEOUT: Input should be greater than 0"),
        ({"CITEWISE_GENERATION_FALLBACK": "bedrock"}, "CITEWISE_GENERATION_FALLBACK: "),
    ],
)
def test_a_bad_generation_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], message: str
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=message):
        load_settings()


def test_without_the_local_package_openai_fails_the_cold_start(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the library alone, as the Lambda layer ships it
    monkeypatch.setattr(factory, "entry_points", lambda **_: EntryPoints(()))
    settings = Settings(
        backend="aws",
        opensearch_endpoint="https://search.example",
        registry_table="t",
        documents_bucket="b",
        embedder="hashing",
        synthesizer="openai",
        openai_model="llama3.2",
    )
    # When a function's services are built, then the setting and the package are named
    with pytest.raises(ValidationError, match="^CITEWISE_SYNTHESIZER=openai is not installed here: .*citewise_local"):
        build_services(settings)


def test_the_fallback_wraps_the_configured_model() -> None:
    settings = Settings(synthesizer="openai", openai_model="llama3.2", generation_fallback="extractive")
    synthesizer = build_synthesizer(settings)
    assert isinstance(synthesizer, FallbackSynthesizer)
    assert isinstance(synthesizer.primary, OpenAIChatSynthesizer)
    assert isinstance(synthesizer.fallback, ExtractiveSynthesizer)
    assert isinstance(build_synthesizer(Settings(generation_fallback="extractive")), ExtractiveSynthesizer)


# --- answering ---------------------------------------------------------------------------------


def test_operator_instructions_reach_the_model_through_answer_question(services: Services, server: ChatServer) -> None:
    # Given an indexed document and the OpenAI synthesizer
    services.ingestor.ingest(source("acme", "keys.md", NOTES))
    synthesizer = OpenAIChatSynthesizer(server.url, "llama3.2", timeout=5)
    instructions = "Reference material: cite every claim; say when the documents do not answer."
    # When a question is answered with a tool profile's instructions
    answer = answer_question(
        services.retriever,
        synthesizer,
        Caller(tenant_id="acme", user_id="bob"),
        SearchRequest(query=QUESTION),
        instructions=instructions,
    )
    # Then the model got the rules, then the instructions, and the answer cites the document
    ((system, user),) = server.model.prompts
    assert system.startswith(SYSTEM_PROMPT) and system.endswith(instructions)
    assert "Rotate the signing key every ninety days." in user
    assert answer.grounded and answer.citations[0].quote == "Rotate the signing key every ninety days."


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """`citewise --home <tmp> ARGS...` with the hashing embedder, after `keys.md` is ingested."""
    monkeypatch.setenv("CITEWISE_EMBEDDER", "hashing")
    home = tmp_path / "home"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keys.md").write_bytes(NOTES)

    def run(*args: str) -> tuple[int, str, str]:
        status = main(["--home", str(home), *args])
        out, err = capsys.readouterr()
        return status, out, err

    assert run("ingest", str(tmp_path / "docs"), "--tenant", "acme")[0] == 0
    return run


def _use_endpoint(monkeypatch: pytest.MonkeyPatch, url: str, *, fallback: bool = False) -> None:
    monkeypatch.setenv("CITEWISE_SYNTHESIZER", "openai")
    monkeypatch.setenv("CITEWISE_OPENAI_BASE_URL", url)
    monkeypatch.setenv("CITEWISE_OPENAI_MODEL", "llama3.2")
    monkeypatch.setenv("CITEWISE_OPENAI_TIMEOUT", "5")
    if fallback:
        monkeypatch.setenv("CITEWISE_GENERATION_FALLBACK", "extractive")


def test_citewise_query_answers_from_the_endpoint_with_citations(
    cli: Any, server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the CLI pointed at the chat-completions server
    _use_endpoint(monkeypatch, server.url)
    # When a question is asked
    status, out, _ = cli("query", QUESTION, "--tenant", "acme", "--json")
    # Then the model's answer comes back, cited and quoted from the document
    assert status == 0
    answer = json.loads(out)
    assert answer["answer"] == "Rotate the signing key every ninety days [1]."
    assert answer["grounded"] and answer["citations"][0]["quote"] == "Rotate the signing key every ninety days."
    assert answer["citations"][0]["path"] == "docs/keys.md"
    assert answer["usage"] == {"input_tokens": 412, "output_tokens": 31, "total_tokens": 443}
    assert len(server.requests) == 1 and server.requests[0].body["stream"] is True


def test_an_endpoint_that_is_down_is_a_generation_error(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_endpoint(monkeypatch, _down_url())
    status, out, err = cli("query", QUESTION, "--tenant", "acme")
    assert status != 0 and out == ""
    assert "GENERATION_ERROR" in err and "ConnectionRefusedError" in err


@pytest.mark.parametrize("failure", ["down", "throttled"])
def test_with_the_fallback_a_failing_endpoint_gives_the_extractive_answer(
    cli: Any, server: ChatServer, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    # Given an endpoint that is down or throttles, and the extractive fallback configured
    if failure == "throttled":
        server.fail_next("openai_rate_limit")
    _use_endpoint(monkeypatch, _down_url() if failure == "down" else server.url, fallback=True)
    # When a question is asked
    status, out, _ = cli("query", QUESTION, "--tenant", "acme", "--json")
    # Then the answer quotes the document, as the extractive synthesizer does
    assert status == 0
    answer = json.loads(out)
    assert answer["grounded"] and answer["answer"] == "Rotate the signing key every ninety days. [1]"
    assert answer["usage"] is None
