"""A DSN with several hosts: connections go to the first that answers and move on when it fails."""

from __future__ import annotations

import socket
import urllib.parse

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import DatabaseUnavailable, Dsn, Producer, Settings
from mysqlq.store.db import Database, connect

from ..conftest import MariaDBServer, QueueDB, unavailable


def closed_port() -> int:
    """A TCP port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tcp_address(server: MariaDBServer) -> str:
    if server.tcp_dsn is None:
        unavailable("needs the private server's TCP address (MYSQLQ_TEST_DSN is set)")
    url = urllib.parse.urlsplit(server.tcp_dsn)
    return f"{url.hostname}:{url.port}"


def multi_host_dsn(qdb: QueueDB, *hosts: str) -> Dsn:
    return Dsn.parse(f"mysql://root@{','.join(hosts)}/{qdb.name}")


def test_a_dead_first_host_is_passed_over(qdb: QueueDB) -> None:
    dsn = multi_host_dsn(qdb, f"127.0.0.1:{closed_port()}", tcp_address(qdb.server))
    conn = connect(dsn)
    with conn.cursor() as cur:
        cur.execute("SELECT DATABASE()")
        assert cur.fetchone() == (qdb.name,)
    conn.close()
    with Producer(Settings(dsn=dsn, hint=False)) as producer:
        job_id = producer.enqueue("test.record")
    assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (job_id,)) == "ready"


def test_when_no_host_answers_the_error_says_so_in_one_line(qdb: QueueDB) -> None:
    dsn = multi_host_dsn(qdb, f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}")
    with pytest.raises(DatabaseUnavailable, match="none of the 2 hosts of the DSN answers") as caught:
        connect(dsn)
    assert "\n" not in str(caught.value)


def test_a_worker_on_a_multi_host_dsn_runs_jobs(qdb: QueueDB) -> None:
    dsn = multi_host_dsn(qdb, f"127.0.0.1:{closed_port()}", tcp_address(qdb.server))
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.record") for _ in range(5)]
    env = qdb.env(MYSQLQ_DSN=f"mysql://root@{','.join(f'{h}:{p}' for h, p in dsn.addresses)}/{qdb.name}")
    assert qdb.worker("--burst", env=env).wait(timeout=60) == 0
    assert qdb.query(f"SELECT DISTINCT status FROM {EVERY_JOB} WHERE id IN ({','.join(map(str, ids))})") == [("done",)]


def test_a_retried_unit_of_work_reconnects_through_the_host_list(qdb: QueueDB) -> None:
    db = Database(multi_host_dsn(qdb, f"127.0.0.1:{closed_port()}", tcp_address(qdb.server)))
    first = db.run(lambda cur: cur.execute("SELECT CONNECTION_ID()") and cur.fetchone()[0])
    qdb.query(f"KILL {int(first)}")
    second = db.run(lambda cur: cur.execute("SELECT CONNECTION_ID()") and cur.fetchone()[0])
    assert second != first
    db.close()


def test_the_order_of_the_hosts_does_not_change_whose_hints_a_client_hears() -> None:
    """Workers listing their own node first share one hint scope with producers listing another."""
    first = Dsn.parse("mysql://u@db1:3306,db2:3306,db3:3306/app")
    assert Dsn.parse("mysql://u@db2:3306,db3:3306,db1:3306/app").identity == first.identity
    assert Dsn.parse("mysql://u@db1:3306,db2:3306/app").identity != first.identity
    assert Dsn.parse("mysql://u@db1:3306,db2:3306,db3:3306/other").identity != first.identity


def test_a_producer_listing_the_hosts_in_another_order_wakes_the_worker(qdb: QueueDB) -> None:
    """A worker listing its own node first, a producer listing another first: the hint still arrives."""
    server, dead = tcp_address(qdb.server), f"127.0.0.1:{closed_port()}"
    worker_dsn = f"mysql://root@{dead},{server}/{qdb.name}"
    producer_dsn = f"mysql://root@{server},{dead}/{qdb.name}"
    qdb.worker("--poll-interval", "60", env=qdb.env(MYSQLQ_DSN=worker_dsn))
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers"), what="the worker to register")
    qdb.wait_for(lambda: list((qdb.tmp / "hints").iterdir()), what="the worker's socket")
    result = qdb.cli("enqueue", "test.record", env=qdb.env(MYSQLQ_DSN=producer_dsn), check=True)
    assert "hint." not in result.stderr, result.stderr
    qdb.wait_for(lambda: qdb.records(), timeout=30, what="the hinted job to run (the next poll is a minute away)")
