"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from citewise_local.cli import main


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `citewise --home <tmp> ARGS...`; returns (exit status, stdout, stderr)."""
    monkeypatch.setenv("CITEWISE_EMBEDDER", "hashing")

    def run(*args: str) -> tuple[int, str, str]:
        status = main(["--home", str(tmp_path / "home"), *args])
        out, err = capsys.readouterr()
        return status, out, err

    return run
