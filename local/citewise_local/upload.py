"""`citewise upload FILE... --server URL`: the three steps of an API upload (presign, PUT, wait) in one.

A client of the API like any other (`citewise.client`): it needs the server's URL and a bearer token,
never the server's home. Every file is uploaded first, then each is waited for until its version is
INDEXED or FAILED, so ingestion of the first runs while the others are sent. Exit status as the CLI's:
0 every document INDEXED; 1 one FAILED (its reason printed) or was not ingested in time; 2 a usage or
input error (a missing file, no token, a 4xx from the API such as an unsupported format); 3 the server
could not be reached, throttled or failed (worth retrying).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from pathlib import Path

from citewise.client import CitewiseClient, CitewiseClientError, Uploaded
from citewise.domain.errors import ValidationError
from citewise.domain.models import Document, DocumentStatus, Visibility
from citewise_local.cli import EXIT_ERROR, EXIT_FAILED, EXIT_UNAVAILABLE
from citewise_local.render import escape_terminal_controls

TOKEN_ENV = "CITEWISE_TOKEN"  # noqa: S105 - the variable's name, not a token
SERVER_ENV = "CITEWISE_SERVER"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `upload` command's options."""
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="files to upload (not folders)")
    parser.add_argument(
        "--server",
        default=os.environ.get(SERVER_ENV),
        help=f"the API's base URL, e.g. http://127.0.0.1:8080 (default ${SERVER_ENV})",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"bearer token, e.g. from `citewise token` (default ${TOKEN_ENV}; prefer the variable: "
        "arguments show in the process list)",
    )
    parser.add_argument(
        "--prefix", default="", help="folder in the tenant to upload into, e.g. reports/ (default: none)"
    )
    parser.add_argument(
        "--visibility",
        choices=[v.value for v in Visibility],
        default=Visibility.SHARED.value,
        help="shared: the whole tenant reads them; private: only the token's user (default: shared)",
    )
    parser.add_argument(
        "--metadata",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a string attribute for filters (repeatable; lower-case keys)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for ingestion, for all files (default 300)"
    )
    parser.add_argument("--no-wait", action="store_true", help="return once uploaded; ingestion goes on")
    parser.add_argument("--json", action="store_true", help="print one JSON object per file")


def run(args: argparse.Namespace) -> int:
    """Upload every file, wait for each, print one line (or JSON object) per file; the exit status."""
    if not args.server or not args.token:
        missing = "--server (or $CITEWISE_SERVER)" if not args.server else "--token (or $CITEWISE_TOKEN)"
        raise ValidationError(f"upload needs {missing}; a local token: citewise token --tenant T --user U")
    for file in args.files:
        if not file.is_file():
            raise ValidationError(f"not a file: {file}" + (" (upload files, not folders)" if file.is_dir() else ""))
    metadata = dict(_pair(item) for item in args.metadata)
    try:
        client = CitewiseClient(args.server, args.token)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc
    try:
        uploads = [
            client.upload(
                file,
                filename=_stored_name(args.prefix, file),
                visibility=args.visibility,
                metadata=metadata,
            )
            for file in args.files
        ]
        if args.no_wait:
            for uploaded in uploads:
                _print(args, uploaded, None)
            return 0
        return _wait_all(args, client, uploads)
    except CitewiseClientError as exc:
        return _client_failure(exc)


def _wait_all(args: argparse.Namespace, client: CitewiseClient, uploads: list[Uploaded]) -> int:
    from tqdm import tqdm

    deadline = time.monotonic() + args.timeout
    status = 0
    with tqdm(total=len(uploads), unit="doc", desc="ingesting", file=sys.stderr, disable=None, leave=False) as bar:
        for uploaded in uploads:
            bar.set_postfix_str(escape_terminal_controls(uploaded.path), refresh=True)
            if uploaded.sidecar:
                bar.update()
                _print(args, uploaded, None)
                continue
            try:
                document = client.wait(uploaded, timeout=max(deadline - time.monotonic(), 0.0))
            except CitewiseClientError as exc:
                if exc.code != "TIMEOUT":
                    raise
                print(escape_terminal_controls(f"error: TIMEOUT: {exc.message}"), file=sys.stderr)
                status = EXIT_FAILED
                continue
            bar.update()
            _print(args, uploaded, document)
            if document.status is DocumentStatus.FAILED:
                status = EXIT_FAILED
    return status


def _print(args: argparse.Namespace, uploaded: Uploaded, document: Document | None) -> None:
    print(escape_terminal_controls(_line(args, uploaded, document)))


def _line(args: argparse.Namespace, uploaded: Uploaded, document: Document | None) -> str:
    if args.json:
        record = {"document_id": uploaded.document_id, "path": uploaded.path, "sidecar": uploaded.sidecar}
        if document is not None:
            record |= {"status": document.status.value, "chunks": document.chunk_count, "error": document.error}
        return json.dumps(record)
    if uploaded.sidecar:
        return f"uploaded  {uploaded.path} (metadata of its document {uploaded.document_id})"
    if document is None:
        return f"uploaded  {uploaded.path} ({uploaded.document_id}; ingestion continues)"
    if document.status is DocumentStatus.FAILED:
        return f"FAILED    {uploaded.path} ({uploaded.document_id}): {document.error}"
    return f"INDEXED   {uploaded.path} ({uploaded.document_id}, {document.chunk_count} chunks)"


def _stored_name(prefix: str, file: Path) -> str:
    """The path a file is stored under: in `prefix` if any, in NFC, the only form the API takes (a
    terminal or a file system, macOS's for one, may hand the name decomposed)."""
    return unicodedata.normalize("NFC", prefix.rstrip("/") + "/" + file.name if prefix else file.name)


def _pair(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ValidationError(f"--metadata takes KEY=VALUE, not {item!r}")
    return key, value


def _client_failure(error: CitewiseClientError) -> int:
    request = f" (request {error.request_id})" if error.request_id else ""
    details = f": {json.dumps(error.details)}" if error.details else ""
    print(escape_terminal_controls(f"error: {error.code}: {error.message}{details}{request}"), file=sys.stderr)
    return EXIT_UNAVAILABLE if error.retryable else EXIT_ERROR
