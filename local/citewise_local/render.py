"""Plain-text rendering of answers, hits, documents and ingest summaries for the terminal.

Everything the CLI prints that came from documents or other users (titles, paths, snippets, answers,
errors, a request line) goes through `escape_terminal_controls` on its way out, JSON included.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from citewise.domain.models import Answer, Chunk, Citation, Document, Routing, SearchHit
from citewise.domain.textutil import BIDI_CONTROLS
from citewise.ports.audit import AuditRecord
from citewise.ports.conversations import AS_ASKED, Conversation, TurnContext, TurnStatus
from citewise.ports.erasure import Erasure
from citewise.ports.quotas import QuotaStatus
from citewise.ports.usage import CostEstimate, TenantUsagePage, UsageReport

WIDTH = 100

# What a terminal acts on rather than shows: C0 controls but tab and newline (ESC starts a sequence, CR
# rewrites the line), DEL, C1 controls (U+009B is CSI: `\x9b31m` is an escape sequence on its own), the
# Unicode bidi controls (U+202E reverses what follows: `invoice\u202efdp.exe` shows as `invoiceexe.pdf`) and
# the line and paragraph separators some terminals break lines at.
_TERMINAL_CONTROLS = [
    *(code for code in range(0x20) if chr(code) not in "\t\n"),
    *range(0x7F, 0xA0),
    *map(ord, BIDI_CONTROLS),
    0x2028,
    0x2029,
]
# Each becomes its JSON escape, `\u009b`: visible on a terminal, and the same string again to a JSON parser.
_ESCAPES = {code: f"\\u{code:04x}" for code in _TERMINAL_CONTROLS}


def escape_terminal_controls(text: str) -> str:
    """`text` with every character a terminal would act on (see `_TERMINAL_CONTROLS`) written as `\\uXXXX`.

    Applied to whole outputs, plain or JSON: tab and newline are kept (the layout is ours; in JSON a
    string's own newline is already `\\n`), so another user's document can colour, move the cursor of,
    retitle or reorder the text of no one's terminal, and a JSON output still parses to the same values.
    """
    return text.translate(_ESCAPES)


def location(chunk_path: str, page: int | None, section: str | None) -> str:
    """`path, page N - section`: where a citation points, as a reader would look it up."""
    where = chunk_path + (f", page {page}" if page is not None else "")
    return f"{where} - {section}" if section else where


def render_answer(answer: Answer) -> str:
    """The answer wrapped to the terminal, then each cited source once with the spans quoted from it."""
    text = textwrap.fill(answer.answer, WIDTH, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(filter(None, [text, render_citations(answer.citations)]))


def render_citations(citations: Sequence[Citation]) -> str:
    """Each cited source once with the spans quoted from it ('' without citations)."""
    lines = ["  Citations:"] if citations else []
    for source in dict.fromkeys(c.source for c in citations):
        quotes = [c for c in citations if c.source == source]
        first = quotes[0]
        lines.append(f"    [{source}] {location(first.path, first.page, first.section)} (score {first.score:.2f})")
        lines += [
            textwrap.shorten(f'"{c.quote}"', WIDTH - 8, placeholder='..."').join(["        ", ""]) for c in quotes
        ]
    return "\n".join(lines)


HIT_LINES = 16
"""Lines of a hit's text that `citewise search` shows: a whole chunk of the default budget (400 tokens,
about 1,600 characters) mostly fits; five hits still fit a screen or two. `--json` has every chunk whole."""


def render_hits(hits: Sequence[SearchHit]) -> str:
    """One block per hit, a blank line apart: rank, relevance, score, location (page, section), source and
    date, then the chunk's text wrapped to the terminal, its own line breaks kept, up to `HIT_LINES`."""
    if not hits:
        return "No matching chunks."
    return "\n\n".join(
        f"{rank:>2}. relevance {hit.relevance_score:.2f}  score {hit.score:.3f}{_components(hit)}"
        f"  {_chunk_location(hit.chunk)}{_provenance(hit.chunk)}\n" + "\n".join(_chunk_lines(hit.chunk.text))
        for rank, hit in enumerate(hits, start=1)
    )


