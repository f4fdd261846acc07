"""The `citewise` command: ingest, query, search and manage documents on the embedded local stack.

The CLI is a client of the library like a Lambda handler is: it builds a `Caller` from its flags (the
local stand-in for an authenticated identity), calls one library function, and renders the result.
Every error becomes one line `error: CODE: message` on stderr; nothing is a traceback. Exit status: 0
success; 1 the command ran but something failed (a document FAILED); 2 a usage, input or configuration
error (the same command fails again); 3 the answer model's endpoint failed or a backend throttled (worth
retrying later). The embedded index and model are files: their errors are configuration (2).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic

from citewise import __version__
from citewise.domain.access import may_modify
from citewise.domain.errors import CitewiseError, GenerationError, ThrottledError, ValidationError
from citewise.domain.models import Answer, Caller, Document, DocumentStatus, Filter, SearchRequest, Visibility
from citewise.domain.objects import SourceObject
from citewise.domain.provenance import channel_of
from citewise.domain.tenancy import document_id, validate_tenant_id
from citewise.domain.tenant_settings import TenantSettings
from citewise.ingest.documents import delete_document, visible_document
from citewise.ingest.pipeline import IngestResult, Outcome
from citewise.query.answering import answer_question
from citewise.query.tenant_config import save_tenant_settings, tenant_settings_of
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import McpSettings, Settings, load_settings
from citewise_local.folders import FOLDER_CHANNEL, scan
from citewise_local.render import (
    render_answer,
    render_comparison,
    render_documents,
    render_hits,
    render_routing,
    render_summary,
)

EXIT_FAILED = 1
"""The command ran, but something in it failed (a document FAILED to ingest)."""
EXIT_ERROR = 2
"""Usage or input: the same command will fail again (argparse uses 2 for usage errors too)."""
EXIT_UNAVAILABLE = 3
"""The answer model's endpoint failed, or a backend throttled: the same command may succeed later."""
_UNAVAILABLE = (GenerationError, ThrottledError)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    args = _parser().parse_args(argv)
    overrides = {} if args.home is None else {"home": args.home}
    try:
        if getattr(args, "own_services", False):
            return int(args.run(args, load_settings(**overrides)))
        services = build_services(load_settings(**overrides))
    except CitewiseError as exc:
        return _fail(exc)
    try:
        command: Callable[[argparse.Namespace, Services], int] = args.run
        return command(args, services)
    except CitewiseError as exc:
        return _fail(exc)
    except pydantic.ValidationError as exc:
        return _fail(ValidationError(_pydantic_message(exc)))
    finally:
        services.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="citewise", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"citewise {__version__}")
    parser.add_argument("--home", type=Path, help="where the local index lives (default $CITEWISE_HOME or ~/.citewise)")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    ingest = commands.add_parser("ingest", help="index files and folders (re-running skips unchanged files)")
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    _identity(ingest)
    ingest.add_argument("--visibility", choices=[v.value for v in Visibility], default=Visibility.SHARED.value)
    ingest.add_argument("--json", action="store_true", help="print the summary as JSON")
    ingest.set_defaults(run=_ingest)

    for name, run, text in (
        ("query", _query, "answer a question with citations"),
        ("search", _search, "rank chunks for a query (retrieval only)"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("query")
        _identity(sub)
        sub.add_argument("--top-k", type=int, default=5)
        sub.add_argument("--min-score", type=float, default=0.0)
        sub.add_argument("--max-sources", type=int)
        sub.add_argument("--filter", type=_json_arg, help="Bedrock Knowledge Bases filter as JSON")
        sub.add_argument(
            "--no-route", action="store_true", help="search the whole text: no dates, sources or ids taken as filters"
        )
        sub.add_argument("--json", action="store_true")
        sub.set_defaults(run=run)

    docs = commands.add_parser("docs", help="list, show or delete documents").add_subparsers(required=True)
    listing = docs.add_parser("list", help="documents of the tenant visible to the user")
    _identity(listing)
    listing.add_argument("--status", choices=[s.value for s in DocumentStatus])
    listing.add_argument("--prefix", help="only paths starting with this")
    listing.add_argument(
        "--source", help="only documents from this source, the content's origin (exact: jira, confluence, ...)"
    )
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument("--cursor")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=_docs_list)
    for name, run, text in (
        ("show", _docs_show, "one document"),
        ("delete", _docs_delete, "remove a document"),
    ):
        sub = docs.add_parser(name, help=text)
        sub.add_argument("doc_id", metavar="ID")
        _identity(sub)
        sub.add_argument("--json", action="store_true")
        sub.set_defaults(run=run)

    tenant = commands.add_parser("settings", help="the tenant's ranking signals and routing vocabulary")
    actions = tenant.add_subparsers(required=True)
    show = actions.add_parser("show", help="the tenant's settings (absent fields: the deployment's defaults)")
    _identity(show)
    show.set_defaults(run=_settings_show)
    change = actions.add_parser("set", help="change settings (tenant admins: --group admin)")
    change.add_argument(
        "changes",
        type=_json_arg,
        metavar="JSON",
        help='fields to change, e.g. \'{"freshness_weight": 0.5, "source_credibility": {"community": 0.3}}\'; '
        "null returns a field to the default",
    )
    _identity(change)
    change.set_defaults(run=_settings_set)

    evaluate = commands.add_parser("eval", help="retrieval quality on a BEIR-format dataset")
    evaluate.add_argument("--dataset", type=Path, required=True, help="folder with corpus.jsonl, queries.jsonl, qrels")
    evaluate.add_argument("--mode", choices=["hybrid", "bm25", "vector"], default=None, help="default: the setting")
    evaluate.add_argument("--top-k", type=int, default=100, help="documents ranked per query (default 100)")
    evaluate.add_argument("--embedder", choices=["minilm", "hashing"], default=None, help="default: the setting")
    evaluate.add_argument("--per-query", type=Path, help="write each query's metrics and ranking here (JSON lines)")
    evaluate.add_argument(
        "--compare",
        action="store_true",
        help="one ingest, then hybrid, bm25, vector and plain RRF (k 60) of the same lists, side by side",
    )
    evaluate.add_argument("--json", action="store_true", help="print one JSON object (a list with --compare)")
    evaluate.set_defaults(run=_eval, own_services=True)

    serve = commands.add_parser("serve", help="run the HTTP API locally, calling the Lambda handlers")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080; 0: any free port)")
    serve.set_defaults(run=_serve, own_services=True)

    mcp = commands.add_parser("mcp", help="serve the read-only agent tools (MCP) on stdio, as one user")
    _identity(mcp)
    mcp.add_argument("--profiles", type=Path, help="a TOML file of tool profiles (default $CITEWISE_MCP_PROFILES)")
    mcp.set_defaults(run=_mcp, own_services=True)

    token = commands.add_parser("token", help="print a bearer token for the local server (Cognito's claims)")
    token.add_argument("--tenant", required=True, help="tenant id, the token's custom:tenant_id")
    token.add_argument("--user", required=True, help="user id, the token's sub")
    token.add_argument("--group", action="append", default=[], help="a cognito:groups entry (repeatable)")
    token.add_argument("--ttl", type=int, default=3600, help="seconds until it expires (default 3600)")
    token.set_defaults(run=_token, own_services=True)

    demo = commands.add_parser("demo", help="ingest the sample corpus and answer its questions")
    demo.add_argument("--corpus", type=Path, default=Path("samples/corpus"))
    demo.add_argument("--questions", type=Path, default=Path("samples/questions.json"))
    demo.set_defaults(run=_demo)
    return parser


