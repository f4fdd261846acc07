"""Settings from environment variables (prefix `CITEWISE_`), validated once at start-up.

Logic never reads `os.environ`: it receives a `Settings` object, so tests build one explicitly and a
misconfiguration fails at start with a message naming the variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pydantic
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from citewise.errors import ValidationError

EmbedderName = Literal["minilm", "hashing"]
SearchMode = Literal["hybrid", "bm25", "vector"]


class Settings(BaseSettings):
    """Knobs of the pipeline; every field maps to `CITEWISE_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="CITEWISE_", extra="ignore", frozen=True)

    home: Path = Field(default=Path("~/.citewise"), description="Where the local index and registry live.")
    embedder: EmbedderName = "minilm"
    hashing_dimension: int = Field(default=384, ge=16, le=4096)
    chunk_tokens: int = Field(default=400, ge=32, le=4000)
    chunk_overlap: int = Field(default=50, ge=0, le=1000)
    max_document_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    max_pages: int = Field(default=2000, ge=1)
    search_mode: SearchMode = "hybrid"
    rrf_k: int = Field(default=60, ge=1)
    candidates: int = Field(default=50, ge=1, le=1000, description="Depth of each ranked list before fusion.")
    embed_batch_size: int = Field(default=64, ge=1, le=1024)

    @model_validator(mode="after")
    def _overlap_below_budget(self) -> Settings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("CITEWISE_CHUNK_OVERLAP must be smaller than CITEWISE_CHUNK_TOKENS")
        return self

    @property
    def home_dir(self) -> Path:
        """`home` with `~` expanded."""
        return self.home.expanduser()


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment (and explicit overrides); a bad value names its variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            (f"CITEWISE_{str(err['loc'][0]).upper()}: " if err["loc"] else "")
            + err["msg"].removeprefix("Value error, ")
            for err in exc.errors(include_url=False)
        )
        raise ValidationError(f"invalid setting: {problems}") from exc