def _chunk_lines(text: str) -> list[str]:
    """The text's lines wrapped to the terminal and indented, one blank line between paragraphs; cut after
    `HIT_LINES`, saying how many more there are."""
    lines: list[str] = []
    for line in _reflowed(text.strip().split("\n")):
        if line.strip():
            lines += textwrap.wrap(line, WIDTH, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False)
        elif lines[-1]:
            lines.append("")
    if len(lines) <= HIT_LINES:
        return lines
    return [*lines[:HIT_LINES], f"    [... {len(lines) - HIT_LINES} more lines: --json shows the whole chunk]"]


_REFLOW_MIN = 60
"""A line at least this long that stops inside a sentence was wrapped by its source (a PDF's lines, a
Markdown file's hard wraps): wrapped again at the terminal's width, it would leave a word on a line."""
_OWN_LINE = re.compile(r"\s|[-*+\u2022>|]\s|\d+[.)]\s")
"""How a line starts that is a line of its own: indented (code), a list item, a quotation, a table row."""


def _reflowed(lines: list[str]) -> list[str]:
    """`lines` with each line wrapped inside a sentence joined to the next one; a short line, a line ending
    in other punctuation, a table row and a line that starts as its own (`_OWN_LINE`) keep their breaks."""
    joined: list[str] = []
    previous = ""
    for line in lines:
        wrapped = (
            len(previous) >= _REFLOW_MIN
            and (previous[-1].isalnum() or previous[-1] in ",;")
            and line.strip()
            and not _OWN_LINE.match(line)
            and "|" not in previous + line
        )
        if wrapped:
            joined[-1] += " " + line
        else:
            joined.append(line)
        previous = line
    return joined


def _components(hit: SearchHit) -> str:
    """` (fused 0.800, freshness 0.981, credibility 0.300)` when ranking signals re-scored the hit (and
    `, feedback 0.400` when the feedback signal is on)."""
    parts = hit.components
    if parts is None or (parts.freshness is None and parts.credibility is None):
        return ""
    feedback = "" if parts.feedback is None else f", feedback {parts.feedback:.3f}"
    return (
        f" (fused {parts.fused:.3f}, freshness {parts.freshness or 0:.3f}, credibility {parts.credibility or 0:.3f}"
        f"{feedback})"
    )


def _provenance(chunk: Chunk) -> str:
    """`  (source jira, 2026-03-03)`: the content's origin and date, where known."""
    doc = chunk.document
    facts = [f"source {doc.source}"] if doc.source else []
    facts += [doc.source_date.date().isoformat()] if doc.source_date else []
    return f"  ({', '.join(facts)})" if facts else ""


def _chunk_location(chunk: Chunk) -> str:
    return location(chunk.document.path, chunk.page, chunk.section)


def render_documents(documents: Sequence[Document], next_cursor: str | None, *, detail: bool = False) -> str:
    """A table of documents, or every field of each when `detail` is set."""
    if not documents:
        return "No documents."
    if detail:
        return "\n\n".join(
            "\n".join(f"{key:>12}: {value}" for key, value in doc.model_dump(mode="json").items()) for doc in documents
        )
    rows = [f"{'ID':<32}  {'STATUS':<8}  {'CHUNKS':>6}  {'PAGES':>5}  PATH"]
    rows += [
        f"{d.doc_id:<32}  {d.status.value:<8}  {d.chunk_count:>6}  {d.page_count or '':>5}  {d.path}"
        + (f"\n{'':<34}{d.error}" if d.error else "")
        for d in documents
    ]
    if next_cursor:
        rows.append(f"(more: --cursor {next_cursor})")
    return "\n".join(rows)