def _identity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", required=True, help="tenant id (on AWS it comes from the identity)")
    parser.add_argument("--user", default="local", help="user id, for private documents (default: local)")
    parser.add_argument(
        "--group", action="append", default=[], help="a group of the user, e.g. admin (repeatable; default: none)"
    )


def _caller(args: argparse.Namespace) -> Caller:
    return Caller(tenant_id=validate_tenant_id(args.tenant), user_id=args.user, groups=tuple(args.group))


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc


def _request(args: argparse.Namespace) -> SearchRequest:
    return SearchRequest(
        query=args.query,
        top_k=args.top_k,
        min_score=args.min_score,
        max_sources=args.max_sources,
        filters=Filter.model_validate(args.filter) if args.filter is not None else None,
        route=not args.no_route,
    )


# --- commands --------------------------------------------------------------------------------------


def _ingest(args: argparse.Namespace, services: Services) -> int:
    caller = _caller(args)
    found = scan(args.paths, caller.tenant_id, caller.user_id, Visibility(args.visibility))
    results, unrecorded = _ingest_all(services, found.objects)
    seen = {obj.path for obj in found.objects}
    for prefix in found.prefixes:
        for document in _all_documents(services, caller.tenant_id, prefix):
            # Only what a folder sync put there, and only what this caller may change: never a document
            # that came through the API or the bucket, never a colleague's.
            gone = document.path not in seen and channel_of(document) == FOLDER_CHANNEL
            if gone and may_modify(caller, document):
                services.ingestor.delete(caller.tenant_id, document.doc_id)
                results.append(IngestResult(Outcome.DELETED, document))
    counts = Counter(result.outcome.value for result in results)
    summary = {
        "scanned": len(found.objects) + len(found.invalid),
        **{outcome.value: counts[outcome.value] for outcome in Outcome},
        "skipped": len(found.skipped),
        "embedded_chunks": sum(r.embedded for r in results),
        "reused_chunks": sum(r.reused for r in results),
    }
    failures = [
        {"path": r.document.path, "error": r.document.error or ""} for r in results if r.outcome is Outcome.FAILED
    ]
    failures += unrecorded + [{"path": path, "error": reason} for path, reason in found.invalid]
    summary["failed"] = len(failures)
    if args.json:
        print(json.dumps({**summary, "failures": failures}, indent=2))
    else:
        print(render_summary(summary, failures))
    return EXIT_FAILED if failures else 0


