"""An entry point whose module cannot be imported."""

import mysqlq_testhandlers_missing_dependency  # type: ignore[import-not-found]  # noqa: F401


def handler(payload: object, ctx: object) -> None:
    """Never reached."""
