"""`citewise sources add|list|show|refresh|remove`: a tenant's web sources on the local home (docs/sources.md).

The home's owner acts as the tenant's admin (as for `citewise credential`). `refresh` runs one refresh
now, in this process, with a progress bar on a terminal and a summary line at the end; `citewise serve`
runs the due ones by itself (`citewise_local.refresh_loop`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from citewise.domain.access import ADMIN_GROUP
from citewise.domain.models import Caller
from citewise.domain.sources import (
    MAX_DEPTH,
    RefreshRun,
    RefreshSummary,
    Source,
    SourceCategory,
    SourceKind,
    SourceSpec,
)
from citewise.domain.tenancy import validate_tenant_id
from citewise.ingest.sources import hold_source, register_source, remove_source, visible_source
from citewise.runtime.services import Services
from citewise_local.render import escape_terminal_controls

if TYPE_CHECKING:
    from tqdm import tqdm

    Commands = argparse._SubParsersAction[argparse.ArgumentParser]
CLI_ADMIN = "citewise-cli"
"""Who registers sources from the command line: the home's owner, as the tenant's admin (their owner)."""


def add_source_commands(
    commands: Commands,
    command: Callable[..., argparse.ArgumentParser],
    choices: Callable[[argparse.ArgumentParser, str], Commands],
) -> None:
    """Add `citewise sources ACTION` to the CLI's `commands` (with its `_command` and `_choices` helpers)."""
    actions = choices(command(commands, "sources", "register, list, refresh or remove web sources"), "ACTION")
    adding = command(
        actions,
        "add",
        "register a web source: a sitemap, a URL prefix to crawl, or a list of URLs",
        "citewise sources add --tenant acme --sitemap https://docs.python.org/sitemap.xml --category official_docs",
        "citewise sources add --tenant acme --crawl https://fastapi.tiangolo.com/tutorial/ --depth 2",
        "citewise sources add --tenant acme --url https://example.com/a --url https://example.com/b",
    )
    found = adding.add_mutually_exclusive_group(required=True)
    found.add_argument("--sitemap", metavar="URL", help="a sitemap (or sitemap index): its pages")
    found.add_argument("--crawl", metavar="URL", help="a URL prefix: the page there and the links under it")
    found.add_argument("--url", metavar="URL", action="append", help="a page (repeatable)")
    adding.add_argument(
        "--depth", type=int, default=2, help=f"links followed from the prefix, 0-{MAX_DEPTH} (default 2)"
    )
    adding.add_argument(
        "--category",
        choices=[category.value for category in SourceCategory],
        default=SourceCategory.OTHER.value,
        help="what kind of knowledge: its documents' source, the key of the credibility table (default: other)",
    )
    adding.add_argument("--every", metavar="HOURS", type=int, help="hours between refreshes (default: by category)")
    versions = adding.add_mutually_exclusive_group()
    versions.add_argument("--version", help="the version every page is about, e.g. 3.12")
    versions.add_argument(
        "--version-template", metavar="TEMPLATE", help="where the version is in a URL, e.g. '/{version}/'"
    )
    adding.add_argument("--max-pages", type=int, default=500, help="pages one refresh handles at most (default 500)")
    adding.add_argument("--name", default="", help="a name for listings")
    _common(adding, "the source")
    adding.set_defaults(run=_add)
    listing = command(
        actions, "list", "the tenant's sources and their last refresh", "citewise sources list --tenant acme"
    )
    _common(listing, "the sources")
    listing.set_defaults(run=_list)
    for name, text, run in (
        ("show", "one source, its last refresh and the one running", _show),
        ("refresh", "refresh one source now, here, with progress (a second refresh is refused)", _refresh),
        ("remove", "remove a source and every document it brought", _remove),
    ):
        action = command(actions, name, text, f"citewise sources {name} ID --tenant acme")
        action.add_argument("source_id", metavar="ID", help="the source's id (sources list prints it)")
        _common(action, "the result")
        action.set_defaults(run=run)


