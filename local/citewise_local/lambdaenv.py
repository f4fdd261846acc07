"""Lambda execution environments for `citewise serve`: each a process of its own running one handler.

Lambda never runs two invocations in one execution environment; it runs concurrent invocations in
separate environments. The handlers rely on that: per-invocation state lives in process globals (the
Powertools logger's appended keys and correlation id, the metrics buffer, and the event resolver's
current event, which Powertools keeps on a class shared by every resolver). Two invocations in one
process, on two threads, would log under each other's correlation id, flush each other's metrics and
even read each other's request. So the local server does as Lambda does: a pool of environments per
function, each a spawned process that loads `functions/<name>/handler.py` once (its cold start) and then
runs one invocation at a time; a request that finds every environment busy gets a new one, up to a limit.

Every invocation ends at its context's deadline (the function's timeout), as on Lambda: an environment
still running then is killed, which also frees whatever memory it held, and the caller gets
`FunctionTimeoutError`; the pool starts a fresh environment when one is next needed. Waiting for an
environment counts against the same deadline. An environment whose process has grown past the
function's memory (the context's `memory_limit_in_mb`; Lambda would have ended it) is retired after
its invocation, so a document that took gigabytes to parse does not keep them. And no caller (a
tenant) holds more than half of a function's environments at once, so one tenant's slow requests
leave the others room to run.

This module imports only the standard library, the error hierarchy and the emulator's `LambdaContext`
(itself standard library only), so an environment's own start costs no more than the handler it loads.

An environment's output (the handler's Powertools JSON logs, its EMF metric documents, warnings of the
libraries it uses) is routed by `Output`: to a log file or to stderr, never to the server's stdout, and
without EMF documents unless metrics are asked for. Lambda sends all of it to CloudWatch; a terminal
serving requests is no place for it.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

from citewise.domain.errors import CitewiseError, FunctionTimeoutError
from citewise_local.emulator import LambdaContext

Handler = Callable[[dict[str, Any], Any], Any]
StreamHandler = Callable[[dict[str, Any], Any], Generator[bytes, None, None]]

_CLOSE_TIMEOUT_S = 10


class HandlerError(Exception):
    """The handler raised in its environment; the message is the environment's traceback."""


class EnvironmentLostError(CitewiseError):
    """An environment's process exited while loading or running a handler."""


def load_handler(functions_dir: Path, name: str) -> tuple[Handler, StreamHandler | None]:
    """`lambda_handler` of `functions_dir/name/handler.py`, loaded by file under a module name of its own
    (every function's file is called handler.py), and its `stream_handler` if it streams."""
    file = functions_dir / name / "handler.py"
    if not file.is_file():
        raise CitewiseError(
            f"no Lambda handler at {file}: `citewise serve` runs the handlers installed with citewise "
            f"(the citewise_functions package, functions/<name>/handler.py of the checkout)"
        )
    module_name = f"citewise_local_function_{name}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise CitewiseError(f"cannot load {file} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    handler = getattr(module, "lambda_handler", None)
    if not callable(handler):
        raise CitewiseError(f"{file} defines no lambda_handler(event, context)")
    streamer = getattr(module, "stream_handler", None)
    return handler, streamer if callable(streamer) else None


@dataclass(frozen=True)
class Output:
    """Where an environment writes: `file` (appended to), else the server's stderr; EMF metric documents
    kept only with `metrics`. No `Output` at all leaves the process's streams as inherited."""

    file: str | None = None
    metrics: bool = False


class _WithoutMetrics(io.TextIOBase):
    """A text stream that passes every line on except EMF metric documents (JSON objects with `_aws`)."""

    def __init__(self, target: TextIO) -> None:
        self._target = target
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if not _is_metric_document(line):
                self._target.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self._target.flush()


def _is_metric_document(line: str) -> bool:
    if not line.startswith('{"_aws"'):
        return False
    try:
        document = json.loads(line)
    except ValueError:
        return False
    return isinstance(document, dict) and "CloudWatchMetrics" in document.get("_aws", {})


