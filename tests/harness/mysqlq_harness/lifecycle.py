"""Things a test starts and must stop: a context manager that stops what it began when starting fails."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class StartStop:
    """``with Thing(...) as thing``: ``start()`` on entry (``stop()`` if it fails half-way), ``stop()`` on exit."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
