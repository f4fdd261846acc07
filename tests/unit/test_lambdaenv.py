"""The pool of execution environments behind `citewise serve`, with stand-ins for the processes."""

from __future__ import annotations

import contextlib
import os
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from citewise.domain.errors import CitewiseError, FunctionTimeoutError
from citewise_local.emulator import LambdaContext
from citewise_local.lambdaenv import (
    EnvironmentLostError,
    ExecutionEnvironment,
    FunctionPool,
    HandlerError,
)

WAIT_S = 30


class Environment:
    """An environment whose invocations do what `behaviour` says (return a value, raise, or block)."""

    def __init__(self, name: str, behaviour: Callable[[], Any] = lambda: None, peak_memory_mb: int = 0) -> None:
        self.name = name
        self.behaviour = behaviour
        self.closed = False
        self.peak_memory_mb = peak_memory_mb

    def invoke(self, event: dict[str, Any], context: LambdaContext) -> Any:
        self.behaviour()
        return self.name

    def close(self) -> None:
        self.closed = True


def _context(timeout_s: float = 3, memory_limit_in_mb: int = 1024) -> LambdaContext:
    return LambdaContext("citewise-test", "request-1", timeout_s, memory_limit_in_mb)


def _pool(start: Callable[[], Environment], *ready: Environment, max_environments: int = 2) -> FunctionPool:
    pool = FunctionPool(cast(Callable[[], ExecutionEnvironment], start), max_environments)
    for environment in ready:
        pool.add(cast(ExecutionEnvironment, environment))
    return pool


def test_an_invocation_takes_the_environment_freed_first_while_a_new_one_starts() -> None:
    # Given a pool whose one environment is busy, and a cold start that takes until the test says so
    first_busy, release_first, cold_start_begun, finish_cold_start = (threading.Event() for _ in range(4))

    def busy() -> None:
        first_busy.set()
        assert release_first.wait(WAIT_S)

    def slow_start() -> Environment:
        cold_start_begun.set()
        assert finish_cold_start.wait(WAIT_S)
        return Environment("second")

    pool = _pool(slow_start, Environment("first", busy))
    first = threading.Thread(target=pool.invoke, args=({}, _context()))
    first.start()
    assert first_busy.wait(WAIT_S)
    # When a second invocation comes, a new environment starts for it; the first one then comes free
    answers: list[Any] = []
    second = threading.Thread(target=lambda: answers.append(pool.invoke({}, _context())))
    second.start()
    assert cold_start_begun.wait(WAIT_S)
    release_first.set()
    second.join(WAIT_S)
    # Then the second invocation ran in the first environment, without waiting out the cold start
    assert answers == ["first"]
    assert not finish_cold_start.is_set()
    # And the new environment joins the pool when it is ready
    finish_cold_start.set()
    first.join(WAIT_S)
    assert pool.size == 2


def test_a_failed_cold_start_fails_the_invocation_that_asked_for_it() -> None:
    def broken_start() -> Environment:
        raise CitewiseError("the handler failed to load")

    pool = _pool(broken_start)
    with pytest.raises(CitewiseError, match="failed to load"):
        pool.invoke({}, _context())
    assert pool.size == 0


def test_a_handler_error_keeps_its_environment_and_a_lost_one_is_replaced() -> None:
    def handler_error() -> None:
        raise HandlerError("Traceback ... RuntimeError: boom")

    def lost() -> None:
        raise EnvironmentLostError("the environment exited (code -9)")

    raising, dying, replacement = Environment("raising", handler_error), Environment("dying", lost), Environment("new")
    # A handler that raised leaves a usable environment, as Lambda keeps one
    pool = _pool(lambda: replacement, raising, max_environments=1)
    with pytest.raises(HandlerError):
        pool.invoke({}, _context())
    assert not raising.closed and pool.size == 1
    # An environment whose process died is closed and dropped; the next invocation starts a new one
    pool = _pool(lambda: replacement, dying, max_environments=1)
    with pytest.raises(EnvironmentLostError):
        pool.invoke({}, _context())
    assert dying.closed and pool.size == 0
    assert pool.invoke({}, _context()) == "new"


def test_closing_ends_idle_environments_and_refuses_invocations() -> None:
    idle = Environment("idle")
    pool = _pool(lambda: Environment("never"), idle)
    pool.close()
    assert idle.closed
    with pytest.raises(CitewiseError, match="stopping"):
        pool.invoke({}, _context())


def test_one_caller_holds_at_most_half_the_environments_and_its_extra_invocation_ends_at_its_deadline() -> None:
    # Given a pool of two environments, one of them busy for a caller until the test says so
    busy, release = threading.Event(), threading.Event()

    def block() -> None:
        busy.set()
        assert release.wait(WAIT_S)

    pool = _pool(lambda: Environment("never"), Environment("second"), Environment("first", block))
    first = threading.Thread(target=pool.invoke, args=({}, _context()), kwargs={"caller": "mallory"})
    first.start()
    assert busy.wait(WAIT_S)
    # When the same caller invokes again, it does not get the other environment: it waits, up to its deadline
    began = time.monotonic()
    with pytest.raises(FunctionTimeoutError, match="within the function's 0.5 s timeout") as raised:
        pool.invoke({}, _context(0.5), caller="mallory")
    assert time.monotonic() - began >= 0.45
    assert raised.value.http_status == 504 and raised.value.details == {"timeout_s": 0.5}
    # Then another caller gets the free environment at once
    assert pool.invoke({}, _context(), caller="acme") == "second"
    release.set()
    first.join(WAIT_S)
    assert pool.size == 2 and pool.max_per_caller == 1


