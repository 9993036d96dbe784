"""The fairness key of tasks enqueued within a block: Django's ``Task.enqueue`` has no field for it,
so a request (or a middleware) names its tenant around the enqueues::

    from mysqlq.contrib.django import fairness_key

    with fairness_key(f"customer-{customer.pk}"):
        send_invoice.enqueue(invoice.pk)

Every task enqueued on a mysqlq backend inside the block gets the key (mysqlq.store.fairness); the
key is checked at once, so a bad one raises before any task is enqueued. Blocks nest (the innermost
key wins) and hold per thread and per asyncio task.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from mysqlq.core.jobs import check_fairness_key

_current: ContextVar[str | None] = ContextVar("mysqlq_fairness_key", default=None)


@contextmanager
def fairness_key(key: str | None) -> Iterator[None]:
    """Tasks enqueued inside the block carry ``key`` (None: none, inside an outer block too)."""
    token = _current.set(None if key is None else check_fairness_key(key))
    try:
        yield
    finally:
        _current.reset(token)


def current() -> str | None:
    """The key of the innermost block around the caller, if any."""
    return _current.get()
