"""A real documentation site served on 127.0.0.1, with the behaviours a refresh must cope with.

The pages: Python 3.11's documentation as Sphinx rendered it, from Debian's `python3.11-doc` package
(`python_docs()`; `documentation("mkdocs")` gives MkDocs' own, from `mkdocs-doc`). Downloaded once with
`apt-get download`, only the HTML pages kept, cached in `$CITEWISE_DOCSITE_CACHE`, else
/var/cache/citewise-docsite as root, else ~/.cache/citewise-docsite; a test that needs them skips, saying
why, where apt cannot fetch them. Any folder of `.html` files serves as well.

Usage:

    with DocSite(python_docs(), pages=["library/json.html", "library/csv.html"]) as site:
        fetcher = WebPageFetcher(allow_loopback=True, limits=FetchLimits(host_delay=0))
        page = fetcher.fetch(site.url + "/library/json.html")
        site.change("library/json.html")        # its next answer differs (new ETag, Last-Modified, text)
        site.remove("library/csv.html")         # answers 404 from now on (`gone_status=410` for 410)
        assert site.count("/library/json.html") == 1

What it serves (`site.url` is `http://127.0.0.1:<port>`, or https with `tls`):
- every `.html` file under the root at its relative path (a folder's path ending in `/` serves its
  `index.html`, as documentation hosts do), with a strong `ETag` (a hash of the bytes
  served) and `Last-Modified`, answering `304` to a matching `If-None-Match` or a not older
  `If-Modified-Since`;
- `/sitemap.xml`: a `<urlset>` of `pages` (default: every page) with each page's `<lastmod>`;
  `/sitemap_index.xml`: a `<sitemapindex>` naming `/sitemap.xml`;
- `/robots.txt`: `robots` (default: `User-agent: *` / `Disallow: /private/` with the sitemap named), and
  `/private/secret.html` for it to forbid;
- `/old/<path>`: 301 to `/<path>`; `/loop`: a redirect to itself;
- `/hostile/loopback`: 302 to `hostile_loopback_target` (default: another 127.0.0.1 port) and
  `/hostile/metadata`: 302 to `http://169.254.169.254/latest/meta-data/` (a fetcher without its loopback
  switch refuses the first; every fetcher refuses the second, and nothing is ever sent there);
- `/slow.html`: headers, then the page after `slow_seconds` (default 5);
- `/huge.html`: `huge_bytes` (default 20 MiB) of HTML, streamed in 64 KiB writes, with no Content-Length;
- `/throttled.html`: 429 with `Retry-After: <retry_after>` for the next `throttle_count` requests, then
  the page;
- `/data.json`: an `application/json` body (a content type no parser takes);
- `/error.html`: 500; `/bomb.html`: a gzip body (`Content-Encoding: gzip`) of 50 KB that inflates to 50 MB.

`robots_status` (default 200) answers robots.txt with another status (404: no rules; 500: keep out).

`requests` records every request (method, path, request headers, status), in arrival order;
`count(path, status=None)` counts them. The server is a thread of the test's process; it stops when the
`with` block ends.
"""

from __future__ import annotations

import email.utils
import fcntl
import functools
import gzip
import hashlib
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DOCUMENTATION: dict[str, tuple[str, Path, str]] = {
    # name: (Debian package, its HTML folder, a page it has)
    "python": ("python3.11-doc", Path("usr/share/doc/python3.11/html"), "library/json.html"),
    "mkdocs": ("mkdocs-doc", Path("usr/share/doc/mkdocs/html"), "user-guide/configuration.html"),
}
"""Real documentation sites in Debian's packages: Python's (Sphinx) and MkDocs' own (its `mkdocs` theme)."""
METADATA_URL = "http://169.254.169.254/latest/meta-data/"
_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: the pages' first Last-Modified


@dataclass(frozen=True)
class Request:
    """One request as the site saw it."""

    method: str
    path: str
    headers: dict[str, str]
    status: int


def docsite_cache() -> Path:
    """Where the downloaded documentation is kept between runs."""
    configured = os.environ.get("CITEWISE_DOCSITE_CACHE")
    if configured:
        return Path(configured)
    return Path("/var/cache/citewise-docsite") if os.geteuid() == 0 else Path.home() / ".cache" / "citewise-docsite"


def python_docs() -> Path:
    """The HTML pages of Python 3.11's documentation (about 500), rendered by Sphinx."""
    return documentation("python")


