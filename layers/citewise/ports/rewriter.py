"""Follow-up rewriting: a question asked in a conversation, made into one that stands alone for retrieval.

"And what does it cost?" after a question about the dead-letter queue must retrieve for the dead-letter
queue, and retrieval sees one question only. A `Rewriter` turns the follow-up and the turns before it
into a standalone question: Bedrock Converse on AWS (`citewise.aws.bedrock_rewriter`), the local
OpenAI-compatible model (`citewise_local.openai_rewriter`), or the deterministic rewrite
(`citewise.builtin.rewriter`), which needs no model. A rewriter may fail (a timeout, throttling, an
empty or runaway answer): the caller (`citewise.query.conversations`) then uses the question as asked
and says so; it never fails the query.

The history a rewriter sees is bounded (`HistoryBudget`): the newest turns that fit, the oldest dropped
first. They are dropped, not summarised: a summary would be one more model call on every follow-up, and
what a follow-up refers back to is almost always the last turn or two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from citewise.domain.models import Frozen

MAX_STANDALONE_CHARS = 1000
"""A rewrite longer than this is a model that went on talking, not a question: refused (the raw one is used)."""


class Exchange(Frozen):
    """One earlier turn as a rewriter sees it."""

    question: str
    standalone_question: str
    answer: str


class HistoryBudget(Frozen):
    """How much history a rewrite may read: at most `turns` turns and `chars` characters, newest first."""

    turns: int = 6
    chars: int = 6000

    def fit(self, history: Sequence[Exchange]) -> tuple[list[Exchange], int]:
        """The newest turns of `history` (oldest first) within the budget, and how many older ones were dropped."""
        kept: list[Exchange] = []
        used = 0
        for exchange in reversed(history[-self.turns :] if self.turns else []):
            size = len(exchange.standalone_question) + len(exchange.answer)
            if kept and used + size > self.chars:
                break
            kept.append(exchange)
            used += size
        kept.reverse()
        return kept, len(history) - len(kept)


class Rewriter(Protocol):
    """Makes a follow-up standalone; raises on failure (the caller falls back to the raw question)."""

    name: str

    def rewrite(self, question: str, history: Sequence[Exchange]) -> str:
        """The standalone form of `question` given the earlier turns (oldest first, never empty)."""
        ...


class UnusableRewrite(ValueError):
    """A model's rewrite that cannot be a question (empty, or far too long)."""


def checked_rewrite(text: str) -> str:
    """A model's rewrite on one line, or UnusableRewrite."""
    line = " ".join(text.split()).strip().strip('"')
    if not line or len(line) > MAX_STANDALONE_CHARS:
        raise UnusableRewrite(f"a rewrite of {len(line)} characters")
    return line


REWRITE_INSTRUCTIONS = (
    "You rewrite the user's last question of a conversation into one standalone question that a search "
    "engine can answer without the conversation: replace pronouns and references (it, that, they, the "
    "second one) with what they refer to, keep the user's words otherwise, and never answer it. If the "
    "question already stands alone, return it unchanged. Reply with the question only."
)


def rewrite_prompt(question: str, history: Sequence[Exchange]) -> str:
    """The user message of a model rewrite: the earlier turns, then the follow-up."""
    lines = ["Conversation so far:"]
    for exchange in history:
        lines.append(f"User: {exchange.question}")
        if exchange.answer:
            lines.append(f"Assistant: {exchange.answer}")
    lines += ["", f"Last question: {question}", "Standalone question:"]
    return "\n".join(lines)
