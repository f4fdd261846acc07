"""End to end: `citewise serve` as a subprocess on a free port, with its own home and the hashing
embedder, driven over HTTP with tokens from `citewise token`, as a client of the API would."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e.helpers import Api, serve, server_environment


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