def documentation(name: str) -> Path:
    """The HTML pages of a site of `DOCUMENTATION`, downloaded once; the test skips where apt cannot fetch
    Debian's package. Processes that ask at once (pytest-xdist's workers) take turns."""
    package, _, probe = DOCUMENTATION[name]
    root = docsite_cache() / package
    if (root / probe).is_file():
        return root
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        pytest.skip(f"the documentation site needs apt-get and dpkg-deb to fetch {package}")
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{package}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / probe).is_file():
            _install(name, root)
    return root


def _install(name: str, root: Path) -> None:
    package, folder, _ = DOCUMENTATION[name]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        if not _download(package, work) and os.geteuid() == 0:
            subprocess.run(["apt-get", "update", "-qq"], check=False, capture_output=True, timeout=600)
            _download(package, work)
        packages = sorted(work.glob("*.deb"))
        if not packages:
            pytest.skip(f"apt-get could not download {package}")
        subprocess.run(["dpkg-deb", "-x", str(packages[0]), str(work / "x")], check=True, timeout=600)
        staged = root.with_name(root.name + ".partial")
        shutil.rmtree(staged, ignore_errors=True)
        source = work / "x" / folder
        for page in source.rglob("*.html"):
            relative = page.relative_to(source)
            if relative.parts[0].startswith("_"):
                continue  # _sources, _static: not pages
            target = staged / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page.resolve(), target)
        shutil.rmtree(root, ignore_errors=True)
        staged.rename(root)  # whole or not at all: a run stopped half way leaves no partial cache


def _download(package: str, work: Path) -> bool:
    done = subprocess.run(
        ["apt-get", "download", "-qq", package], cwd=work, check=False, capture_output=True, timeout=600
    )
    return done.returncode == 0


class DocSite:
    """The site; see the module docstring for what it serves and how tests steer it."""

    def __init__(self, root: Path, *, pages: Sequence[str] | None = None, tls: ssl.SSLContext | None = None) -> None:
        """`pages` are those the sitemap lists (default: all); `tls` a server context to serve https with."""
        self.root = root
        self.pages = (
            list(pages) if pages is not None else sorted(str(path.relative_to(root)) for path in root.rglob("*.html"))
        )
        self.robots: str | None = None
        """robots.txt's text; None: `User-agent: *`, `Disallow: /private/` and the sitemap's URL."""
        self.slow_seconds = 5.0
        self.huge_bytes = 20 * 1024 * 1024
        self.throttle_count = 0
        self.retry_after: int | str = 1
        """The 429's Retry-After: seconds, or an HTTP date."""
        self.gone_status = 404
        self.robots_status = 200
        self.hostile_loopback_target = "http://127.0.0.1:9/"
        self.requests: list[Request] = []
        self._versions: dict[str, int] = {}
        self._removed: set[str] = set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._scheme = "http"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{self._scheme}://{host}:{port}"

    def __enter__(self) -> DocSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def change(self, page: str) -> None:
        """The page's next answers carry new text, a new ETag and a later Last-Modified."""
        with self._lock:
            self._versions[page.lstrip("/")] = self._versions.get(page.lstrip("/"), 0) + 1

    def remove(self, page: str) -> None:
        """The page answers `gone_status` from now on."""
        with self._lock:
            self._removed.add(page.lstrip("/"))

    def restore(self, page: str) -> None:
        """The page is served again."""
        with self._lock:
            self._removed.discard(page.lstrip("/"))

    def count(self, path: str | None = None, status: int | None = None) -> int:
        """Requests received (for `path`, with `status`, when given)."""
        with self._lock:
            return sum(
                1
                for request in self.requests
                if (path is None or request.path == path) and (status is None or request.status == status)
            )

    def page(self, page: str) -> tuple[bytes, float] | None:
        """The bytes the page is served with now and its Last-Modified (seconds), or None if it is not."""
        page = page.lstrip("/")
        if page.endswith("/"):
            page += "index.html"  # a crawl's prefix is a folder
        with self._lock:
            if page in self._removed:
                return None
            version = self._versions.get(page, 0)
        path = (self.root / page).resolve()
        if not path.is_relative_to(self.root.resolve()) or not path.is_file():
            return None
        body = path.read_bytes()
        if version:
            # Under the page's first heading, in its main content: a change its extracted text shows
            marker = f"<p>Changed for the {version}. time by the test.</p>".encode()
            if b"</h1>" in body:
                body = body.replace(b"</h1>", b"</h1>" + marker, 1)
            else:
                body = body.replace(b"</body>", marker + b"</body>", 1)
        return body, _EPOCH + version * 86_400

    def robots_txt(self) -> str:
        default = f"User-agent: *\nDisallow: /private/\nSitemap: {self.url}/sitemap.xml\n"
        return default if self.robots is None else self.robots

    def sitemap(self) -> bytes:
        entries = []
        for page in self.pages:
            served = self.page(page)
            if served is not None:
                lastmod = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(served[1]))
                entries.append(f"<url><loc>{self.url}/{page}</loc><lastmod>{lastmod}</lastmod></url>")
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">' + "".join(entries) + "</urlset>"
        ).encode()

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _take_throttle(self) -> bool:
        with self._lock:
            if self.throttle_count <= 0:
                return False
            self.throttle_count -= 1
            return True


