"""A client of `citewise serve` for the end-to-end tests: HTTP requests, tokens from `citewise token`,
uploads through the presigned URL, and polling until ingestion settles."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

INGEST_TIMEOUT_S = 60
START_TIMEOUT_S = 60


def new_tenant() -> str:
    """A tenant of its own for each test: the server (and its home) is shared by the session."""
    return f"t-{uuid.uuid4().hex[:12]}"


def citewise_script() -> str:
    """The console script of the interpreter running the tests (the project's venv)."""
    beside = Path(sys.executable).with_name("citewise")
    found = str(beside) if beside.exists() else shutil.which("citewise")
    if found is None:
        pytest.fail("the citewise console script is not installed (pip install -e '.[local,dev]')")
    return found


@dataclass
class Reply:
    """A response; header names lower-cased."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Api:
    """The running server: its URL, home and environment, and a small HTTP client."""

    url: str
    home: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        token: str | None = None,
        json_body: Any = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request; every status comes back as a Reply."""
        url = path_or_url if path_or_url.startswith("http") else self.url + path_or_url
        sent = dict(headers or {})
        if json_body is not None:
            data = json.dumps(json_body).encode()
            sent.setdefault("Content-Type", "application/json")
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(url, data=data, method=method, headers=sent)  # noqa: S310 - our server
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return Reply(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
        except urllib.error.HTTPError as error:
            return Reply(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())

    tokens: dict[tuple[str, ...], str] = field(default_factory=dict)

    def token(self, tenant: str, user: str, *groups: str) -> str:
        """A token from `citewise token` (one per identity for the session: each run starts a process)."""
        key = (tenant, user, *groups)
        if key not in self.tokens:
            self.tokens[key] = mint(self, tenant, user, *[arg for group in groups for arg in ("--group", group)])
        return self.tokens[key]


def mint(api: Api, tenant: str, user: str, *options: str) -> str:
    """`citewise token --tenant T --user U ...`."""
    return _token_command(api, "--tenant", tenant, "--user", user, *options)


def mint_operator(api: Api, user: str) -> str:
    """`citewise token --operator --user U`: the platform operator's token."""
    return _token_command(api, "--operator", "--user", user)


def _token_command(api: Api, *arguments: str) -> str:
    """`citewise token ...`: its whole stdout must be the token alone."""
    done = subprocess.run(  # noqa: S603 - our own console script
        [citewise_script(), "token", *arguments],
        env=api.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    token = done.stdout.removesuffix("\n")
    assert "\n" not in token and token.count(".") == 2, done.stdout
    return token


def upload(api: Api, token: str, filename: str, data: bytes, content_type: str, **fields: Any) -> str:
    """Ask for an upload URL, PUT the bytes to it as a client would, and return the document id."""
    asked = api.request(
        "POST",
        "/v1/uploads",
        token=token,
        json_body={"filename": filename, "content_type": content_type, "size": len(data), **fields},
    )
    assert asked.status == 200, asked.body
    grant = asked.json()
    put = api.request("PUT", grant["url"], data=data, headers=grant["headers"])
    assert put.status == 200, put.body
    return str(grant["document_id"])


def wait_for_status(api: Api, token: str, doc_id: str) -> dict[str, Any]:
    """Poll the document until ingestion has settled (INDEXED or FAILED)."""
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    while time.monotonic() < deadline:
        reply = api.request("GET", f"/v1/documents/{doc_id}", token=token)
        if reply.status == 200 and reply.json()["status"] in ("INDEXED", "FAILED"):
            return dict(reply.json())
        assert reply.status in (200, 404), reply.body
        time.sleep(0.1)
    pytest.fail(f"document {doc_id} was not ingested within {INGEST_TIMEOUT_S}s")


def settle_source(api: Api, token: str, source_id: str) -> None:
    """Refresh the web source now and wait until no refresh holds it. A new source is due at once, so the
    server's own loop may refresh it at any tick (a removal or a refresh asked meanwhile is refused 409);
    once a refresh has ended, the next is due only after the source's interval (hours)."""
    asked = api.request("POST", f"/v1/sources/{source_id}/refresh", token=token)
    assert asked.status in (202, 409), asked.body  # 409: the loop's refresh came first, as good
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    while time.monotonic() < deadline:
        source = api.request("GET", f"/v1/sources/{source_id}", token=token).json()
        if source["last_run"] is not None and source["running"] is None:
            return
        time.sleep(0.1)
    pytest.fail(f"the refresh of source {source_id} did not end within {INGEST_TIMEOUT_S}s")


def server_environment(home: Path) -> dict[str, str]:
    """The test process's environment without its CITEWISE_ variables, for a server on `home` with the
    hashing embedder."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CITEWISE_")}
    return env | {"CITEWISE_HOME": str(home), "CITEWISE_EMBEDDER": "hashing"}


def serve(
    home: Path, log: Path, env: dict[str, str], *options: str, errors: Path | None = None, command: str | None = None
) -> Api:
    """`citewise serve [options]` (the console script `command`, by default the project venv's) as a
    subprocess on a free port, its output appended to `log` (its stderr to `errors` if given); returned
    once it answers /v1/health (killed if it does not). Stopping it is the caller's job."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with log.open("ab") as sink, (errors or log).open("ab") as error_sink:
        process = subprocess.Popen(  # noqa: S603
            [command or citewise_script(), "serve", "--port", str(port), *options],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT if errors is None else error_sink,
        )
    server = Api(f"http://127.0.0.1:{port}", home, env, process, log)
    try:
        _wait_until_healthy(server)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return server


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
