"""End to end: `citewise serve` as a subprocess on a free port, with its own home and the hashing
embedder, driven over HTTP with tokens from `citewise token`, as a client of the API would."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

from tests.doubles.chat_server import ChatServer, chat_server
from tests.doubles.models import ScriptedModel
from tests.e2e.helpers import Api, serve, server_environment

CHROMIUM = Path(os.environ.get("CITEWISE_CHROMIUM", "/usr/bin/chromium"))
# As the machine's notes prescribe for Debian's Chromium as root: no sandbox (root), no GPU, and no
# background connections (updates, sync, QUIC probes) that a closed network would refuse over and over.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """`citewise serve` on a free port for the whole session; stopped with SIGTERM at the end.

    SIGTERM, not SIGINT: a shell that runs the tests in the background starts its children with SIGINT
    ignored, as Unix wants, so Ctrl-C's signal would never reach the server; `serve` treats SIGTERM as Ctrl-C.
    """
    root = tmp_path_factory.mktemp("e2e")
    home = root / "home"
    server = serve(home, root / "server.log", server_environment(home))
    try:
        yield server
    finally:
        server.process.send_signal(signal.SIGTERM)
        try:
            status = server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
            raise
    output = server.log.read_text()
    assert status == 0, output[-3000:]
    # Requests were logged, tokens never
    assert "POST /v1/uploads 200" in output
    assert not [token for token in server.tokens.values() if token in output]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    """Debian's Chromium, headless, with a fresh profile."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium package (apt-get install "
            "chromium); elsewhere install Chromium and set CITEWISE_CHROMIUM to its executable"
        )
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path / "profile", executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def paced_model(tmp_path: Path) -> Iterator[tuple[Api, ChatServer]]:
    """A server answering with an OpenAI-compatible model that writes a long cited answer slowly."""
    reply = " ".join(["Rotate the signing key every ninety days [1]."] * 200)
    with chat_server(ScriptedModel(reply)) as chat:
        chat.pace = 0.05
        home = tmp_path / "home"
        env = server_environment(home) | {
            "CITEWISE_SYNTHESIZER": "openai",
            "CITEWISE_OPENAI_BASE_URL": chat.url,
            "CITEWISE_OPENAI_MODEL": "llama3.2",
        }
        server = serve(home, tmp_path / "server.log", env)
        try:
            yield server, chat
        finally:
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(timeout=30)