def _common(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--tenant", help="tenant id (or CITEWISE_TENANT)")
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def _admin(args: argparse.Namespace) -> Caller:
    return Caller(tenant_id=validate_tenant_id(args.tenant), user_id=CLI_ADMIN, groups=(ADMIN_GROUP,))


def _add(args: argparse.Namespace, services: Services) -> int:
    kind = SourceKind.SITEMAP if args.sitemap else SourceKind.CRAWL if args.crawl else SourceKind.URLS
    fields: dict[str, Any] = {
        "kind": kind,
        "category": args.category,
        "refresh_hours": args.every,
        "version": args.version,
        "version_template": args.version_template,
        "depth": args.depth,
        "max_pages": args.max_pages,
        "name": args.name,
    }
    if kind is SourceKind.URLS:
        fields["urls"] = args.url
    else:
        fields["url"] = args.sitemap or args.crawl
    source = register_source(
        services.sources,
        _admin(args),
        SourceSpec(**fields),
        now=datetime.now(UTC),
        allow_loopback=services.settings.web_allow_loopback,
    )
    print(source.model_dump_json(indent=2) if args.json else f"registered {source.source_id}")
    return 0


def _list(args: argparse.Namespace, services: Services) -> int:
    sources = services.sources.tenant_sources(validate_tenant_id(args.tenant))
    if args.json:
        print("[" + ",".join(source.model_dump_json() for source in sources) + "]")
        return 0
    for source in sources:
        print(escape_terminal_controls(_line(source)))
    return 0


def _line(source: Source) -> str:
    spec = source.spec
    where = spec.url or f"{len(spec.urls)} URLs"
    last = source.last_run
    state = "running" if source.running else _summary(last) if last else "never refreshed"
    return f"{source.source_id}  {spec.kind.value}  {spec.category.value}  {where}  {state}"


def _summary(run: RefreshRun) -> str:
    s = run.summary
    text = (
        f"{s.requests} requests, {s.not_modified} not modified, {s.unchanged} unchanged, {s.changed} changed, "
        f"{s.new} new, {s.removed} removed, {s.failed} failed"
    )
    return text + (f" (stopped at {s.capped})" if s.capped else "")


def _show(args: argparse.Namespace, services: Services) -> int:
    source = visible_source(services.sources, _admin(args), args.source_id)
    print(source.model_dump_json(indent=2) if args.json else escape_terminal_controls(_line(source)))
    return 0


def _refresh(args: argparse.Namespace, services: Services) -> int:
    caller = _admin(args)
    visible_source(services.sources, caller, args.source_id)
    message = hold_source(services.sources, caller.tenant_id, args.source_id, now=datetime.now(UTC))
    with PagesBar() as bar:
        run = services.refresher(progress=bar).run(message)
    if run is None:
        print("the refresh was taken over or the source removed meanwhile", file=sys.stderr)
        return 1
    print(run.model_dump_json(indent=2) if args.json else _summary(run))
    return 0


def _remove(args: argparse.Namespace, services: Services) -> int:
    removed = remove_source(
        services.sources, services.document_writer, _admin(args), args.source_id, now=datetime.now(UTC)
    )
    print(f'{{"removed_documents": {removed}}}' if args.json else f"removed {args.source_id} and {removed} documents")
    return 0


class PagesBar:
    """A refresh's progress on a terminal: pages visited of those queued so far (the total grows as a crawl
    finds links); nothing when stderr is not a terminal."""

    def __init__(self) -> None:
        self._bar: tqdm[Any] | None = None
        self.enabled = sys.stderr.isatty()

    def __call__(self, summary: RefreshSummary) -> None:
        if not self.enabled:
            return
        visited = summary.not_modified + summary.unchanged + summary.changed + summary.new + summary.gone
        visited += summary.failed
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(desc="pages", unit="page", file=sys.stderr)
        self._bar.total = visited + summary.pending
        self._bar.update(visited - self._bar.n)

    def __enter__(self) -> PagesBar:
        return self

    def __exit__(self, *_: object) -> None:
        if self._bar is not None:
            self._bar.close()
