"""VectorIndex port and its adapters. See `base.VectorIndex`."""

from citewise.index.base import ScoredChunk, VectorIndex

__all__ = ["ScoredChunk", "VectorIndex"]
