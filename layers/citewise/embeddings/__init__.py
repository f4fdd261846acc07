"""Embedder port and its adapters. See `base.Embedder`."""

from citewise.embeddings.base import Embedder

__all__ = ["Embedder"]
