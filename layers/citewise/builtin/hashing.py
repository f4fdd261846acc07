"""A deterministic feature-hashing embedder: no model, no network, same vectors everywhere.

Tests use it so that retrieval is reproducible and fast; it also lets `make bench` measure our own
pipeline without a model's cost hiding it. Words and word bigrams are hashed (BLAKE2b, not Python's
salted `hash`) into signed buckets, weighted by 1 + log(tf), and the vector is L2-normalised, so cosine
similarity approximates lexical overlap.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from collections.abc import Sequence

from citewise.domain.models import Vector
from citewise.domain.textutil import content_terms


class HashingEmbedder:
    """Feature hashing of stemmed words and bigrams into `dimension` signed buckets."""

    def __init__(self, dimension: int = 384) -> None:
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"hashing-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> Vector:
        return self._embed(text)

    def _embed(self, text: str) -> Vector:
        terms = content_terms(text)
        features = Counter(terms)
        features.update(f"{a} {b}" for a, b in zip(terms, terms[1:], strict=False))
        vector = self._hashed(features)
        norm = math.sqrt(sum(v * v for v in vector))
        if not norm:
            # No content word ("x", "the", ""), or features that cancelled out: the port promises a unit
            # vector, so the text itself becomes the one feature.
            vector = self._hashed(Counter([text.casefold()]))
            norm = 1.0
        return [v / norm for v in vector]

    def _hashed(self, features: Counter[str]) -> Vector:
        vector = [0.0] * self._dimension
        for feature, count in features.items():
            hashed, sign = _feature_hash(feature)
            vector[hashed % self._dimension] += sign * (1.0 + math.log(count))
        return vector


@functools.lru_cache(maxsize=1 << 16)
def _feature_hash(feature: str) -> tuple[int, float]:
    """The feature's bucket before the modulo, and its sign; cached because a corpus repeats its words
    and word pairs, and the hash was a third of a hashing ingest."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little"), 1.0 if digest[4] & 1 else -1.0
