"""`batched` for Python 3.11 (itertools.batched arrived in 3.12)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

_T = TypeVar("_T")


def batched(items: Iterable[_T], size: int) -> Iterator[list[_T]]:
    """Consecutive lists of `size` items (the last may be shorter), read lazily."""
    batch: list[_T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