def _ingest_all(services: Services, objects: list[SourceObject]) -> tuple[list[IngestResult], list[dict[str, str]]]:
    """Ingest each object; one failure never stops the run. Returns results and unrecorded failures."""
    from tqdm import tqdm

    results: list[IngestResult] = []
    unrecorded: list[dict[str, str]] = []
    with tqdm(total=len(objects), unit="doc", disable=len(objects) < 2 or None, file=sys.stderr) as progress:
        for obj, outcome in services.ingestor.ingest_many(objects):
            progress.update()
            if isinstance(outcome, IngestResult):
                results.append(outcome)
                continue
            # Transient failures are already recorded as FAILED; invalid paths have no record.
            document = services.registry.get(obj.tenant_id, document_id(obj.tenant_id, obj.path))
            if document is None:
                unrecorded.append({"path": obj.path, "error": f"{outcome.code}: {outcome.message}"})
            else:
                results.append(IngestResult(Outcome.FAILED, document))
    return results, unrecorded


def _all_documents(services: Services, tenant_id: str, prefix: str) -> list[Document]:
    documents: list[Document] = []
    cursor = None
    while True:
        page = services.registry.list(tenant_id, path_prefix=prefix, limit=1000, cursor=cursor)
        documents += page.items
        if page.next_cursor is None:
            return documents
        cursor = page.next_cursor


def _query(args: argparse.Namespace, services: Services) -> int:
    answer = answer_question(services.retriever, services.synthesizer, _caller(args), _request(args))
    routed = render_routing(answer.routing) if answer.routing else ""
    print(answer.model_dump_json(indent=2) if args.json else "\n".join(filter(None, [routed, render_answer(answer)])))
    return 0


def _search(args: argparse.Namespace, services: Services) -> int:
    retrieval = services.retriever.retrieve(_caller(args), _request(args))
    if args.json:
        hits = [hit.model_dump(mode="json") for hit in retrieval.hits]
        print(json.dumps({"hits": hits, "routing": retrieval.routing.model_dump(mode="json")}, indent=2))
    else:
        print("\n".join(filter(None, [render_routing(retrieval.routing), render_hits(retrieval.hits)])))
    return 0