def _handler(site: DocSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            """Quiet: the request log is `site.requests`."""

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            routes = {
                "/robots.txt": lambda: self._send(site.robots_status, "text/plain", site.robots_txt().encode()),
                "/sitemap.xml": lambda: self._send(200, "application/xml", site.sitemap()),
                "/sitemap_index.xml": lambda: self._send(200, "application/xml", _index(site.url)),
                "/private/secret.html": lambda: self._send(200, "text/html", b"<p>secret</p>"),
                "/loop": lambda: self._redirect(302, "/loop"),
                "/hostile/loopback": lambda: self._redirect(302, site.hostile_loopback_target),
                "/hostile/metadata": lambda: self._redirect(302, METADATA_URL),
                "/slow.html": self._slow,
                "/huge.html": self._huge,
                "/throttled.html": self._throttled,
                "/data.json": lambda: self._send(200, "application/json", b'{"not": "a page"}'),
                "/error.html": lambda: self._send(500, "text/html", b"<p>broken</p>"),
                "/bomb.html": lambda: self._send(200, "text/html", _bomb(), {"Content-Encoding": "gzip"}),
            }
            if path in routes:
                routes[path]()
            elif path.startswith("/old/"):
                self._redirect(301, path.removeprefix("/old"))
            else:
                self._page(path)

        def _page(self, path: str) -> None:
            served = site.page(path)
            if served is None:
                self._send(site.gone_status, "text/html", b"<h1>Not here</h1>")
                return
            body, modified = served
            etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
            last_modified = email.utils.formatdate(modified, usegmt=True)
            headers = {"ETag": etag, "Last-Modified": last_modified}
            if self._not_modified(etag, modified):
                self._send(304, None, b"", headers)
            else:
                self._send(200, "text/html; charset=utf-8", body, headers)

        def _not_modified(self, etag: str, modified: float) -> bool:
            asked = self.headers.get("If-None-Match")
            if asked is not None:
                return etag in [tag.strip() for tag in asked.split(",")]
            since = self.headers.get("If-Modified-Since")
            if since is None:
                return False
            try:
                return modified <= email.utils.parsedate_to_datetime(since).timestamp()
            except (TypeError, ValueError):
                return False

        def _slow(self) -> None:
            self._start(200, "text/html", None)
            time.sleep(site.slow_seconds)
            self._write(b"<html><body><p>Finally.</p></body></html>")

        def _huge(self) -> None:
            self._start(200, "text/html", None)
            block = b"<p>" + b"filler words " * 5000 + b"</p>\n"
            sent = 0
            try:
                while sent < site.huge_bytes:
                    self.wfile.write(block)
                    sent += len(block)
            except OSError:
                pass  # the client stopped reading: what a size cap does
            self.close_connection = True

        def _throttled(self) -> None:
            if site._take_throttle():
                self._send(429, "text/plain", b"slow down", {"Retry-After": str(site.retry_after)})
            else:
                self._send(200, "text/html", b"<html><body><p>Now you may.</p></body></html>")

        def _redirect(self, status: int, location: str) -> None:
            self._send(status, "text/plain", b"moved", {"Location": location})

        def _send(
            self, status: int, content_type: str | None, body: bytes, headers: dict[str, str] | None = None
        ) -> None:
            self._start(status, content_type, len(body), headers)
            self._write(body)

        def _start(
            self, status: int, content_type: str | None, length: int | None, headers: dict[str, str] | None = None
        ) -> None:
            site._record(Request("GET", self.path, dict(self.headers.items()), status))
            self.send_response(status)
            if content_type:
                self.send_header("Content-Type", content_type)
            if length is not None:
                self.send_header("Content-Length", str(length))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()

        def _write(self, body: bytes) -> None:
            try:
                self.wfile.write(body)
            except OSError:
                self.close_connection = True

    return Handler


@functools.cache
def _bomb() -> bytes:
    return gzip.compress(b"<p>" + b"0" * 50 * 1024 * 1024 + b"</p>")


def _index(base: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{base}/sitemap.xml</loc><lastmod>2026-01-02</lastmod></sitemap></sitemapindex>"
    ).encode()
