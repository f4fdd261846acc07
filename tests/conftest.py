"""Shared fixtures: a wired local stack on a temporary home with the deterministic hashing embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from citewise.config import Settings
from citewise.factory import Services, build_services


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", embedder="hashing")


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    built = build_services(settings)
    yield built
    built.close()
