"""What `citewise serve` writes, over a real server run: stdout the banner only, stderr one exact line per
request (method, path, status, milliseconds, request id), the handlers' structured logs in the
log file, and EMF metric documents only with `--metrics`."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

from tests.builders import make_damaged_pdf
from tests.e2e.helpers import Api, Reply, serve, server_environment, upload, wait_for_status

REQUEST_LINE = re.compile(
    r"(GET|POST|PUT|DELETE) (/\S*) (\d{3}) (\d+\.\d)ms ([0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12})"
)


def _run(tmp_path: Path, *options: str) -> tuple[Api, dict[str, Reply], str]:
    """A server with `options`, one of each kind of request and a damaged PDF ingested; stopped again.
    Returns the server, the replies by name, and its stderr."""
    home = tmp_path / "home"
    errors = tmp_path / "stderr.log"
    api = serve(home, tmp_path / "stdout.log", server_environment(home), *options, errors=errors)
    try:
        token = api.token("acme", "alice")
        replies = {
            "health": api.request("GET", "/v1/health"),
            "missing": api.request("GET", "/v1/nothing?secret=1"),
        }
        doc_id = upload(api, token, "reports/damaged.pdf", make_damaged_pdf(), "application/pdf")
        assert wait_for_status(api, token, doc_id)["status"] == "INDEXED"
        replies["query"] = api.request("POST", "/v1/query", token=token, json_body={"query": "how are anvils shipped?"})
    finally:
        api.process.send_signal(signal.SIGTERM)
        assert api.process.wait(timeout=60) == 0
    return api, replies, errors.read_text()


def _header_id(reply: Reply) -> str:
    return reply.headers["x-amzn-requestid"]


def test_text_output_is_one_readable_line_per_request_and_the_logs_go_to_the_file(tmp_path: Path) -> None:
    api, replies, stderr = _run(tmp_path)
    log_file = api.home / "logs" / "serve.log"
    # stdout: the banner, naming the web console and the log file
    assert api.log.read_text().splitlines()[2:] == [
        f"web console: {api.url}/console/ (sign in: citewise console --tenant T --user U)",
        f"handler logs: {log_file}",
    ]
    # stderr: nothing but request lines, each exactly "METHOD PATH STATUS MSms REQUEST-ID"
    lines = stderr.splitlines()
    assert lines and all(REQUEST_LINE.fullmatch(line) for line in lines), stderr
    matches = [REQUEST_LINE.fullmatch(line) for line in lines]
    by_id = {match.group(5): match.group(1, 2, 3) for match in matches if match}
    assert by_id[_header_id(replies["health"])] == ("GET", "/v1/health", "200")
    assert by_id[_header_id(replies["missing"])] == ("GET", "/v1/nothing", "404")  # no query string shown
    assert by_id[_header_id(replies["query"])] == ("POST", "/v1/query", "200")
    assert ("PUT", "/local-upload/...", "200") in by_id.values()  # never the signed path
    # The log file: the handlers' JSON lines and no EMF document
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert any(r["message"] == "document ingested" and r["function_name"] == "citewise-ingest" for r in records)
    assert not [r for r in records if "_aws" in r]


def test_json_output_puts_requests_and_handler_logs_on_stderr_with_metrics_when_asked(tmp_path: Path) -> None:
    api, replies, stderr = _run(tmp_path, "--log-format", "json", "--metrics")
    records: list[dict[str, Any]] = [json.loads(line) for line in stderr.splitlines()]  # every line is JSON
    requests = [r for r in records if r.get("message") == "request"]
    by_id = {r["request_id"]: (r["method"], r["path"], r["status"]) for r in requests}
    assert by_id[_header_id(replies["health"])] == ("GET", "/v1/health", 200)
    assert by_id[_header_id(replies["missing"])] == ("GET", "/v1/nothing", 404)
    assert by_id[_header_id(replies["query"])] == ("POST", "/v1/query", 200)
    assert all(isinstance(r["duration_ms"], float) and r["level"] == "INFO" for r in requests)
    assert any(r.get("message") == "document ingested" for r in records)
    assert any(r.get("ColdStart") == [1.0] for r in records)  # EMF, asked for with --metrics
    assert not (api.home / "logs" / "serve.log").exists()
