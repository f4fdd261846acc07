"""Time to the first answer text against the whole answer, when the answer streams (`stream_question`, what
`POST /v1/query` with `Accept: text/event-stream` runs), locally.

The sample corpus in a fresh home (hashing embedder), each question of `benchmarks.usage_overhead` asked
`rounds` times with two synthesizers:
- the extractive one (no model): it chooses its passages before it writes, so its first text comes when
  nearly everything is done;
- the OpenAI-compatible one against the streaming chat-completions test server (tests/doubles), whose
  model answers three cited sentences of the best source, three words per chunk, one chunk every
  `pace` seconds (0.1 s: about 30 words a second, a small local model on a laptop). Its first text is
  sent once the first sentence's marker is verified (`citewise.ports.grounding.Grounder`).

For each: the medians of the time to the `sources` event, to the first `text` event and to the final
`answer` event, in milliseconds. `python -m benchmarks.streaming_latency` runs it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO
from benchmarks.usage_overhead import CALLER, QUESTIONS
from citewise.domain.models import SearchRequest, Visibility
from citewise.ports.synthesizer import AnswerDone, Synthesizer, TextDelta
from citewise.query.answering import SourcesFound, stream_question
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings
from citewise_local.folders import scan
from citewise_local.openai_synthesis import OpenAIChatSynthesizer
from tests.doubles.chat_server import chat_server
from tests.doubles.models import ScriptedModel

_SOURCE_RE = re.compile(r'<source id="1">\n.*?\ntext:\n(.*?)\n</source>', re.DOTALL)
_SENTENCE_RE = re.compile(r"[A-Z][^.!?\n#|`]{30,}[.!?]")


def quoting_model(system: str, user: str) -> str:
    """Three sentences of the first source, each cited to it: a model that keeps to its sources."""
    source = _SOURCE_RE.search(user)
    sentences = _SENTENCE_RE.findall(source.group(1) if source else "")[:3] or ["The documents do not say."]
    return " ".join(f"{sentence.strip().rstrip('.!?')} [1]." for sentence in sentences)


def _timed(services: Services, synthesizer: Synthesizer, question: str) -> tuple[float, float, float]:
    """(seconds to the sources, to the first text, to the answer) of one streamed question."""
    started = time.perf_counter()
    sources = first = 0.0
    for event in stream_question(services.retriever, synthesizer, CALLER, SearchRequest(query=question)):
        now = time.perf_counter() - started
        if isinstance(event, SourcesFound):
            sources = now
        elif isinstance(event, TextDelta) and not first:
            first = now
        elif isinstance(event, AnswerDone):
            return sources, first, now
    raise RuntimeError("the stream ended without its answer")


def _medians(timings: list[tuple[float, float, float]]) -> dict[str, float]:
    sources, first, whole = (statistics.median(column) * 1000 for column in zip(*timings, strict=True))
    return {
        "p50_sources_ms": round(sources, 1),
        "p50_first_text_ms": round(first, 1),
        "p50_answer_ms": round(whole, 1),
        "first_text_share": round(first / whole, 3),
    }


def run(rounds: int = 5, pace: float = 0.1) -> dict[str, dict[str, float]]:
    """The figures of each synthesizer."""
    with tempfile.TemporaryDirectory() as home, chat_server(ScriptedModel(quoting_model)) as chat:
        chat.pace = pace
        services = build_services(Settings(home=Path(home), embedder="hashing"))
        try:
            found = scan([REPO / "samples" / "corpus"], CALLER.tenant_id, CALLER.user_id, Visibility.SHARED)
            for _ in services.ingestor.ingest_many(found.objects):
                pass
            synthesizers: dict[str, Synthesizer] = {
                "extractive": services.synthesizer,
                "openai_streaming": OpenAIChatSynthesizer(chat.url, "bench", timeout=60),
            }
            figures = {}
            for name, synthesizer in synthesizers.items():
                _timed(services, synthesizer, QUESTIONS[0])  # warm: the index's caches, the first connection
                timings = [_timed(services, synthesizer, q) for _ in range(rounds) for q in QUESTIONS]
                figures[name] = {"questions": len(timings), **_medians(timings)}
        finally:
            services.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every question (default 5)")
    parser.add_argument("--pace", type=float, default=0.1, help="seconds between the model's chunks (default 0.1)")
    arguments = parser.parse_args()
    print(json.dumps(run(arguments.rounds, arguments.pace), indent=2))


if __name__ == "__main__":
    main()