def test_a_callers_waiting_invocations_start_no_more_environments_than_its_share() -> None:
    # Given a pool of four whose cold starts take until the test says so, one environment busy for a caller
    busy, release, finish_starts = threading.Event(), threading.Event(), threading.Event()
    starts: list[str] = []

    def block() -> None:
        busy.set()
        assert release.wait(WAIT_S)

    def slow_start() -> Environment:
        starts.append("started")
        assert finish_starts.wait(WAIT_S)
        return Environment(f"new-{len(starts)}")

    pool = _pool(slow_start, Environment("first", block), max_environments=4)
    callers = [threading.Thread(target=pool.invoke, args=({}, _context()), kwargs={"caller": "mallory"})]
    callers[0].start()
    assert busy.wait(WAIT_S)
    # When the same caller sends three more, and then another caller one
    for _ in range(3):
        callers.append(threading.Thread(target=_ignore_timeout, args=(pool, "mallory")))
        callers[-1].start()
    time.sleep(0.3)
    assert len(starts) == 1  # the caller's share is two: the busy one and one starting
    answers: list[Any] = []
    callers.append(threading.Thread(target=lambda: answers.append(pool.invoke({}, _context(), caller="acme"))))
    callers[-1].start()
    # Then the other caller still has environments to start, and gets one
    _wait_until(lambda: len(starts) == 2)
    finish_starts.set()
    _wait_until(lambda: bool(answers))
    release.set()
    for thread in callers:
        thread.join(WAIT_S)
    assert answers[0].startswith("new-")


def _ignore_timeout(pool: FunctionPool, caller: str) -> None:
    with contextlib.suppress(FunctionTimeoutError):
        pool.invoke({}, _context(), caller=caller)


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.01)


SLOW_HANDLER = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    def lambda_handler(event, context):
        (Path(__file__).parent / "pid").write_text(str(os.getpid()))
        held = bytearray(event.get("megabytes", 0) * 2**20)  # touched, so resident
        time.sleep(event.get("seconds", 0))
        return "done"
    """
)


def _slow_function(root: Path) -> Path:
    (root / "slow").mkdir()
    (root / "slow" / "handler.py").write_text(SLOW_HANDLER)
    return root


def test_an_invocation_past_its_deadline_kills_its_environment(tmp_path: Path) -> None:
    # Given an environment whose handler sleeps as long as the event says
    environment = ExecutionEnvironment(_slow_function(tmp_path), "slow")
    try:
        environment.wait_ready()
        assert environment.invoke({"seconds": 0}, _context()) == "done"
        # When an invocation runs past the context's deadline
        began = time.monotonic()
        with pytest.raises(FunctionTimeoutError, match="the slow function did not answer within its 1 s timeout"):
            environment.invoke({"seconds": 60}, _context(1))
        # Then it ends at the deadline, and the process that ran it is gone, as Lambda ends the sandbox
        assert 0.9 <= time.monotonic() - began < 10
        pid = int((tmp_path / "slow" / "pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        environment.close()


def test_a_timed_out_environment_leaves_the_pool_and_the_next_invocation_gets_a_new_one() -> None:
    def timed_out() -> None:
        raise FunctionTimeoutError("the test function did not answer within its 3 s timeout")

    stuck, replacement = Environment("stuck", timed_out), Environment("new")
    pool = _pool(lambda: replacement, stuck, max_environments=1)
    with pytest.raises(FunctionTimeoutError):
        pool.invoke({}, _context(), caller="mallory")
    assert stuck.closed and pool.size == 0
    assert pool.invoke({}, _context(), caller="mallory") == "new"


def test_an_environment_that_grew_past_the_functions_memory_is_retired_after_its_invocation(tmp_path: Path) -> None:
    # Given real environments of a function with 150 MB of memory beyond what an idle environment holds
    # (measured, not assumed: what the interpreter and its imports hold differs from machine to machine)
    functions = _slow_function(tmp_path)

    def start() -> ExecutionEnvironment:
        environment = ExecutionEnvironment(functions, "slow")
        environment.wait_ready()
        return environment

    # (a generous timeout: this is about memory, and a loaded machine is slow to fill hundreds of MB)
    probe = start()
    try:
        assert probe.invoke({}, _context(60)) == "done"
        memory_mb = probe.peak_memory_mb + 150
    finally:
        probe.close()
    pool = FunctionPool(start, 1)
    try:
        # When an invocation stays within it, its environment is kept for the next
        assert pool.invoke({}, _context(60, memory_limit_in_mb=memory_mb)) == "done"
        first = int((functions / "slow" / "pid").read_text())
        assert pool.invoke({}, _context(60, memory_limit_in_mb=memory_mb)) == "done"
        assert int((functions / "slow" / "pid").read_text()) == first
        # When one holds more than the whole limit, it is answered, and then its process ends and its memory with it
        assert pool.invoke({"megabytes": memory_mb + 10}, _context(60, memory_limit_in_mb=memory_mb)) == "done"
        assert pool.size == 0
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
        # Then the next invocation gets a new environment
        assert pool.invoke({}, _context(60, memory_limit_in_mb=memory_mb)) == "done"
        assert int((functions / "slow" / "pid").read_text()) != first
    finally:
        pool.close()
