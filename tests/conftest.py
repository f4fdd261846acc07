"""Shared fixtures: a wired local stack on a temporary home with the deterministic hashing embedder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Powertools reads these once, when `citewise.runtime.observability` is first imported (as at a cold
# start, where the stack sets them on every function): set before any test can import it, so the
# metrics have their namespace whichever test file happens to import it first.
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Citewise")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "citewise-test")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings
from tests.conformance.botocore_calls import CallRecorder
from tests.opensearch_node import NODE, URL_VARIABLE


def pytest_report_header() -> str:
    """Say once, at the top of the run, which OpenSearch the `opensearch`-marked tests run on."""
    if NODE.url is not None:
        return f"opensearch-marked tests on {NODE.versions()} at {NODE.url} ({URL_VARIABLE})"
    return "opensearch-marked tests on a node started on first use by scripts/opensearch (versions at the end)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the node this process started itself (its versions were not known for the header)."""
    if NODE.started_in:
        terminalreporter.write_line(f"opensearch: {NODE.versions()}, started in {NODE.started_in:.0f} s")


def pytest_unconfigure() -> None:
    NODE.stop()


@pytest.fixture(scope="session")
def opensearch_url() -> str:
    """The real OpenSearch node's URL (started once per test process unless `make test` gave one)."""
    return NODE.ensure()


@pytest.fixture(autouse=True)
def _no_citewise_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the CITEWISE_* variables they set, never the developer's shell."""
    for name in [n for n in os.environ if n.startswith("CITEWISE_")]:
        monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def botocore_calls_conform_to_the_service_models() -> Iterator[CallRecorder]:
    """Every botocore call a test makes (moto, Stubber, loopback doubles) is checked against botocore's
    service model, and an embedding InvokeModel body against its model page
    (`tests.conformance.botocore_calls`); an invalid call fails the test with the operation and the report."""
    recorder = CallRecorder()
    with recorder.recording():
        yield recorder
    assert not recorder.found, "botocore calls outside the service models:\n" + "\n".join(recorder.found[:10])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", embedder="hashing")


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    built = build_services(settings)
    yield built
    built.close()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region in the environment; a real profile can never be picked up."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