def render_routing(routing: Routing) -> str:
    """`routed (deterministic): "in Jira", "last week" -> {filter}; pinned ...`; empty when nothing was routed
    (unless the configured router fell back, which is always said)."""
    fell_back = f", fallback after {routing.fallback}" if routing.fallback else ""
    dropped = routing.filter_fallback
    if dropped is not None:
        phrases = ", ".join(f'"{phrase}"' for phrase in dropped.dropped_phrases)
        return f"routed ({routing.router}{fell_back}): {phrases} dropped: {dropped.reason}: {dropped.message}"
    if not (routing.consumed_phrases or routing.pinned_documents or routing.versions):
        return f"routed ({routing.router}{fell_back}): nothing" if fell_back else ""
    phrases = ", ".join(f'"{phrase}"' for phrase in routing.consumed_phrases)
    line = f"routed ({routing.router}{fell_back}): {phrases or 'no phrase'}"
    if routing.applied_filters is not None:
        line += f" -> {json.dumps(routing.applied_filters)}"
    if routing.pinned_documents:
        line += f"; pinned {', '.join(routing.pinned_documents)}"
    if (versions := routing.versions) is not None:
        line += (
            f"; preferred version {', '.join(versions.versions)} ({len(versions.demoted_documents)} documents after)"
        )
    return line + " (--no-route to search the whole text)"


RARE_OUTCOMES = frozenset({"superseded", "refused"})
"""Counts the text summary leaves out when zero: `superseded` (a newer version or a delete of the same
document took over while this run ingested it) and `refused` (owned by another user) seldom happen in a
CLI run. `--json` always has every count."""


def render_summary(
    summary: Mapping[str, int],
    failures: Sequence[Mapping[str, str]],
    elapsed: object,
    excluded_by: Mapping[str, int] | None = None,
) -> str:
    """The ingest summary line with the run's wall time, then each failure with its reason. The count of
    files left out is followed by the count of each rule that left them out."""
    rules = ", ".join(f"{rule} {count}" for rule, count in (excluded_by or {}).items())
    counts = [
        f"{key.replace('_', ' ')}: {value}" + (f" ({rules})" if key == "excluded" and rules else "")
        for key, value in summary.items()
        if value or key not in RARE_OUTCOMES
    ]
    line = ", ".join([*counts, f"elapsed: {elapsed}"])
    return "\n".join([line, *(f"  FAILED {f['path']}: {f['error']}" for f in failures)])


EVALUATION_COLUMNS = ("ndcg@10", "recall@10", "recall@100", "mrr@10", "query_p50_ms", "query_p95_ms")
"""The table's columns, named as `citewise eval --json` names them."""


def render_evaluation(summaries: Sequence[Mapping[str, Any]]) -> str:
    """`citewise eval` as text: one row per run (metrics, latency), the settings of each run, then what
    every run shares (queries, embedder, backend, ingest and total time)."""
    rows = [f"{'run':<8}" + "".join(f"{name:>14}" for name in EVALUATION_COLUMNS)]
    rows += [
        f"{s['mode']:<8}"
        + "".join(f"{s[name]:>14.1f}" if name.endswith("_ms") else f"{s[name]:>14.4f}" for name in EVALUATION_COLUMNS)
        for s in summaries
    ]
    rows.append("")
    rows += [f"{s['mode']:<8}" + ", ".join(f"{key} {value}" for key, value in s["fusion"].items()) for s in summaries]
    first = summaries[0]
    rows.append(
        f"{first['queries']} queries, embedder {first['embedder']}, backend {_backend(first['backend'])}, "
        f"ingest {first['ingest_s']} s, {first['elapsed_s']} s in all"
    )
    return "\n".join(rows)


def _backend(described: Mapping[str, Any]) -> str:
    """`local`, or `opensearch 2.19.1, index citewise-eval-1a2b (deleted)`."""
    text = " ".join(str(described[key]) for key in ("name", "version") if key in described)
    if "index" in described:
        text += f", index {described['index']} ({'kept' if described.get('kept') else 'deleted'})"
    return text


ANSWER_MEASURES = (
    ("contains_gold", "(a) answer contains a gold answer", "contains_gold", "answerable"),
    ("unanswerable_refused", "(b) unanswerable refused", "unanswerable_refused", "unanswerable"),
    ("wrongly_refused", "(c) answerable wrongly refused", "wrongly_refused", "answerable"),
    ("citation_precision", "(d) citation precision", "citations_with_gold", "citations"),
)
"""The measures of `citewise eval --answers`: key, label, and the counts whose ratio it is."""