def _docs_list(args: argparse.Namespace, services: Services) -> int:
    caller = _caller(args)
    page = services.registry.list(
        caller.tenant_id,
        visible_to=caller.user_id,
        status=DocumentStatus(args.status) if args.status else None,
        source=args.source,
        path_prefix=args.prefix,
        limit=args.limit,
        cursor=args.cursor,
    )
    print(page.model_dump_json(indent=2) if args.json else render_documents(page.items, page.next_cursor))
    return 0


def _visible_document(args: argparse.Namespace, services: Services) -> Document:
    """The document if the caller may read it; NOT_FOUND either way otherwise, revealing nothing."""
    return visible_document(services.registry, _caller(args), args.doc_id)


def _docs_show(args: argparse.Namespace, services: Services) -> int:
    document = _visible_document(args, services)
    print(document.model_dump_json(indent=2) if args.json else render_documents([document], None, detail=True))
    return 0


def _docs_delete(args: argparse.Namespace, services: Services) -> int:
    document = delete_document(services.ingestor, services.blobs, _caller(args), args.doc_id)
    print(json.dumps({"deleted": document.doc_id}) if args.json else f"deleted {document.path} ({document.doc_id})")
    return 0


def _settings_show(args: argparse.Namespace, services: Services) -> int:
    print(tenant_settings_of(services.registry, _caller(args)).model_dump_json(indent=2, exclude_none=True))
    return 0


def _settings_set(args: argparse.Namespace, services: Services) -> int:
    """The stored settings with the given fields replaced (the API's PUT replaces the whole document)."""
    if not isinstance(args.changes, dict):
        raise ValidationError("settings changes must be a JSON object of fields")
    caller = _caller(args)
    current = tenant_settings_of(services.registry, caller).model_dump(exclude={"updated_at", "updated_by"})
    changed = TenantSettings.model_validate({**current, **args.changes})
    saved = save_tenant_settings(services.registry, caller, changed, datetime.now(UTC))
    print(saved.model_dump_json(indent=2, exclude_none=True))
    return 0


