"""systemd's own Python binding, systemd-python (libsystemd's ``sd_journal_sendv`` and ``sd_notify``):
whether this process can import it, and the one line that says what to install where it cannot.

A worker under systemd writes the journal and systemd's notifications through it. A producer, the CLI
and a worker in the foreground never need it, so where it cannot be imported (macOS, ``--no-deps``, a
musl image) they work without; a worker started by systemd without it stops at once with
:data:`MISSING`, instead of running with no READY=1 until systemd's start timeout, and
``mysqlq install-systemd`` refuses with the same line before it writes a unit.
"""

from __future__ import annotations

import functools

from mysqlq.core.errors import MysqlqError

MISSING = ("systemd-python is not installed, and a worker under systemd needs it for the journal and systemd's "
           "notifications: install libsystemd-dev, gcc and pkg-config (RPM: systemd-devel, gcc, pkgconf), then "
           "`pip install 'systemd-python>=235'`")


@functools.cache
def available() -> bool:
    """True when systemd-python's journal and daemon modules import here."""
    try:
        from systemd import daemon, journal  # noqa: F401  (a folder named systemd/ alone does not hold them)
    except ImportError:
        return False
    return True


def require() -> None:
    """Raise :data:`MISSING` (one line, for the CLI) when the binding cannot be imported."""
    if not available():
        raise MysqlqError(MISSING)
