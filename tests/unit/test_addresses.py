"""core.addresses: the one reading of ``HOST:PORT`` that the DSN, --bind, --hint-bind and --metrics-port share."""

from __future__ import annotations

import pytest

from mysqlq.core.addresses import join_host_port, split_host_port


@pytest.mark.parametrize(("text", "parts"), [
    ("db", ("db", "")), ("db:3307", ("db", "3307")), ("db:", ("db", "")), (":3307", ("", "3307")),
    ("[fd00::3]", ("fd00::3", "")), ("[fd00::3]:3307", ("fd00::3", "3307")), ("[fd00::3]3307", None),
    ("[fd00::3]x", None),
])
def test_one_reading_whatever_the_colons(text: str, parts: tuple[str, str] | None) -> None:
    for unbracketed in ("ipv6", "first colon", "last colon"):
        assert split_host_port(text, unbracketed) == parts


def test_several_colons_without_brackets_are_read_as_the_caller_says() -> None:
    assert split_host_port("fd00::3") == ("fd00::3", "")  # an IPv6 address alone (--bind, --hint-bind)
    assert split_host_port("fd00::3", "first colon") == ("fd00", ":3")  # as in a URL: an invalid port
    assert split_host_port("::1:9101", "last colon") == ("::1", "9101")  # a port must follow (--metrics-port)


def test_joined_as_written() -> None:
    assert join_host_port("db", 3306) == "db:3306"
    assert join_host_port("fd00::3", 3307) == "[fd00::3]:3307"
    assert split_host_port(join_host_port("fd00::3", 3307)) == ("fd00::3", "3307")
