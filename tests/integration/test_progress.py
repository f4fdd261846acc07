"""Progress of long work: the pipeline reports pages and chunks through its port, and the CLI draws them
on a terminal (a real pseudo-terminal here), and nothing when it is not on one."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from citewise.ports.progress import Step
from citewise.runtime.services import build_services
from citewise.runtime.settings import Settings
from citewise_local.progress import Bars, elapsed_text
from tests.builders import make_pdf
from tests.factories import source

CITEWISE = Path(sys.executable).parent / "citewise"
PAGES = 12


def _pages(count: int) -> list[str]:
    return [f"Page {n} of the manual.\n\nThe anvil number {n} weighs {n * 10} kilograms." for n in range(count)]


def test_the_pipeline_reports_each_page_and_each_embedded_batch(tmp_path: Path) -> None:
    # Given a pipeline embedding 4 chunks a batch, and a 12-page PDF
    settings = Settings(
        home=tmp_path / "home", embedder="hashing", embed_batch_size=4, chunk_tokens=32, chunk_overlap=0
    )
    services = build_services(settings)
    heard: list[tuple[Step, int, int]] = []
    # When it is ingested
    [(_, result)] = list(
        services.ingestor.ingest_many(
            [source("acme", "manual.pdf", make_pdf(_pages(PAGES)))],
            progress=lambda step, done, total: heard.append((step, done, total)),
        )
    )
    services.close()
    # Then every page was reported in order, then the embedding batch by batch up to every chunk
    parsing = [(done, total) for step, done, total in heard if step == Step("parse", "manual.pdf", "page")]
    assert parsing == [(n, PAGES) for n in range(1, PAGES + 1)]
    embedding = [(done, total) for step, done, total in heard if step == Step("embed", "manual.pdf", "chunk")]
    chunks = result.embedded  # type: ignore[union-attr]
    assert chunks > 4 and embedding == [(min(n, chunks), chunks) for n in range(4, chunks + 4, 4)]
    assert len(heard) == len(parsing) + len(embedding)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_draw_every_update_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TQDM_MININTERVAL", "0")
    terminal = _Terminal()
    with Bars(stream=terminal) as bars:
        for done in (1, 2, 3):
            bars(Step("parse", "a.pdf", "page"), done, 3)
        items = list(bars.items(iter(range(4)), 4, "ingest", "doc"))
    drawn = terminal.getvalue()
    assert items == [0, 1, 2, 3]
    assert [m.group(1) for m in re.finditer(r"parse a\.pdf:.*?(\d/3) \[", drawn)] == ["0/3", "1/3", "2/3", "3/3"]
    assert re.search(r"ingest: 100%.*4/4 \[", drawn) and "doc/s" in drawn


@pytest.mark.parametrize("quiet", [True, False])
def test_bars_are_silent_when_quiet_or_not_on_a_terminal(quiet: bool) -> None:
    stream = _Terminal() if quiet else io.StringIO()
    with Bars(quiet=quiet, stream=stream) as bars:
        bars(Step("embed", "a.pdf", "chunk"), 1, 2)
        assert list(bars.items([1, 2, 3], 3, "ingest", "doc")) == [1, 2, 3]
    assert stream.getvalue() == ""


def test_elapsed_time_reads_well() -> None:
    assert [elapsed_text(s) for s in (0.04, 12.34, 125.2)] == ["0.0 s", "12.3 s", "2 min 05 s"]


def _ingest(tmp_path: Path, *args: str, terminal: bool) -> tuple[int, str, str]:
    """`citewise ingest manual.pdf` with stderr on a pseudo-terminal (or a pipe): (status, stdout, stderr)."""
    document = tmp_path / "manual.pdf"
    document.write_bytes(make_pdf(_pages(40)))
    environment = {
        **os.environ,
        "CITEWISE_EMBEDDER": "hashing",
        "CITEWISE_EMBED_BATCH_SIZE": "2",
        "CITEWISE_CHUNK_TOKENS": "32",
        "CITEWISE_CHUNK_OVERLAP": "0",
        "TQDM_MININTERVAL": "0",
    }
    command = [str(CITEWISE), "ingest", str(document), "--tenant", "acme", "--home", str(tmp_path / "home"), *args]
    if not terminal:
        done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120, check=False)
        return done.returncode, done.stdout, done.stderr
    controller, follower = pty.openpty()
    # A terminal of 160 columns (a new pseudo-terminal has 0, where a bar has no room to draw)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    drawn = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 120)
        try:
            data = os.read(controller, 65536) if ready else b""
        except OSError:  # the terminal closed with the process
            data = b""
        if not data:
            break
        drawn += data
    os.close(controller)
    assert process.stdout is not None
    out = process.stdout.read().decode()
    return process.wait(timeout=60), out, drawn.decode(errors="replace")


def test_a_single_large_document_shows_its_pages_and_chunks_moving(tmp_path: Path) -> None:
    status, out, drawn = _ingest(tmp_path, terminal=True)
    assert status == 0 and re.search(r"new: 1, .*elapsed: \d+\.\d s$", out.strip())
    pages = [int(n) for n in re.findall(r"parse manual\.pdf:[^\r\n]*?(\d+)/40 \[", drawn)]
    assert pages[0] == 0 and pages[-1] == 40 and pages == sorted(pages) and len(set(pages)) > 10
    chunks = re.findall(r"embed manual\.pdf:[^\r\n]*?(\d+)/(\d+) \[", drawn)
    assert len({done for done, _ in chunks}) > 3 and chunks[-1][0] == chunks[-1][1]
    assert "ETA" not in out and "\r" not in out  # the bars never reach stdout


@pytest.mark.parametrize(("args", "terminal"), [((), False), (("--quiet",), True)])
def test_no_bars_when_piped_or_quiet(tmp_path: Path, args: tuple[str, ...], terminal: bool) -> None:
    status, out, drawn = _ingest(tmp_path, *args, terminal=terminal)
    assert status == 0 and out.startswith("scanned: 1, new: 1,")
    assert drawn == ""
