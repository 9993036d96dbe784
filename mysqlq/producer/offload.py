"""The producer's async face: each call runs on a small thread pool beside the event loop, on a
connection of the producer's pool, so that ``await producer.aenqueue(…)`` never blocks the loop.

At most ``pool_size`` calls of one event loop are in the threads at once (the rest wait in the loop,
costing it nothing), so a thread never waits for a connection that an awaiting transaction holds.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, ParamSpec, TypeVar, TypeVarTuple

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")


class Offload:
    """Runs blocking calls on threads, at most ``size`` at a time per event loop."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary())

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.size, thread_name_prefix="mysqlq-producer")
            return self._executor

    def _gate(self) -> asyncio.Semaphore:
        import asyncio  # loaded already: only async callers come here

        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.size)
        return gate

    async def call(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``func(*args, **kwargs)`` on a thread; the loop goes on meanwhile."""
        async with self._gate():
            return await self.on_thread(func, *args, **kwargs)

    async def on_thread(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """The same, for a caller that already holds a place (an open transaction). The call runs in a
        copy of the caller's context, as ``asyncio.to_thread`` does: what a job is enqueued with
        from it (the current span's trace context) is the awaiting task's."""
        import asyncio

        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._threads(),
                                                                partial(context.run, func, *args, **kwargs))

    @asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        """Hold one of the loop's places for the block (an async transaction, from BEGIN to COMMIT)."""
        async with self._gate():
            yield

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)


class Steps:
    """A blocking context entered, used and left on threads, one step at a time (a connection is
    never used by two threads at once, even when a cancelled await leaves a step running)."""

    def __init__(self) -> None:
        self.stack = ExitStack()
        self.lock = threading.Lock()

    def run(self, func: Callable[[*Ts], T], *args: *Ts) -> T:
        with self.lock:
            return func(*args)

    def close(self, exc: BaseException | None) -> None:
        with self.lock:
            if exc is None:
                self.stack.close()
            else:
                self.stack.__exit__(type(exc), exc, exc.__traceback__)
