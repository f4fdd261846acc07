"""Where the CLI's own diagnostics go: a log file under the home, never the terminal.

Libraries warn on stderr when nothing else is configured (a parser about a malformed file it still reads,
Python's `warnings`): lines a user cannot act on, mixed into the summary. The file keeps them for when
something does go wrong; what the user must see is the command's own output and its `error:` line.
"""

from __future__ import annotations

import logging
from pathlib import Path

LOGS_DIR = "logs"
CLI_LOG = "citewise.log"
"""The CLI's log, in `<home>/logs/`."""
SERVE_LOG = "serve.log"
"""`citewise serve`'s handler logs (Powertools JSON), in `<home>/logs/`."""


class _FolderMakingHandler(logging.FileHandler):
    """A file handler that creates its folder on the first record: a command that logs nothing leaves
    no trace in the home (nor creates a home that does not exist)."""

    def _open(self):  # type: ignore[no-untyped-def]  # logging's own signature is untyped
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


def capture_to_file(path: Path) -> logging.Handler:
    """Send this process's warnings (the `logging` root and Python's `warnings`) to `path`, instead of
    any file an earlier call named; returns the handler."""
    root = logging.getLogger()
    for previous in [h for h in root.handlers if isinstance(h, _FolderMakingHandler)]:  # main() run again
        root.removeHandler(previous)
        previous.close()
    handler = _FolderMakingHandler(path, delay=True, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    root.addHandler(handler)
    logging.captureWarnings(True)
    return handler
