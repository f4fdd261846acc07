"""Which directories are citewise homes, so a mistyped `--home` is an error rather than a new, empty index.

Commands that only read (query, search, docs, settings show, token, mcp) refuse a home that holds no
citewise data: answering "not found" from an empty index that a typo created would look like an answer.
Commands that write data (ingest, demo, eval, serve, settings set) create it, as `git init` or a
database server does on first start. `--init` lets a reading command use a new home on purpose.
"""

from __future__ import annotations

from pathlib import Path

from citewise.domain.errors import ValidationError

# What the local backend, the blob store, the token key and `citewise eval` keep in a home.
HOME_ENTRIES = ("index.db", "registry.db", "blobs", "secret.key", "eval", "sources.db")


def holds_citewise_data(home: Path) -> bool:
    """True if `home` has any of the files and folders citewise keeps there."""
    return any((home / entry).exists() for entry in HOME_ENTRIES)


def require_home(home: Path) -> None:
    """Refuse `home` unless it already holds citewise data (module docstring)."""
    if holds_citewise_data(home):
        return
    state = "does not exist" if not home.exists() else "holds no citewise data"
    raise ValidationError(
        f"{home} {state}: check --home or CITEWISE_HOME; to start a new home, ingest documents into it "
        "(citewise ingest PATH --tenant T) or pass --init",
        details={"home": str(home)},
    )
