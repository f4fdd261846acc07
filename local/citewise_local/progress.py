"""The CLI's progress bars (tqdm), on stderr, only on a terminal.

Two bars at most: one over the run's items (documents ingested, queries run) with a total and an ETA,
and below it one for the long step inside the current work, which the pipeline reports through
`citewise.ports.progress.Progress` (a PDF's pages read, a group's chunks embedded). So a single
1,000-page PDF moves too, where a bar over documents alone would sit at 0/1 for minutes.

Off with `--quiet` and whenever stderr is not a terminal (a pipe, a file, CI): piped output stays
exactly the summary. tqdm's own `TQDM_*` variables still apply (`TQDM_MININTERVAL=0` redraws on every
update, as the tests do).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from citewise.ports.progress import Step
from citewise_local.render import escape_terminal_controls

if TYPE_CHECKING:
    from tqdm import tqdm

T = TypeVar("T")


class Bars:
    """The bars of one command; a context manager that closes them. Implements `Progress` (`__call__`)."""

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = not quiet and self.stream.isatty()
        self._step: Step | None = None
        self._step_bar: tqdm[Any] | None = None
        self._items_shown = False

    def items(self, iterable: Iterable[T], total: int, what: str, unit: str) -> Iterator[T]:
        """`iterable`, with a bar of `total` items (ETA included) when there are two or more."""
        if not self.enabled or total < 2:
            yield from iterable
            return
        from tqdm import tqdm

        self._items_shown = True
        try:
            bar = tqdm(iterable, total=total, desc=what, unit=unit, file=self.stream)
            with bar:
                yield from bar
        finally:
            self._items_shown = False

    def __call__(self, step: Step, done: int, total: int) -> None:
        """The pipeline's report: move the step's bar, starting a new one when the step changes."""
        if not self.enabled:
            return
        if step != self._step or self._step_bar is None:
            self._close_step()
            from tqdm import tqdm

            self._step = step
            self._step_bar = bar = tqdm(
                total=total,
                desc=escape_terminal_controls(f"{step.action} {step.subject}"),  # a document's path
                unit=step.unit,
                file=self.stream,
                leave=False,
                position=1 if self._items_shown else 0,
            )
        else:
            bar = self._step_bar
        bar.update(done - bar.n)
        if done >= total:
            self._close_step()

    def close(self) -> None:
        self._close_step()

    def _close_step(self) -> None:
        if self._step_bar is not None:
            self._step_bar.close()
        self._step_bar, self._step = None, None

    def __enter__(self) -> Bars:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class Stopwatch:
    """Wall time since construction, as every summary states it."""

    def __init__(self) -> None:
        self._started = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._started

    def __str__(self) -> str:
        return elapsed_text(self.seconds)


def elapsed_text(seconds: float) -> str:
    """`0.4 s`, `12.3 s`, `2 min 05 s`: short, and exact enough to compare two runs."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"