def render_turn(turn: TurnContext) -> str:
    """Where an answer sits in its conversation: the id to continue it, and what retrieval was asked."""
    lines = [
        f"  Conversation {turn.conversation_id}, turn {turn.turn}",
        f"  Feedback: citewise feedback give {turn.response_id} --helpful (or --not-helpful)",
    ]
    if turn.rewriter != AS_ASKED:
        lines.append(f"  Asked as ({turn.rewriter}): {turn.standalone_question}")
    if turn.rewrite_notice:
        lines.append(f"  note: {turn.rewrite_notice}")
    return "\n".join(lines)


def render_conversation(conversation: Conversation) -> str:
    """A conversation's turns, oldest first: each question, what retrieval was asked, and the answer."""
    lines = [f"{conversation.title}  ({conversation.conversation_id}, {conversation.turns} turns)"]
    for turn in conversation.history:
        lines += ["", f"[{turn.index}] {turn.at:%Y-%m-%d %H:%M}  {turn.question}"]
        if turn.standalone_question != turn.question:
            lines.append(f"    asked as: {turn.standalone_question}")
        if turn.status is TurnStatus.INTERRUPTED:
            lines.append("    (interrupted: no answer was kept)")
        else:
            lines.append(textwrap.fill(turn.answer, WIDTH, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(lines)


def render_answers(report: Mapping[str, Any]) -> str:
    """`citewise eval --answers`: one column per part of the split, each measure as a percentage with
    the counts it comes from, then what ran on which data and how long it took."""
    parts = list(report["splits"].values())

    def row(label: str, cells: Sequence[str]) -> str:
        return f"{label:<36}" + "".join(f"{cell:>18}" for cell in cells)

    rows = [row("", list(report["splits"]))]
    for key, label, part, whole in ANSWER_MEASURES:
        cells = []
        for summary in parts:
            counts = {**summary["counts"], "answerable": summary["answerable"], "unanswerable": summary["unanswerable"]}
            share = "-" if summary[key] is None else f"{100 * summary[key]:.1f}%"
            cells.append(f"{share} {counts[part]}/{counts[whole]}")
        rows.append(row(label, cells))
    rows.append(row("questions (answerable)", [f"{s['questions']} ({s['answerable']})" for s in parts]))
    rows.append(row("answer length, words (mean)", [str(s["answer_words"]) for s in parts]))
    data = report["data"]
    rows.append(
        f"\nSQuAD 2.0, {data['file']}: {data['articles']} articles, {data['paragraphs']} paragraphs ingested\n"
        f"embedder {report['embedder']}, synthesizer {report['synthesizer']}, {report['search_mode']} search, "
        f"top {report['top_k']}"
    )
    rows.append(
        f"ingest {report['ingest_s']} s; per question p50 {report['question_p50_ms']} ms, "
        f"p95 {report['question_p95_ms']} ms; {report['elapsed_s']} s in all"
    )
    return "\n".join(rows)


def render_usage(report: UsageReport) -> str:
    """A usage report: every counter's total over the range, then each day's nonzero counters."""
    lines = [f"usage of {report.tenant_id}, {report.from_day} to {report.to_day} (UTC days)", ""]
    width = max(len(name) for name in type(report.total).model_fields)
    lines += [f"  {name:<{width}}  {value:>12,}" for name, value in report.total]
    if report.total.embedding_tokens_estimated:
        lines.append("  (estimated tokens: counted as words and marks where the embedder reports none)")
    if report.cost is not None:
        lines.append(f"  {'estimated cost':<{width}}  {_cost(report.cost):>12}  (model prices only)")
    if report.stored is not None:
        stored = report.stored
        lines.append(
            f"  stored now: {stored.documents:,} documents, {stored.chunks:,} chunks, "
            f"{stored.bytes:,} bytes of originals"
        )
    lines.append("")
    lines += [
        f"{day.day}  " + "  ".join(f"{name}={value:,}" for name, value in day.counts.nonzero().items())
        for day in report.days
    ] or ["no usage in this range"]
    return escape_terminal_controls("\n".join(lines))


def render_erasure(erasure: Erasure) -> str:
    """An erasure's record: its status, who asked and when, and per store what went and what remains."""
    finished = erasure.finished_at.isoformat() if erasure.finished_at else "not yet"
    lines = [
        f"erasure of {erasure.tenant_id}: {erasure.status.value}",
        f"  asked by {erasure.requested_by}, started {erasure.started_at.isoformat()}, finished {finished}",
        f"  {erasure.steps} delete steps",
        "",
        f"  {'store':<10} {'deleted':>10} {'remaining':>10}",
    ]
    for part in erasure.stores:
        remaining = "-" if part.remaining is None else f"{part.remaining:,}"
        note = "  kept (billing)" if part.kept else ""
        lines.append(f"  {part.store:<10} {part.deleted:>10,} {remaining:>10}{note}")
    for part in erasure.stores:
        if part.key is not None:  # search mode s3vectors with a key per tenant
            lines.append(
                f"  {part.store}: key {part.key.key_arn} deleted by KMS on {part.key.deletion_date.isoformat()}"
            )
    return escape_terminal_controls("\n".join(lines))


def render_quotas(status: QuotaStatus) -> str:
    """A tenant's quotas: each limit, its source and the use it is checked against."""
    used = {
        "max_documents": status.stored.documents,
        "max_stored_bytes": status.stored.bytes,
        "pages_per_day": status.today.pages,
        "generation_tokens_per_day": status.today.generation_tokens,
    }
    width = max(len(name) for name in status.quotas)
    lines = [f"quotas of {status.tenant_id} (use of {status.today.day}, UTC)", ""]
    for name, quota in status.quotas.items():
        if quota.limit is not None:
            limit = f"{quota.limit:,}"
        else:
            limit = "a minute's rate" if name == "query_burst" else "no limit"
        use = f"  used {used[name]:,}" if name in used else ""
        lines.append(f"  {name:<{width}}  {limit:>16}  ({quota.source}){use}")
    lines += [
        "",
        f"stored: {status.stored.documents:,} documents, {status.stored.chunks:,} chunks, "
        f"{status.stored.bytes:,} bytes",
    ]
    return escape_terminal_controls("\n".join(lines))


def render_tenants_usage(page: TenantUsagePage) -> str:
    """The operator's view: one line per tenant with the counters people ask about first, and its cost."""
    columns = ("ingested", "pages", "queries", "searches", "gen tokens", "stored docs")
    header = f"{'tenant':<24} " + " ".join(f"{name:>11}" for name in columns) + f" {'cost':>14}"
    lines = [f"usage of every tenant, {page.from_day} to {page.to_day} (UTC days)", "", header]
    for item in page.items:
        t = item.total
        lines.append(
            f"{item.tenant_id:<24} {t.documents_ingested:>11,} {t.pages:>11,} {t.rest_queries + t.mcp_queries:>11,} "
            f"{t.rest_searches + t.mcp_searches:>11,} {t.generation_input_tokens + t.generation_output_tokens:>11,} "
            f"{item.stored.documents:>11,} "
            f"{_cost(item.cost) if item.cost else '-':>14}"
        )
    if not page.items:
        lines.append("no tenant yet")
    return escape_terminal_controls("\n".join(lines))


def _cost(cost: CostEstimate) -> str:
    return f"{cost.total:,.4f} {cost.currency}"


def render_audit_record(record: AuditRecord) -> str:
    """One record on one line: time, tenant, who, action, outcome, the ids, the request id."""
    who = f"operator:{record.user_id}" if record.operator else (record.user_id or "-")
    ids = ",".join(record.resources) + (f" (+{record.resources_omitted})" if record.resources_omitted else "")
    line = (
        f"{record.time:%Y-%m-%dT%H:%M:%S}Z  {record.tenant_id or '-'}  {who}  {record.action}  {record.outcome}"
        f"  [{ids}]  {record.channel}:{record.request_id}"
    )
    return escape_terminal_controls(line)
