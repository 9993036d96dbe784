"""Where a worker takes network hints: --hint-bind, its default, and what is recorded."""

from __future__ import annotations

import pytest

from mysqlq import ConfigError, Dsn, Settings
from mysqlq.hint import address

from ..conftest import QueueDB


@pytest.mark.parametrize(("spec", "parsed"), [
    ("auto", "auto"), ("OFF", "off"), ("10.1.2.3", ("10.1.2.3", 0)), ("10.1.2.3:7000", ("10.1.2.3", 7000)),
    ("[::1]:7000", ("::1", 7000)), ("fd00::2", ("fd00::2", 0)), ("0.0.0.0:0", ("0.0.0.0", 0)),
])
def test_bind_addresses(spec: str, parsed: object) -> None:
    assert address.parse_bind(spec) == parsed


@pytest.mark.parametrize(("spec", "message"), [
    ("db.example.com:7000", "not an IP address"), ("10.1.2.3:70000", "from 0 to 65535"),
    ("10.1.2.3:x", "from 0 to 65535"), ("[::1]7000", "expected"), ("", "not an IP address"),
])
def test_bad_bind_addresses_are_refused_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(dsn=Dsn(), hint_bind=spec)


def test_auto_is_the_address_on_the_route_to_the_database() -> None:
    # Connecting a UDP socket sends nothing: any routable address shows which local address it would use.
    route = address.route_address(Dsn(host="192.0.2.77"))
    if route is None:  # a machine with no route there: nothing to bind
        assert address.resolve("auto", Dsn(host="192.0.2.77")) is None
    else:
        assert address.resolve("auto", Dsn(host="192.0.2.77")) == (route, 0)
    assert address.resolve("auto", Dsn(host="127.0.0.1")) is None  # the database is here: unix sockets serve
    assert address.resolve("auto", Dsn(unix_socket="/run/mysqld/mysqld.sock")) is None
    assert address.resolve("off", Dsn(host="192.0.2.77")) is None
    assert address.resolve("10.9.9.9:7000", Dsn()) == ("10.9.9.9", 7000)


def test_a_wildcard_bind_advertises_the_route_to_the_database() -> None:
    assert address.advertised(("0.0.0.0", 7000), Dsn(host="127.0.0.1")) == "127.0.0.1:7000"
    assert address.advertised(("10.1.2.3", 7000), Dsn()) == "10.1.2.3:7000"
    assert address.advertised(("::1", 7000), Dsn()) == "[::1]:7000"
    assert address.parse_advertised("[::1]:7000") == ("::1", 7000)
    assert address.parse_advertised("10.1.2.3:0") is None  # port 0 is not somewhere to send


def test_the_cli_refuses_a_bad_hint_bind_in_one_line(qdb: QueueDB) -> None:
    result = qdb.cli("worker", "--hint-bind", "db.example.com")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "not an IP address" in result.stderr


def test_a_worker_records_its_hint_address_and_key(qdb: QueueDB) -> None:
    qdb.worker("--hint-bind", "127.0.0.1:0", "--name", "w1")
    qdb.wait_for(lambda: qdb.scalar("SELECT hint_addr FROM mysqlq_workers"), what="the hint address")
    addr, key = qdb.query("SELECT hint_addr, hint_key FROM mysqlq_workers")[0]
    assert addr.startswith("127.0.0.1:") and len(key) == 32
    # `mysqlq workers` never shows the key.
    assert key.hex() not in qdb.cli("workers", "--json", check=True).stdout


def test_a_worker_re_registered_by_the_reaper_records_its_address_again(qdb: QueueDB) -> None:
    qdb.worker("--hint-bind", "127.0.0.1:0", "--heartbeat-interval", "0.2", "--lease", "5")
    qdb.wait_for(lambda: qdb.scalar("SELECT hint_addr FROM mysqlq_workers"), what="the hint address")
    first = qdb.query("SELECT hint_addr, hint_key FROM mysqlq_workers")[0]
    qdb.query("DELETE FROM mysqlq_workers")  # as the reaper does to a worker it took for dead
    qdb.wait_for(lambda: qdb.scalar("SELECT hint_addr FROM mysqlq_workers"), what="the worker to register again")
    assert qdb.query("SELECT hint_addr, hint_key FROM mysqlq_workers")[0] == first
