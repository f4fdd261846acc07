"""Progress of long work: how the pipeline tells its caller how far it is, without knowing who listens.

A 1,000-page PDF takes minutes to parse and embed on a laptop; the CLI shows that as a bar, a Lambda
function has no one to show it to. So the logic reports to a `Progress` callable it is handed, and the
library depends on no terminal library: the local package adapts it to tqdm, everything else passes
nothing and gets `silent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Step:
    """One long step: what is done (`parse`, `embed`), to what (a document's path, or `12 documents`),
    counted in which unit (`page`, `chunk`)."""

    action: str
    subject: str
    unit: str


class Progress(Protocol):
    """Told after each unit of a step: `done` of `total` units. Called often (every page, every batch),
    so it must be cheap; it must not raise."""

    def __call__(self, step: Step, done: int, total: int) -> None: ...


def silent(step: Step, done: int, total: int) -> None:
    """The `Progress` of callers with no one to tell."""
