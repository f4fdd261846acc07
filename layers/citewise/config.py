"""Settings from environment variables (prefix `CITEWISE_`), validated once at start-up.

Logic never reads `os.environ`: it receives a `Settings` object, so tests build one explicitly and a
misconfiguration fails at start with a message naming the variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

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

    @property
    def home_dir(self) -> Path:
        """`home` with `~` expanded."""
        return self.home.expanduser()
