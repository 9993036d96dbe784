"""Settings and DSNs: parsed strictly, and a password never shows."""

from __future__ import annotations

import pytest

from mysqlq import ConfigError, Dsn, Settings


def test_dsn_parses_every_part() -> None:
    dsn = Dsn.parse("mysql://app:s%40cret@db.example:3307/jobs?unix_socket=/run/mysqld/mysqld.sock")
    assert (dsn.user, dsn.password, dsn.host, dsn.port, dsn.database) == ("app", "s@cret", "db.example", 3307, "jobs")
    assert dsn.unix_socket == "/run/mysqld/mysqld.sock"


def test_dsn_defaults_port_and_user() -> None:
    dsn = Dsn.parse("mariadb://db/jobs")
    assert (dsn.user, dsn.port, dsn.password) == ("root", 3306, "")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgres://db/jobs", "must start with mysql://"),
        ("mysql://db", "must name a database"),
        ("mysql://db:notaport/jobs", "invalid port"),
        ("mysql://db/jobs?ssl=1", "unknown parameter"),
    ],
)
def test_bad_dsn_says_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Dsn.parse(url)


def test_password_never_appears_in_text() -> None:
    dsn = Dsn.parse("mysql://app:hunter2@db/jobs")
    assert "hunter2" not in dsn.redacted()
    assert "hunter2" not in repr(dsn)
    assert "hunter2" not in repr(Settings(dsn=dsn))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"queues": ()}, "at least one queue"),
        ({"queues": ("",)}, "must not be empty"),
        ({"queues": ("x" * 101,)}, "limit is 100"),
        ({"batch_size": 0}, "batch-size must be positive"),
        ({"lease": 5.0, "heartbeat_interval": 5.0}, "lease must be longer"),
        ({"claim_strategy": "magic"}, "claim strategy"),
    ],
)
def test_bad_settings_are_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(dsn=Dsn(), **changes)  # type: ignore[arg-type]


def test_a_dsn_may_name_several_hosts_tried_in_order() -> None:
    dsn = Dsn.parse("mysql://app:pw@node1:3306,node2,[fd00::3]:3307/jobs")
    assert dsn.addresses == (("node1", 3306), ("node2", 3306), ("fd00::3", 3307))
    assert (dsn.host, dsn.port) == ("node1", 3306)
    assert dsn.redacted() == "mysql://app:***@node1:3306,node2:3306,[fd00::3]:3307/jobs"
    assert "pw" not in repr(dsn)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://h1,,h2/jobs", "empty host"),
        ("mysql://h1:3306,h2:x/jobs", "invalid port"),
        ("mysql://h1,h2/jobs?unix_socket=/s", "several hosts and a unix_socket"),
    ],
)
def test_bad_host_lists_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Dsn.parse(url)
