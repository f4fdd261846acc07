"""End to end: `citewise serve` as a subprocess on a free port, with its own home and the hashing
embedder, driven over HTTP with tokens from `citewise token`, as a client of the API would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.e2e.helpers import Api, citewise_script

START_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """`citewise serve` on a free port for the whole session; stopped with SIGTERM at the end.

    SIGTERM, not SIGINT: a shell that runs the tests in the background starts its children with SIGINT
    ignored, as Unix wants, so Ctrl-C's signal would never reach the server; `serve` treats SIGTERM as Ctrl-C.
    """
    root = tmp_path_factory.mktemp("e2e")
    home = root / "home"
    env = {name: value for name, value in os.environ.items() if not name.startswith("CITEWISE_")}
    env |= {"CITEWISE_HOME": str(home), "CITEWISE_EMBEDDER": "hashing"}
    port = _free_port()
    log = root / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(  # noqa: S603
            [citewise_script(), "serve", "--port", str(port)], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    server = Api(f"http://127.0.0.1:{port}", home, env, process, log)
    try:
        _wait_until_healthy(server)
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            status = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    output = log.read_text()
    assert status == 0, output[-3000:]
    # Requests were logged, tokens never
    assert "POST /v1/uploads 200" in output
    assert not [token for token in server.tokens.values() if token in output]


def _wait_until_healthy(server: Api) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"citewise serve exited with {server.process.returncode}:\n{server.log.read_text()[-3000:]}")
        try:
            if server.request("GET", "/v1/health").status == 200:
                return
        except OSError:
            pass  # not listening yet
        time.sleep(0.1)
    pytest.fail(f"citewise serve did not answer /v1/health within {START_TIMEOUT_S}s")
