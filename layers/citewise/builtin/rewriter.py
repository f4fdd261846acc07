"""The follow-up rewrite without a model (`citewise.ports.rewriter`): carry the previous turn's topic.

Lambda ships it (it needs nothing but the standard library), and it is what a deployment without a
generative model rewrites with, and what the measurements in docs/generation.md compare the models with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from citewise.ports.rewriter import Exchange

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
_REFERRING = frozenset(
    "it its it's they them their theirs this that these those there he she his her him one ones former latter "
    "same such above".split()
)
_OPENERS = ("and ", "also ", "but ", "so ", "what about", "how about", "and?", "then ", "why not", "what else")
_STOP = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each else few for from further had has have
    having how i if in into is just me more most my no nor not now of off on once only or other our out over
    own please same should so some such tell than that the then there these they this those through to too
    under until up us very was we were what when where which while who whom why will with would you your
    it its it's them their use used using get work works working explain describe mean means happen happens
    also need needs one ones way ways much many does""".split()
)
SHORT_FOLLOW_UP_WORDS = 2
"""A question with at most this many content words is taken to lean on the turn before it."""


def content_words(text: str) -> list[str]:
    """The words of `text` that carry its topic (no stop words), lower-cased, in order, once each."""
    words = (word.lower() for word in _WORD.findall(text))
    return list(dict.fromkeys(word for word in words if word not in _STOP and not word.isdigit()))


def refers_back(question: str) -> bool:
    """Whether `question` reads as a follow-up: a referring word (it, that, they...), an opening that
    continues (and, what about...), or too few words of its own to be a topic."""
    lowered = " ".join(question.lower().split())
    words = {word.lower() for word in _WORD.findall(question)}
    return (
        bool(words & _REFERRING)
        or lowered.startswith(_OPENERS)
        or len(content_words(question)) <= SHORT_FOLLOW_UP_WORDS
    )


class DeterministicRewriter:
    """The rewrite without a model: a follow-up that refers back gets the previous turn's key terms.

    The key terms are the content words of the previous turn's standalone question that the follow-up does
    not already use (so a chain of follow-ups keeps the topic of the first question). They are appended in
    parentheses: the question stays readable and retrieval, lexical and semantic, sees the topic. A
    question that does not refer back is left as it is.
    """

    name = "deterministic"

    def rewrite(self, question: str, history: Sequence[Exchange]) -> str:
        if not history or not refers_back(question):
            return question
        own = set(content_words(question))
        carried = [word for word in content_words(history[-1].standalone_question) if word not in own]
        return f"{question} ({' '.join(carried)})" if carried else question