class _NotPowertools(logging.Filter):
    """Records the handler's Powertools logger (`citewise`, by POWERTOOLS_SERVICE_NAME) has not already
    written: those of other libraries (a parser's warnings)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != self._service and not record.name.startswith(f"{self._service}.")


def _route_output(output: Output) -> None:
    """Point this process's stdout and stderr (file descriptors, so nothing escapes) where `output` says,
    before the handler loads: Powertools' logger keeps the `sys.stdout` it finds at import."""
    if output.file is not None:
        descriptor = os.open(output.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(descriptor, 1)
        os.dup2(descriptor, 2)
        os.close(descriptor)
    else:
        os.dup2(2, 1)
    if not output.metrics:
        sys.stdout = _WithoutMetrics(sys.stdout)
    from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

    # Other libraries' log records (a parser's warnings) as JSON lines like the handler's own.
    third_party = logging.StreamHandler(sys.stdout)
    third_party.setFormatter(LambdaPowertoolsFormatter())
    third_party.addFilter(_NotPowertools(os.environ.get("POWERTOOLS_SERVICE_NAME", "service_undefined")))
    logging.getLogger().addHandler(third_party)
    logging.captureWarnings(True)


def _serve_invocations(connection: Connection, functions_dir: str, name: str, output: Output | None = None) -> None:
    """The main of an environment's process: load the handler, then run what the pipe brings, one at a time.

    Ctrl-C reaches the terminal's whole process group; the server decides when environments stop (after
    it has drained its queue), so SIGINT is ignored here. The environment ends when its pipe closes, which
    also happens when the server is killed.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if output is not None:
            _route_output(output)
        handler, streamer = load_handler(Path(functions_dir), name)
    except BaseException as exc:  # noqa: BLE001 - the server reports any failed cold start
        _answer(connection, ("failed", str(exc) if isinstance(exc, CitewiseError) else traceback.format_exc()))
        return
    if not _answer(connection, ("ready",)):
        return
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message == ("cancel",):  # a client left just as its stream ended: nothing left to stop
            continue
        event, context, streamed = message
        if streamed and streamer is not None:
            if not _stream(connection, streamer, event, context):
                return
            continue
        try:
            reply: tuple[Any, ...] = ("returned", handler(event, context))
        except Exception:  # noqa: BLE001 - Lambda reports a raising handler and keeps the environment
            reply = ("raised", traceback.format_exc())
        finally:
            sys.stdout.flush()  # the handler's log lines, before its answer goes out
            sys.stderr.flush()
        peak_mb = _peak_memory_mb()
        if not _answer(connection, (*reply, peak_mb)):
            return


def _stream(connection: Connection, streamer: StreamHandler, event: dict[str, Any], context: Any) -> bool:
    """Run one streamed invocation: each chunk to the server as it comes, then how it ended. A `cancel`
    from the server (its client left) closes the handler's stream, as Lambda ends a streamed invocation
    whose reader is gone; False if the server is gone."""
    outcome: tuple[Any, ...] = ("returned", None)
    chunks = None
    try:
        chunks = streamer(event, context)
        for chunk in chunks:
            if not _answer(connection, ("chunk", chunk)):
                return False
            if connection.poll() and connection.recv() == ("cancel",):
                break
    except Exception:  # noqa: BLE001 - reported as a raising handler is
        outcome = ("raised", traceback.format_exc())
    finally:
        if chunks is not None:
            chunks.close()  # what it holds (a model call) closes
        sys.stdout.flush()
        sys.stderr.flush()
    return _answer(connection, (*outcome, _peak_memory_mb()))


def _peak_memory_mb() -> int:
    """The most memory (resident) this process has held, in MB; 0 where the platform does not say."""
    try:
        import resource
    except ImportError:  # Windows has no resource module
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 2**20 if sys.platform == "darwin" else peak // 2**10  # bytes on macOS, KiB elsewhere


def _answer(connection: Connection, message: tuple[Any, ...]) -> bool:
    """Send `message` to the server; False if the server is gone (killed, say), and with it the reason
    for this environment."""
    try:
        try:
            connection.send(message)
        except OSError:
            return False
        except Exception:  # noqa: BLE001 - an answer that cannot be pickled is the handler's fault
            connection.send(("raised", traceback.format_exc(), *message[2:]))
    except OSError:
        return False
    return True


class ExecutionEnvironment:
    """One environment: a spawned process that loads `name`'s handler (see the module docstring).

    Construction starts the process; `wait_ready` waits for its cold start, so several can start at once.
    """

    def __init__(self, functions_dir: Path, name: str, output: Output | None = None) -> None:
        self.name = name
        self.peak_memory_mb = 0
        """The most memory the process has held, as of its last invocation."""
        # Spawned, not forked: the server has threads (and maybe held locks) that a fork would copy.
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(
            target=_serve_invocations,
            args=(child, str(functions_dir), name, output),
            name=f"citewise-{name}",
            daemon=True,
        )
        self._process.start()
        child.close()

    def wait_ready(self) -> None:
        """Wait for the handler to load; CitewiseError (and the process gone) if it did not."""
        reply = self._receive()
        if reply[0] != "ready":
            self.close()
            raise CitewiseError(f"the {self.name} function failed to load: {reply[1]}")

    def invoke(self, event: dict[str, Any], context: LambdaContext) -> Any:
        """The handler's return value; HandlerError if it raised, EnvironmentLostError if the process died,
        FunctionTimeoutError (and the process killed) if no answer came by the context's deadline."""
        self._send((event, context, False))
        outcome, value, self.peak_memory_mb = self._next(context)
        if outcome == "raised":
            raise HandlerError(value)
        return value

    def invoke_stream(self, event: dict[str, Any], context: LambdaContext) -> Generator[bytes, None, None]:
        """The streamed handler's chunks as they come (errors as `invoke`'s). Closed before its end (the
        client left), it tells the handler to stop and waits for it to have stopped."""
        self._send((event, context, True))
        ended = False
        try:
            while True:
                message = self._next(context)
                if message[0] == "chunk":
                    yield message[1]
                    continue
                ended = True
                outcome, value, self.peak_memory_mb = message
                if outcome == "raised":
                    raise HandlerError(value)
                return
        finally:
            if not ended:
                self._send(("cancel",))
                while (message := self._next(context))[0] == "chunk":
                    pass
                self.peak_memory_mb = message[2]

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self._connection.send(message)
        except OSError as exc:  # it died while idle
            raise self._lost() from exc

    def _next(self, context: LambdaContext) -> tuple[Any, ...]:
        """The environment's next message, within the invocation's time left."""
        if not self._connection.poll(context.get_remaining_time_in_millis() / 1000):
            # As Lambda ends a timed-out invocation: the environment goes, whatever the handler was doing.
            self._process.kill()
            self._process.join()
            raise FunctionTimeoutError(
                f"the {self.name} function did not answer within its {context.timeout_s:g} s timeout",
                details={"timeout_s": context.timeout_s},
            )
        return self._receive()

    def close(self) -> None:
        """End the process: closing the pipe ends its loop; one that does not end in time is terminated."""
        self._connection.close()
        self._process.join(_CLOSE_TIMEOUT_S)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()

    def _receive(self) -> tuple[Any, ...]:
        try:
            reply: tuple[Any, ...] = self._connection.recv()
        except (EOFError, OSError) as exc:
            raise self._lost() from exc
        return reply

    def _lost(self) -> EnvironmentLostError:
        self._process.join(_CLOSE_TIMEOUT_S)
        return EnvironmentLostError(f"the {self.name} function's environment exited (code {self._process.exitcode})")


@dataclass
class _ColdStart:
    """One environment starting in the background for a waiting invocation; `error` if it failed."""

    error: BaseException | None = None


class FunctionPool:
    """The environments of one function, up to `max_environments` at once.

    An invocation takes an idle environment. If there is none, it has `start` make one more (a cold
    start, in the background) and takes whichever environment is free first: the new one, or one whose
    invocation ended meanwhile. So a request never waits out a cold start while an environment is idle.

    An invocation names its `caller` (the tenant); one caller holds at most `max_per_caller`
    environments at once (half of them, rounded up), and its further invocations wait for one of its
    own to end. So however many slow requests one tenant sends, the other half of the pool serves the
    others; and every wait ends at the invocation's deadline (`FunctionTimeoutError`). Invocations
    without a caller (the public routes, which read no tenant data) are not limited.
    """

    def __init__(self, start: Callable[[], ExecutionEnvironment], max_environments: int) -> None:
        if max_environments < 1:
            raise ValueError("a function needs at least one environment")
        self._start = start
        self.max_environments = max_environments
        self.max_per_caller = (max_environments + 1) // 2
        self._idle: list[ExecutionEnvironment] = []
        self._count = 0
        self._busy: Counter[Hashable] = Counter()
        self._closed = False
        self._changed = threading.Condition()

    def add(self, environment: ExecutionEnvironment) -> None:
        """Take a started environment (the server starts one per function ahead, to fail early)."""
        with self._changed:
            self._count += 1
            self._idle.append(environment)
            self._changed.notify_all()

    def invoke_stream(
        self, event: dict[str, Any], context: LambdaContext, *, caller: Hashable = None
    ) -> Generator[bytes, None, None]:
        """`invoke`, streamed (`ExecutionEnvironment.invoke_stream`): the environment is held until the
        stream ends or is closed."""
        environment = self._acquire(context, caller)
        usable = False
        try:
            yield from environment.invoke_stream(event, context)
            usable = True
        except HandlerError:
            usable = True
            raise
        except GeneratorExit:
            usable = True  # the client left; the environment stopped the handler and is free again
            raise
        finally:
            usable = usable and environment.peak_memory_mb <= context.memory_limit_in_mb
            self._release(environment, usable=usable, caller=caller)

    def invoke(self, event: dict[str, Any], context: LambdaContext, *, caller: Hashable = None) -> Any:
        """Run one invocation in a free environment, for `caller` (see the class docstring)."""
        environment = self._acquire(context, caller)
        usable = False
        try:
            result = environment.invoke(event, context)
            usable = True
            return result
        except HandlerError:
            usable = True
            raise
        finally:
            usable = usable and environment.peak_memory_mb <= context.memory_limit_in_mb
            self._release(environment, usable=usable, caller=caller)

    @property
    def size(self) -> int:
        """Environments alive or starting (idle or busy)."""
        with self._changed:
            return self._count

    def close(self) -> None:
        """End the idle environments now, and each busy or starting one when it is done."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._changed.notify_all()
        for environment in idle:
            environment.close()

    def _acquire(self, context: LambdaContext, caller: Hashable) -> ExecutionEnvironment:
        """A free environment for `caller`, counted in its share from the moment it takes one or has one
        started: so a caller's waiting invocations cannot start cold starts for the whole pool."""
        cold_start: _ColdStart | None = None
        counted = False
        deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000
        with self._changed:
            try:
                while True:
                    if self._closed:
                        raise CitewiseError("the local server is stopping")
                    if cold_start is not None and cold_start.error is not None:
                        raise cold_start.error
                    if counted or caller is None or self._busy[caller] < self.max_per_caller:
                        if not self._idle and cold_start is None and self._count < self.max_environments:
                            self._count += 1
                            cold_start = _ColdStart()
                            threading.Thread(target=self._cold_start, args=(cold_start,), daemon=True).start()
                        if (self._idle or cold_start is not None) and not counted and caller is not None:
                            self._busy[caller] += 1
                            counted = True
                        if self._idle:
                            return self._idle.pop()
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise FunctionTimeoutError(
                            f"no {context.function_name} environment came free within the function's "
                            f"{context.timeout_s:g} s timeout",
                            details={"timeout_s": context.timeout_s},
                        )
                    self._changed.wait(left)
            except BaseException:
                if counted:
                    self._uncount(caller)
                    self._changed.notify_all()
                raise

    def _cold_start(self, attempt: _ColdStart) -> None:
        try:
            environment = self._start()
        except BaseException as exc:  # noqa: BLE001 - handed to the invocation that asked for it
            with self._changed:
                self._count -= 1
                attempt.error = exc
                self._changed.notify_all()
            return
        self._release(environment, usable=True)

    def _release(self, environment: ExecutionEnvironment, *, usable: bool, caller: Hashable = None) -> None:
        with self._changed:
            if caller is not None:
                self._uncount(caller)
            keep = usable and not self._closed
            if keep:
                self._idle.append(environment)
            else:
                self._count -= 1
            self._changed.notify_all()
        if not keep:
            environment.close()

    def _uncount(self, caller: Hashable) -> None:
        """One environment fewer held (or awaited) by `caller`; under the lock."""
        self._busy[caller] -= 1
        if not self._busy[caller]:
            del self._busy[caller]