def _demo(args: argparse.Namespace, services: Services) -> int:
    questions = json.loads(args.questions.read_text(encoding="utf-8"))
    caller = Caller(tenant_id="demo", user_id="demo")
    found = scan([args.corpus], caller.tenant_id, caller.user_id, Visibility.SHARED)
    results, unrecorded = _ingest_all(services, found.objects)
    counts = Counter(result.outcome.value for result in results)
    print(
        f"Ingested {len(results)} documents from {args.corpus} with the {services.embedder.name} embedder: "
        + ", ".join(
            f"{counts[o.value]} {o.value}" for o in (Outcome.NEW, Outcome.MODIFIED, Outcome.UNCHANGED, Outcome.FAILED)
        )
        + "\n"
    )
    for number, item in enumerate(questions, start=1):
        answer: Answer = answer_question(
            services.retriever, services.synthesizer, caller, SearchRequest(query=item["question"], top_k=5)
        )
        print(f"Q{number}. {item['question']}\n{render_answer(answer)}\n")
    return 0 if counts[Outcome.FAILED.value] == 0 and not unrecorded else EXIT_FAILED


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    """Ingest the dataset into its own index under the home (reused when unchanged) and score it: in the
    configured mode, or with `--compare` in every mode and plain RRF, one ingest for all."""
    from tqdm import tqdm

    from citewise_local import evaluation

    dataset = evaluation.load_beir(args.dataset)
    embedder = args.embedder or settings.embedder
    home = evaluation.index_home(settings.home_dir, dataset, embedder, settings.chunk_tokens, settings.chunk_overlap)
    base = settings.model_copy(
        update={"home": home, "embedder": embedder, "search_mode": args.mode or settings.search_mode}
    )
    runs = evaluation.comparison(base) if args.compare else {base.search_mode: base}
    quiet = None if not args.json else True
    ingest_s: float | None = None
    reports = []
    for name, run_settings in runs.items():
        services = build_services(run_settings)
        try:
            if ingest_s is None:
                ingest_s, _ = evaluation.ingest(
                    services,
                    dataset,
                    lambda items: tqdm(items, desc="ingest", unit="doc", file=sys.stderr, disable=quiet),
                )
            results = evaluation.run_queries(
                services,
                dataset,
                args.top_k,
                lambda items, name=name: tqdm(items, desc=name, unit="q", file=sys.stderr, disable=quiet),  # type: ignore[misc]
            )
        finally:
            services.close()
        fusion = evaluation.fusion_settings(run_settings)
        reports.append(evaluation.report(name, services.embedder.name, ingest_s, results, fusion))
    if args.per_query:
        with args.per_query.open("w", encoding="utf-8") as stream:
            for report in reports:
                for result in report.per_query:
                    row = {"query_id": result.query_id, **result.metrics, "ranked": result.ranked[:10]}
                    stream.write(json.dumps({"run": report.mode, **row} if args.compare else row) + "\n")
    summaries = [report.summary() for report in reports]
    if args.json:
        print(json.dumps(summaries if args.compare else summaries[0]))
    elif args.compare:
        print(render_comparison(summaries))
    else:
        print("\n".join(f"{key:>14}: {value}" for key, value in summaries[0].items()))
    return 0


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve until Ctrl-C; the URL goes to stdout, one line per request to stderr."""
    from citewise_local.server import LocalServer

    # Upload URLs point at the address served, unless CITEWISE_PUBLIC_URL says how clients reach it.
    public_url = settings.public_url if "public_url" in settings.model_fields_set else None
    try:
        server = LocalServer((args.host, args.port), settings, public_url=public_url)
    except (OSError, OverflowError) as exc:  # address in use or unknown; port out of range
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValidationError(f"cannot listen on {args.host}:{args.port}: {reason}") from exc
    home = f" --home {args.home}" if args.home is not None else ""
    print(f"citewise API on {server.url} (Swagger UI: {server.url}/v1/docs); Ctrl-C stops it", flush=True)
    print(f"token: citewise{home} token --tenant T --user U, sent as 'Authorization: Bearer <token>'", flush=True)
    stops = _stop_on_sigterm()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        stops()
    return 0


def _stop_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM stop `serve` as Ctrl-C does (queued uploads still get ingested); returns the undo."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)

    def undo() -> None:
        signal.signal(signal.SIGTERM, previous)

    return undo


def _mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Serve MCP on stdio until the client closes it; the identity is the flags', fixed for the session."""
    from citewise.mcp.profiles import load_profiles
    from citewise.mcp.tools import Toolbox
    from citewise_local.mcp_stdio import serve_stdio

    overrides: dict[str, object] = {"home": settings.home}
    if args.profiles is not None:
        overrides["mcp_profiles"] = args.profiles
    mcp_settings = load_settings(McpSettings, **overrides)
    caller = _caller(args)
    services = build_services(mcp_settings)
    try:
        toolbox = Toolbox(
            services,
            profiles=load_profiles(mcp_settings.mcp_profiles),
            min_relevance_score=mcp_settings.mcp_min_relevance_score,
        )
        serve_stdio(toolbox, caller)
    finally:
        services.close()
    return 0


def _token(args: argparse.Namespace, settings: Settings) -> int:
    from citewise_local.auth import TOKEN_PURPOSE, local_key, mint_token

    key = local_key(settings.home_dir, TOKEN_PURPOSE)
    print(mint_token(key, tenant_id=args.tenant, user_id=args.user, groups=args.group, ttl=args.ttl))
    return 0


# --- errors ----------------------------------------------------------------------------------------


def _fail(error: CitewiseError) -> int:
    print(f"error: {error.code}: {error.message}", file=sys.stderr)
    return EXIT_UNAVAILABLE if isinstance(error, _UNAVAILABLE) else EXIT_ERROR


def _pydantic_message(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in exc.errors(include_url=False)
    )
