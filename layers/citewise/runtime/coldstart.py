"""A Lambda function's init phase, with CPython's cyclic garbage collector paused while the handler loads.

Loading a handler creates about a hundred thousand objects that live as long as the process (modules,
pydantic's validators, botocore's service models, Powertools' resolver) and next to no garbage. As they
pile up, the collector traverses them again and again, a full collection included: about a tenth of
the init's CPU (docs/benchmarks.md, section 9a). So each `functions/<name>/handler.py` loads inside
`init_phase`: no collection runs while it loads, then what it built is frozen (`gc.freeze` moves it to
the permanent generation, which no collection traverses) and the collector is turned back on. Requests
do not pay for traversing the init's objects either.

A frozen object is never collected as part of a reference cycle, which costs nothing in a process that
initialises once, as a Lambda execution environment does. A process that loads handlers again and again
(the handler tests, one function per test) would keep every cycle that was alive at each load, so an
init that finds objects frozen unfreezes them and collects first: only the latest init's objects stay
frozen. The first init of a process finds none and pays nothing for it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def init_phase() -> Iterator[None]:
    """Load a handler in this block: no collection runs inside it, and what it built is frozen after.

    A block that raises freezes nothing (the collector is turned back on either way).
    """
    if gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if enabled:
            gc.enable()
