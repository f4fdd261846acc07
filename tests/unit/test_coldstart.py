"""The init phase of a Lambda function (`citewise.runtime.coldstart`): no collection while the handler
loads, what it built frozen after, the collector back on, and nothing kept frozen past the next init."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from citewise.runtime.coldstart import init_phase


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _collections() -> int:
    return sum(generation["collections"] for generation in gc.get_stats())


@pytest.fixture(autouse=True)
def _collector_as_before() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_no_collection_runs_while_the_handler_loads_and_its_objects_are_frozen_after() -> None:
    # Given a collector that is on, with nothing frozen
    gc.enable()
    gc.unfreeze()
    before = _collections()

    # When a "handler" allocates far past the young generation's threshold inside the init phase
    with init_phase():
        assert not gc.isenabled()
        built = [_Node() for _ in range(50 * gc.get_threshold()[0])]

    # Then no collection ran, what it built is frozen, and the collector is on again
    assert _collections() == before
    assert gc.get_freeze_count() >= len(built)
    assert gc.isenabled()


def test_the_next_init_releases_the_cycles_the_previous_one_froze() -> None:
    # Given an init that froze a cycle, which the process then drops
    gc.unfreeze()
    with init_phase():
        dropped = _Node()
    alive = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert alive() is not None  # frozen: no collection sees it

    # When the process initialises again (a test loading another function)
    with init_phase():
        pass

    # Then the first init's cycle was freed before the second froze what is alive
    assert alive() is None


def test_a_failed_init_freezes_nothing_and_turns_the_collector_back_on() -> None:
    gc.enable()
    gc.unfreeze()
    with pytest.raises(RuntimeError), init_phase():
        raise RuntimeError("a misconfigured function fails its cold start")
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with init_phase():
        pass
    assert not gc.isenabled()
