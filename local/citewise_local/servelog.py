"""What `citewise serve` writes to its terminal: one line per request, and its own few events.

Text (the default), for a person watching:

    POST /v1/query 200 41.2ms 0b8f0c0e-7d0b-4a53-9d0e-3f1c2a9e4b7d

method, path (an upload's signed path shortened to `/uploads/...`), status, milliseconds and the request
id, which the error bodies, the `x-amzn-RequestId` header and the handlers' structured logs carry too. A
client that left before its answer (closed or reset its connection) gets the same one line, ending
`client disconnected`, with the status it would have had (`-` when it left within its request). JSON
(`--log-format json`), for a log shipper: the same fields as one object a line, in the shape of the
handlers' Powertools logs (`level`, `message`, `timestamp`), which then share the stream.

The handlers' own logs (Powertools JSON, the ingest pipeline's warnings) go to a file, or to stderr with
JSON (`citewise_local.lambdaenv` routes each environment's output).
"""

from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from typing import Literal, TextIO

from citewise_local.render import escape_terminal_controls

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")


class ServeLog:
    """The server's lines, written whole (one lock) to `stream` (stderr unless given)."""

    def __init__(self, stream: TextIO | None = None, log_format: LogFormat = "text") -> None:
        self._stream = stream
        self.log_format = log_format
        self._lock = threading.Lock()

    def request(
        self,
        method: str | None,
        path: str | None,
        status: int | None,
        ms: float,
        request_id: str,
        *,
        disconnected: bool = False,
    ) -> None:
        """One request's line; `method` and `path` None when the request line could not be read. A client
        that left before its answer is `disconnected`: `status` is what the server had to answer (None,
        shown `-`, when it left within its request)."""
        if self.log_format == "json":
            fields = {"method": method, "path": path, "status": status, "duration_ms": round(ms, 1)}
            gone = {"client_disconnected": True} if disconnected else {}
            self._json("INFO", "request", {**fields, "request_id": request_id, **gone})
        else:
            shown = f"{method} {path}" if method is not None else "(unreadable request)"
            left = " client disconnected" if disconnected else ""
            self._write(f"{shown} {'-' if status is None else status} {ms:.1f}ms {request_id}{left}")

    def event(self, message: str, level: str = "INFO") -> None:
        """Something the server did or saw (an environment started, a message dead-lettered)."""
        if self.log_format == "json":
            self._json(level, message, {})
        else:
            self._write(message)

    def _json(self, level: str, message: str, fields: dict[str, object]) -> None:
        # Powertools' own timestamp format and compact separators: one stream, one shape of line.
        now = datetime.now(UTC)
        timestamp = f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}+0000"
        line = {"level": level, "message": message, "timestamp": timestamp, "service": "citewise-serve", **fields}
        self._write(json.dumps(line, separators=(",", ":")))

    def _write(self, line: str) -> None:
        stream = self._stream or sys.stderr
        # A request line is the client's, an event may name a document: a raw byte 0x9b in a request line
        # would be a C1 CSI on this terminal.
        line = escape_terminal_controls(line)
        with self._lock:
            stream.write(line + "\n")
            stream.flush()
