"""The Embedder port: text in, unit-length vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from citewise.domain.models import Vector


class Embedder(Protocol):
    """Turns text into vectors for one model.

    `name` identifies the vector space (model and dimension): an index refuses vectors from another
    space, so changing the embedder forces a re-index instead of silently mixing spaces. Documents and
    queries have separate methods because some models (Cohere, E5) embed them differently.
    """

    @property
    def name(self) -> str:
        """A stable identifier of the vector space, e.g. `minilm-l6-v2` or `hashing-384`."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """One unit-length vector per text, in order."""
        ...

    def embed_query(self, text: str) -> Vector:
        """The unit-length vector of a search query."""
        ...


@runtime_checkable
class ReportsTokens(Protocol):
    """An embedder that knows the input tokens its model billed (the Bedrock ones): usage metering counts
    those, and estimates the tokens of any other embedder (`citewise.domain.textutil.count_tokens`)."""

    @property
    def usage(self) -> int:
        """Input tokens billed so far, over every call of this embedder."""
        ...
