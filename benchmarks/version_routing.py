"""Does the router's version preference (issue 31) answer version questions with the right version's pages?

A small labelled set, local index and MiniLM: documentation of one library in four versions (3.10-3.13),
five topics a version whose pages are nearly the same text from one version to the next (as documentation
sites are), each page's title naming its version and its `version` attribute declaring it, plus seven pages
of single APIs that declare only `introduced_in` or `deprecated_in`. 32 questions name a version ("... in
Python 3.12?"): 20 about a topic (labelled with that topic's page of that version), 12 about an API.

For each question, with the preference (`route: true`) and without it (`route: false`; the question's text
is searched whole either way, so the only difference is the preference):
- valid@1: the first hit is valid for the asked version (`domain.versions.valid_for`);
- valid share@3: the share of the first three hits valid for it;
- exact@1 (topic questions): the first hit is the labelled page.

Then what the preference costs a query: the median time of `Retriever.retrieve` over the same questions,
with and without it, once `--filler` more pages (default 500, other topics, each declaring a version) make
every ranking as deep as the setting (100 candidates a list), all of which the preference reads.

`python -m benchmarks.version_routing [--home DIR] [--filler 500] [--rounds 5]`
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from citewise.domain.models import AttributeValue, Caller, SearchHit, SearchRequest
from citewise.domain.objects import SourceObject
from citewise.domain.versions import declared_versions, parse_version, valid_for
from citewise.ports.router import VersionMention
from citewise.query.versioning import prefer_valid
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import Settings

CALLER = Caller(tenant_id="acme", user_id="bench")
VERSIONS = ("3.10", "3.11", "3.12", "3.13")
TOPICS = {
    "running": (
        "Running an asyncio program",
        "asyncio.run() creates an event loop, runs the coroutine until it completes and closes the loop.",
        "How do I run the main coroutine of an asyncio program in Python {v}?",
    ),
    "cancellation": (
        "Cancelling tasks",
        "Task.cancel() asks a task to stop: CancelledError is raised inside the coroutine at its next await.",
        "How do I cancel a running task in Python {v}?",
    ),
    "timeouts": (
        "Timeouts",
        "Put a time limit on an awaitable; when it expires the awaitable is cancelled and TimeoutError raised.",
        "How do I put a time limit on an await in Python {v}?",
    ),
    "subprocesses": (
        "Subprocesses",
        "create_subprocess_exec() starts a child process and returns a Process whose pipes are streams.",
        "How do I start a child process and read its output in Python {v}?",
    ),
    "queues": (
        "Queues",
        "asyncio.Queue hands items from producer coroutines to consumer coroutines, first in first out.",
        "How do I pass work from producer to consumer coroutines in Python {v}?",
    ),
}
APIS: dict[str, tuple[str, str, dict[str, AttributeValue]]] = {
    "taskgroup": (
        "asyncio.TaskGroup",
        "A TaskGroup runs tasks together and cancels the rest when one of them fails.",
        {"introduced_in": "3.11"},
    ),
    "timeout-cm": (
        "asyncio.timeout()",
        "The asyncio.timeout() context manager puts a time limit on the awaits inside its block.",
        {"introduced_in": "3.11"},
    ),
    "runner": (
        "asyncio.Runner",
        "A Runner runs several top-level coroutines in one event loop with the same context.",
        {"introduced_in": "3.11"},
    ),
    "eager": (
        "Eager task factory",
        "An eager task factory runs a new task's coroutine at once until its first await.",
        {"introduced_in": "3.12"},
    ),
    "queue-shutdown": (
        "Queue.shutdown()",
        "Queue.shutdown() stops a queue: producers get QueueShutDown and consumers drain what is left.",
        {"introduced_in": "3.13"},
    ),
    "get-event-loop": (
        "get_event_loop() without a running loop",
        "get_event_loop() called with no running event loop creates one and warns: use asyncio.run().",
        {"deprecated_in": "3.12"},
    ),
    "coroutine-decorator": (
        "Generator-based coroutines",
        "The @asyncio.coroutine decorator made a generator a coroutine; write async def instead.",
        {"deprecated_in": "3.8"},
    ),
}
API_QUESTIONS = (
    ("How do I run tasks together and cancel the rest when one fails in Python {v}?", ("3.10", "3.12")),
    ("How do I put a time limit on the awaits of a block in Python {v}?", ("3.10", "3.13")),
    ("How do I run several top-level coroutines in one event loop in Python {v}?", ("3.10", "3.11")),
    ("How do I make a new task run its coroutine at once in Python {v}?", ("3.11", "3.12")),
    ("How do I stop a queue so that producers get an error in Python {v}?", ("3.12", "3.13")),
    ("What does get_event_loop() do with no running event loop in Python {v}?", ("3.11", "3.13")),
)


def corpus(version_in_text: bool) -> list[SourceObject]:
    """The topic pages of every version, then the API pages; `version_in_text`: a topic page's title and text
    name its version (else only its `version` attribute does, and the pages of a topic are one text)."""
    pages: list[tuple[str, str, str, dict[str, AttributeValue]]] = []
    for version in VERSIONS:
        for topic, (title, text, _) in TOPICS.items():
            if version_in_text:
                title, text = f"{title} (Python {version})", f"{text} See What's New In Python {version}."
            pages.append((f"asyncio/{version}/{topic}.md", title, text, {"version": version}))
    for name, (title, text, attributes) in APIS.items():
        pages.append((f"asyncio/api/{name}.md", title, text, attributes))
    return [
        SourceObject(
            tenant_id=CALLER.tenant_id,
            path=path,
            size=len(body := f"# {title}\n\n{text}\n"),
            version="1",
            load=body.encode,
            owner=CALLER.user_id,
            attributes=attributes,
        )
        for path, title, text, attributes in pages
    ]


def questions() -> list[tuple[str, str, str | None]]:
    """(question, the version it names, the labelled page or None for API questions)."""
    asked = [
        (template.format(v=version), version, f"asyncio/{version}/{topic}.md")
        for topic, (_, _, template) in TOPICS.items()
        for version in VERSIONS
    ]
    return asked + [(template.format(v=v), v, None) for template, versions in API_QUESTIONS for v in versions]


def _valid(hit: SearchHit, version: str) -> bool:
    return valid_for(declared_versions(hit.chunk.document.attributes), parse_version(version))


def measure(services: Services, route: bool) -> dict[str, float]:
    """valid@1, valid share@3 and exact@1 over the labelled questions."""
    valid_first = valid_share = exact = 0.0
    asked = questions()
    topical = sum(1 for _, _, page in asked if page)
    for question, version, page in asked:
        hits = services.retriever.search(CALLER, SearchRequest(query=question, top_k=3, route=route))
        valid_first += _valid(hits[0], version)
        valid_share += sum(_valid(hit, version) for hit in hits) / len(hits)
        exact += page is not None and hits[0].chunk.document.path == page
    return {
        "valid@1": valid_first / len(asked),
        "valid share@3": valid_share / len(asked),
        "exact@1 (topic questions)": exact / topical,
    }


def filler(count: int) -> list[SourceObject]:
    """`count` pages on other topics of the same library, each of one of the versions."""
    words = ("streams", "locks", "events", "futures", "transports", "protocols", "signals", "executors")
    pages = []
    for number in range(count):
        version = VERSIONS[number % len(VERSIONS)]
        topic = f"{words[number % len(words)]} {words[(number // len(words)) % len(words)]}"
        body = f"# Notes on {topic} {number}\n\nHow asyncio {topic} work with the event loop and tasks.\n"
        pages.append(
            SourceObject(
                tenant_id=CALLER.tenant_id,
                path=f"asyncio/{version}/notes-{number}.md",
                size=len(body),
                version="1",
                load=body.encode,
                owner=CALLER.user_id,
                attributes={"version": version},
            )
        )
    return pages


def latency(services: Services, route: bool, rounds: int, *, versioned: bool = True) -> float:
    """The median milliseconds of one `retrieve` of a labelled question (`top_k` 3), after one warm-up;
    `versioned=False`: of the question without its `in Python X.Y` (routed, it then has no preference)."""
    runs = []
    for question, version, _ in questions():
        text = question if versioned else question.replace(f" in Python {version}", "")
        request = SearchRequest(query=text, top_k=3, route=route)
        services.retriever.retrieve(CALLER, request)
        for _ in range(rounds):
            start = time.perf_counter()
            services.retriever.retrieve(CALLER, request)
            runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def preference_cost(services: Services, rounds: int) -> tuple[float, int]:
    """The median milliseconds of `prefer_valid` alone over a question's fused candidates (their chunks not
    parsed yet, as retrieval hands them over), and how many candidates that was at most."""
    runs, most = [], 0
    for question, version, _ in questions():
        mentions = [VersionMention(version=version, phrase=version)]
        for _ in range(rounds):
            candidates = services.retriever._fused(CALLER, question, None, services.retriever.candidates)
            most = max(most, len(candidates))
            start = time.perf_counter()
            prefer_valid(candidates, mentions)
            runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs), most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--filler", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for version_in_text in (True, False):
        home = (args.home or Path(tempfile.mkdtemp(prefix="citewise-versions-"))) / f"in-text-{version_in_text}"
        services = build_services(Settings(home=home, embedder="minilm"))
        try:
            pages = corpus(version_in_text)
            for _ in services.ingestor.ingest_many(pages):
                pass
            where = "titles and attributes" if version_in_text else "attributes only"
            print(f"{len(pages)} pages (versions in {where}), {len(questions())} questions ({home})")
            for route in (False, True):
                figures = measure(services, route)
                name = "  with the version preference" if route else "  without (route: false)"
                print(f"{name:32} " + "  ".join(f"{key} {value:.3f}" for key, value in figures.items()))
            if not version_in_text:
                for _ in services.ingestor.ingest_many(filler(args.filler)):
                    pass
                alone, most = preference_cost(services, args.rounds)
                print(
                    f"with {args.filler} more pages: the preference alone p50 {alone:.2f} ms, {most} candidates at most"
                )
                for versioned in (True, False):
                    unrouted, routed = (
                        latency(services, route, args.rounds, versioned=versioned) for route in (False, True)
                    )
                    which = "questions naming a version" if versioned else "the same without it      "
                    print(f"  retrieve p50, {which}: {unrouted:.1f} ms unrouted, {routed:.1f} ms routed")
        finally:
            services.close()


if __name__ == "__main__":
    main()
