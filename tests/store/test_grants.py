"""The least privileges of docs/security.md, tested: accounts made with exactly the page's GRANT
statements run each role. A producer enqueues in every form and can do nothing else; workers run
every path (claims, outcomes, retries, results, transactional handlers, workflows, concurrency and
rate limits, the schedule, retention, waiting for a migration, and the reaper leading: a killed
worker's claim comes back through the process list, while a live worker of the same account is
left alone); the dashboard serves its pages read-only and acts with its extra grants; operators run
their commands; `mysqlq migrate` creates the database and the schema. MariaDB and MySQL lanes alike."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import MySQLdb
import pytest
from mysqlq_harness.jobs import EVERY_JOB

import mysqlq
from mysqlq import Dsn, Job, Settings
from mysqlq.store.db import connect
from mysqlq.store.sql import migrations
from mysqlq.web import WebSettings, create_app

from ..conftest import REPO, QueueDB, query_once, with_database
from ..db_users import DatabaseUser, database_user
from ..leader.test_scheduler import EVERY_MINUTE, scheduler, utc
from ..ops_fixtures import plant
from ..web_fixtures import csrf_of, web_server

PAGE = REPO / "docs" / "security.md"
ACCOUNT = re.compile(r"'mysqlq_\w+'@'%'")
DENIED = (1142, 1143)  # command denied to user (for a table, for a column)
HOUR = 3600


def page_grants(role: str) -> list[str]:
    """The GRANT statements under ``<!-- grants: ROLE -->`` in the Security page, with ``{db}`` and
    ``{user}`` where the page says ``app`` and ``'mysqlq_…'@'%'``."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(rf"<!-- grants: {re.escape(role)} -->\n```sql\n(.*?)```", text, re.DOTALL)
    assert found, f"docs/security.md has no grants for {role}"
    statements = [line.rstrip(";") for line in found.group(1).splitlines() if line.strip()]
    assert statements and all(line.startswith("GRANT ") and ACCOUNT.search(line) for line in statements)
    return [ACCOUNT.sub("{user}", re.sub(r" ON app\.", " ON {db}.", line)) for line in statements]


def granted(qdb: QueueDB, *roles: str, extra: tuple[str, ...] = (), **options: Any) -> Any:
    """An account with the page's grants for ``roles`` (and ``extra`` ones), as db_users.database_user."""
    return database_user(qdb, *(grant for role in roles for grant in page_grants(role)), *extra, **options)


def refused(dsn: str, statement: str) -> int:
    """The error code the server answers ``statement`` with, as the account of ``dsn``."""
    with pytest.raises(MySQLdb.OperationalError) as caught:
        query_once(connect(Dsn.parse(dsn)), statement)
    return int(caught.value.args[0])


def status(qdb: QueueDB, job_id: int) -> tuple[str, int]:
    row = qdb.query(f"SELECT status, attempts FROM {EVERY_JOB} WHERE id = %s", (job_id,))[0]
    return str(row[0]), int(row[1])


def test_the_page_grants_the_worker_every_table_of_the_schema(qdb: QueueDB) -> None:
    tables = {row[0] for row in qdb.query("SHOW TABLES")}
    named = {match for grant in page_grants("worker") for match in re.findall(r"\{db\}\.(\w+)", grant)}
    assert named == tables  # a table added by a migration needs its grants on the page
    for role in ("producer", "dashboard", "dashboard-actions", "operator"):
        assert {t for grant in page_grants(role) for t in re.findall(r"\{db\}\.(\w+)", grant)} <= tables
    assert page_grants("migrate") == ["GRANT CREATE, ALTER, SELECT, INSERT, UPDATE, DELETE ON {db}.* TO {user}"]


# ------------------------------------------------------------------------------------ a producer

@pytest.fixture
def producer_account(qdb: QueueDB) -> Iterator[DatabaseUser]:
    with granted(qdb, "producer", prefix="mq_prod") as user:
        yield user


def test_a_producer_with_its_grants_enqueues_in_every_form(qdb: QueueDB, producer_account: DatabaseUser) -> None:
    dsn = producer_account.dsn(qdb.dsn)
    settings = Settings(dsn=Dsn.parse(dsn), hint_dir=str(qdb.tmp / "hints"))
    with mysqlq.Producer(settings) as producer:
        first = producer.enqueue("test.record", {"n": 1}, priority=5, tags=["tenant:42"])
        later = producer.enqueue("test.record", delay=HOUR)
        keyed = producer.enqueue("test.record", dedupe_key="order-7")
        assert producer.enqueue("test.record", dedupe_key="order-7") == keyed
        after = producer.enqueue("test.record", after=[first])
        group = producer.group([Job("test.echo", {"value": n}) for n in range(2)], then=Job("test.gather"))
        chain = producer.chain(Job("test.step", {"tag": "a"}), Job("test.step", {"tag": "b"}))
        assert producer.enqueue_many([Job("test.record", {"n": n}, tags=["bulk"] if n == 0 else ())
                                      for n in range(5)]) == 5
        fair = producer.enqueue("test.record", fairness_key="tenant-1")  # its turn: mysqlq_fair_keys
        period = producer.enqueue("test.record", dedupe_key="digest", dedupe_scope="10m")  # mysqlq_dedupe_periods
        assert producer.enqueue("test.record", dedupe_key="digest", dedupe_scope="10m") == period
        period_state = producer.job(dedupe_key="digest")
        assert period_state is not None and period_state.id == period
        assert producer.enqueue_many([Job("test.record", fairness_key=f"tenant-{n}") for n in range(3)]) == 3
        with producer.transaction() as tx:
            in_tx = tx.enqueue("test.record", after=[later])
        state = producer.job(first)
        assert state is not None and state.status == "ready"
    conn = connect(Dsn.parse(dsn))
    try:
        outbox = mysqlq.enqueue_on(conn, Job("test.record", {"outbox": True}), settings)
        conn.commit()
    finally:
        conn.close()

    async def enqueue_async() -> list[int]:
        with mysqlq.Producer(settings, pool_size=2) as pooled:
            one = await pooled.aenqueue("test.record", {"async": 1})
            async with pooled.atransaction() as atx:
                two = await atx.aenqueue("test.record", {"async": 2})
            return [one, two]

    from_async = asyncio.run(enqueue_async())
    cli = qdb.cli("enqueue", "test.record", '{"cli": 1}', "--tag", "from:cli", env=qdb.env(MYSQLQ_DSN=dsn),
                  check=True)

    ids = [first, later, keyed, after, *group.members, group.callback, *chain, in_tx, outbox, *from_async,
           int(cli.stdout), fair, period]
    statuses = dict(qdb.query(f"SELECT id, status FROM mysqlq_jobs WHERE id IN ({','.join(map(str, ids))})"))
    assert statuses == {**dict.fromkeys(ids, "ready"), later: "scheduled", after: "waiting", group.callback: "waiting",
                        chain[1]: "waiting", in_tx: "waiting"}
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_dependencies") == 1 + 2 + 1 + 1
    assert sorted(row[0] for row in qdb.query("SELECT tag FROM mysqlq_job_tags")) == ["bulk", "from:cli", "tenant:42"]


def test_a_producers_hint_wakes_a_worker_it_finds_in_the_registry(qdb: QueueDB, producer_account: DatabaseUser,
                                                                   tmp_path: Path) -> None:
    # A worker as on another host: its hint socket is not in the producer's directory, it takes
    # network hints, and its next poll is a minute away.
    (tmp_path / "elsewhere").mkdir()
    qdb.worker("--hint-bind", "127.0.0.1", "--hint-dir", str(tmp_path / "elsewhere"), "--poll-interval", "60")
    qdb.wait_for(lambda: qdb.scalar("SELECT hint_addr FROM mysqlq_workers"), what="the worker's hint address")
    settings = Settings(dsn=Dsn.parse(producer_account.dsn(qdb.dsn)), hint_dir=str(qdb.tmp / "hints"))
    with mysqlq.Producer(settings) as producer:
        first = producer.enqueue("test.record")
        qdb.wait_for(lambda: status(qdb, first)[0] == "done", what="the first job")
        second = producer.enqueue("test.record")  # the worker is idle until its next poll: only a hint wakes it
        qdb.wait_for(lambda: status(qdb, second)[0] == "done", timeout=20, what="the hint to wake the worker")


def test_a_producer_cannot_delete_claim_or_touch_the_workers(qdb: QueueDB, producer_account: DatabaseUser) -> None:
    [job_id] = plant(qdb, "ready")
    dsn = producer_account.dsn(qdb.dsn)
    assert refused(dsn, f"DELETE FROM mysqlq_jobs WHERE id = {job_id}") in DENIED
    assert refused(dsn, "DELETE FROM mysqlq_dependencies") in DENIED
    assert refused(dsn, "UPDATE mysqlq_workers SET heartbeat_at = NOW(6)") in DENIED
    assert refused(dsn, "UPDATE mysqlq_leaders SET epoch = epoch + 1") in DENIED
    assert refused(dsn, "SELECT * FROM mysqlq_schedules") in DENIED
    assert refused(dsn, "INSERT INTO mysqlq_queues (name, paused) VALUES ('default', 1)") in DENIED
    assert status(qdb, job_id) == ("ready", 0)


# ------------------------------------------------------------------------------------ workers

def no_denials(qdb: QueueDB) -> None:
    logs = qdb.logs()
    # Error numbers stand alone: a batch id or a duration may hold the same digits inside it.
    for words in (r"denied", r"\b114[23]\b", r"Traceback"):
        found = re.search(words, logs)
        assert found is None, logs[max(0, found.start() - 2000):found.end() + 2000]


def test_workers_with_their_grants_run_every_path_and_the_reaper(qdb: QueueDB, tmp_path: Path) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    schedule = tmp_path / "schedule.toml"
    schedule.write_text('[tick]\nevery = "1s"\nhandler = "test.record"\nqueue = "ticks"\ntags = ["tick"]\n'
                        'dedupe_scope = "1h"\n')
    old = plant(qdb, "done", 3, ended_ago=3 * HOUR)
    qdb.query("INSERT INTO mysqlq_dedupe_periods VALUES ('expired', %s, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)",
              (old[0],))
    qdb.query("INSERT INTO mysqlq_job_tags (job_id, tag) VALUES (%s, 'old')", (old[0],))
    with granted(qdb, "producer", prefix="mq_prod") as producer_account, \
            granted(qdb, "worker", extra=("GRANT INSERT ON {db}.test_effects TO {user}",), prefix="mq_work") as account:
        settings = Settings(dsn=Dsn.parse(producer_account.dsn(qdb.dsn)), hint_dir=str(qdb.tmp / "hints"))
        env = qdb.env(MYSQLQ_DSN=account.dsn(qdb.dsn), MYSQLQ_RETAIN_DONE="2h", MYSQLQ_SCHEDULE=str(schedule))

        # A worker killed while it holds a claim (and, being the first, leads). It keeps every job: a
        # retention turn of its own, cut short by the kill, would hold the turn for a minute.
        with mysqlq.Producer(settings) as producer:
            held = [producer.enqueue("test.sleep", {"seconds": 0.3}, queue="victim") for _ in range(4)]
        # The reaper trusts a connection id only if it was written after the server started, which it
        # knows to the second (its Uptime): on a server started a moment ago, wait that second out.
        qdb.wait_for(lambda: int(qdb.query("SHOW GLOBAL STATUS LIKE 'Uptime'")[0][1]) >= 3,
                     what="the server to have run for a few seconds")
        victim = qdb.worker("--name", "victim", "--queue", "victim", "--batch-size", "4",
                            env={**env, "MYSQLQ_RETAIN_DONE": "off", "MYSQLQ_RETAIN_DEAD": "off"})
        qdb.wait_for(lambda: status(qdb, held[0])[0] == "running", what="the victim to claim its batch")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()

        # Two live workers of the same account: one beats every second; the other, at the default
        # interval, holds a job for longer than the reaper takes to judge a missing connection.
        qdb.worker("--name", "rescuer", "--queue", "victim,default,ticks", "--heartbeat-interval", "1", env=env)
        qdb.worker("--name", "steady", "--queue", "steady,default", env=env)
        with mysqlq.Producer(settings) as producer:
            long = producer.enqueue("test.sleep", {"seconds": 4}, queue="steady")
            plain = producer.enqueue("test.record")
            dead = producer.enqueue("test.fail", max_attempts=2)
            flaky = producer.enqueue("test.flaky", {"succeed_on": 2})
            effect = producer.enqueue("test.effect")
            echo = producer.enqueue("test.echo", {"value": {"answer": 42}})
            delayed = producer.enqueue("test.record", delay=1)
            limited = [producer.enqueue("test.limited", {"seconds": 0.2}, concurrency_key="account-7")
                       for _ in range(3)]
            chain = producer.chain(Job("test.step", {"tag": "a"}), Job("test.step", {"tag": "b"}))
            group = producer.group([Job("test.echo", {"value": n}) for n in range(2)], then=Job("test.gather"))
            rated = [producer.enqueue("test.rated_key", {"key": "k"}) for _ in range(8)]  # 5 a second
            cancelled = producer.enqueue("test.cooperative", {"seconds": 20})
        qdb.wait_for(lambda: status(qdb, cancelled)[0] == "running", what="the cooperative job to start")
        qdb.cli("cancel", str(cancelled), check=True)  # an operator's cancel, seen by the worker running it

        done = [*held, long, plain, flaky, effect, echo, delayed, *limited, *rated, *chain, *group.members,
                group.callback]
        marks = ",".join(map(str, done))
        qdb.wait_for(lambda: qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE id IN ({marks}) AND status = 'done'")
                     == len(done) and status(qdb, dead)[0] == "dead", timeout=60, what="every job to end")
        qdb.wait_for(lambda: qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE queue = 'ticks' AND status = 'done'"),
                     what="a scheduled tick to run")
        qdb.wait_for(lambda: qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE id IN ({','.join(map(str, old))})")
                     == 0, what="retention to delete the old jobs")
        qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_dedupe_periods WHERE dedupe_key = 'expired'")
                     == 0, what="retention to delete the expired dedupe key")
        qdb.wait_for(lambda: status(qdb, cancelled)[0] == "cancelled", what="the running job to be cancelled")
        qdb.stop_workers()  # SIGTERM: each leaves the registry and hands leadership on

    # The killed worker's claim came back through the process list (its lease was 60 s).
    assert [status(qdb, job_id) for job_id in held] == [("done", 2)] * 4
    assert "reaper.reaped" in qdb.logs() and "victim#" in qdb.logs()
    assert status(qdb, long) == ("done", 1)  # the live worker of the same account was seen, not reaped
    assert status(qdb, flaky) == ("done", 2) and status(qdb, dead) == ("dead", 2)
    assert qdb.scalar("SELECT COUNT(*) FROM test_effects WHERE job_id = %s", (effect,)) == 1
    assert json.loads(qdb.scalar(f"SELECT result FROM {EVERY_JOB} WHERE id = %s", (echo,))) == {"answer": 42}
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags WHERE tag = 'tick'") >= 1  # the schedule's tags
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_dedupe_periods WHERE dedupe_key LIKE 'mysqlq:schedule:tick:%'") >= 1
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags WHERE tag = 'old'") == 0  # deleted with their jobs
    no_denials(qdb)


def test_a_worker_with_its_grants_waits_for_a_migration_at_work(qdb: QueueDB) -> None:
    latest = max(version for version, _ in migrations())
    qdb.query("UPDATE mysqlq_migration_lock SET holder = 'another', lease_until = NOW(6) + INTERVAL 60 SECOND")
    qdb.query("DELETE FROM mysqlq_schema_version WHERE version = %s", (latest,))
    [job_id] = plant(qdb, "ready")
    with granted(qdb, "worker", prefix="mq_work") as account:
        qdb.worker(env=qdb.env(MYSQLQ_DSN=account.dsn(qdb.dsn)))
        qdb.wait_for(lambda: "worker.waiting_for_migration" in qdb.logs(), what="the worker to wait")
        qdb.query("INSERT INTO mysqlq_schema_version (version, applied_at) VALUES (%s, NOW(6))", (latest,))
        qdb.query("UPDATE mysqlq_migration_lock SET holder = NULL, lease_until = NOW(6)")
        qdb.wait_for(lambda: status(qdb, job_id)[0] == "done", what="the job to run after the migration")
        qdb.stop_workers()
    no_denials(qdb)


# ------------------------------------------------------------------------------------ the dashboard

def test_the_dashboard_with_read_only_grants_serves_every_page(qdb: QueueDB) -> None:
    from mysqlq_harness.net import get

    [dead] = plant(qdb, "dead", error="boom")
    plant(qdb, "done", 2, ended_ago=60)
    scheduler(qdb, EVERY_MINUTE).turn(utc(2026, 11, 24, 10, 0, 30))
    with granted(qdb, "dashboard", prefix="mq_web") as account:
        with web_server(qdb, "--read-only", MYSQLQ_DSN=account.dsn(qdb.dsn)) as base:  # checks the schema first
            for path in ("/", "/jobs", "/jobs?status=dead", "/jobs?tag=tenant:42", f"/jobs/{dead}",
                         f"/jobs/{dead}/workflow", "/workers",
                         "/schedules", "/metrics"):
                code, body = get(base + path)
                assert code == 200, (path, body[-2000:])
        assert refused(account.dsn(qdb.dsn), f"UPDATE mysqlq_jobs SET status = 'ready' WHERE id = {dead}") in DENIED


def test_the_dashboard_with_its_action_grants_acts(qdb: QueueDB) -> None:
    [dead, other_dead] = plant(qdb, "dead", 2, error="boom")
    [ready] = plant(qdb, "ready")
    with mysqlq.Producer(qdb.settings()) as producer:
        parent = producer.enqueue("test.record", delay=HOUR)
        child = producer.enqueue("test.record", after=[parent])
    scheduler(qdb, EVERY_MINUTE).turn(utc(2026, 11, 24, 10, 0, 30))
    with granted(qdb, "dashboard", "dashboard-actions", prefix="mq_web") as account:
        web = create_app(WebSettings(Settings(dsn=Dsn.parse(account.dsn(qdb.dsn)),
                                              hint_dir=str(qdb.tmp / "hints")))).test_client()
        token = csrf_of(web.get("/").get_data(as_text=True))
        for path in (f"/jobs/{dead}/retry", f"/jobs/{ready}/cancel", f"/jobs/{parent}/cancel-workflow", "/retry-dead",
                     "/queues/default/pause", "/schedules/minutely/pause"):
            response = web.post(path, data={"csrf": token}, follow_redirects=True)
            assert response.status_code == 200 and "denied" not in response.get_data(as_text=True), path
    assert [status(qdb, job_id)[0] for job_id in (dead, other_dead, ready, parent, child)] == [
        "ready", "ready", "cancelled", "cancelled", "cancelled"]
    assert qdb.scalar("SELECT paused FROM mysqlq_queues WHERE name = 'default'") == 1
    assert qdb.scalar("SELECT paused FROM mysqlq_schedules WHERE name = 'minutely'") == 1


def test_operators_with_the_dashboards_grants_and_purges_run_the_commands(qdb: QueueDB) -> None:
    [dead] = plant(qdb, "dead", error="boom")
    [ready] = plant(qdb, "ready")
    old = plant(qdb, "done", 2, ended_ago=2 * HOUR)
    qdb.query("INSERT INTO mysqlq_job_tags (job_id, tag) VALUES (%s, 'old'), (%s, 'old')", tuple(old))
    scheduler(qdb, EVERY_MINUTE).turn(utc(2026, 11, 24, 10, 0, 30))
    with granted(qdb, "dashboard", "dashboard-actions", "operator", prefix="mq_ops") as account:
        env = qdb.env(MYSQLQ_DSN=account.dsn(qdb.dsn))
        for args in (["stats"], ["workers"], ["jobs", "list"], ["jobs", "list", "--tag", "old"],
                     ["jobs", "show", str(dead)], ["retry", str(dead)],
                     ["cancel", str(ready)], ["pause", "default"], ["resume", "default"],
                     ["schedule", "pause", "minutely"], ["purge", "--done-older-than", "1h"], ["limits"],
                     ["limits", "set", "--handler", "test.record", "10/s"], ["limits", "lift", "--queue", "default"],
                     ["limits", "reset", "--handler", "test.record"]):
            qdb.cli(*args, env=env, check=True)
        [waiting] = plant(qdb, "scheduled")
        keys = qdb.tmp / "keys"
        keys.write_text(qdb.cli("keys", "generate", check=True).stdout)
        keys.chmod(0o600)
        rotated = qdb.cli("keys", "rotate", env={**env, "MYSQLQ_ENCRYPTION_KEYS_FILE": str(keys)}, check=True)
        assert rotated.stdout.startswith("re-encrypted 2 job(s)")  # the retried dead job and the scheduled one
        assert bytes(qdb.scalar("SELECT payload FROM mysqlq_jobs WHERE id = %s", (waiting,))).startswith(b"mysqlq-enc:")
    assert [status(qdb, dead)[0], status(qdb, ready)[0]] == ["ready", "cancelled"]
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE id IN ({old[0]}, {old[1]})") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags") == 0  # purged with their jobs
    assert qdb.scalar("SELECT paused FROM mysqlq_schedules WHERE name = 'minutely'") == 1


# ------------------------------------------------------------------------------------ mysqlq migrate

def test_migrate_with_its_grants_creates_the_database_and_the_schema(qdb: QueueDB) -> None:
    name = "mysqlq_g_" + secrets.token_hex(4)
    try:
        with granted(qdb, "migrate", prefix="mq_admin", database=name) as account:
            env = qdb.env(MYSQLQ_DSN=account.dsn(with_database(qdb.dsn, name)))
            created = qdb.cli("migrate", "--create-database", env=env, check=True).stdout
            assert f"created database '{name}'" in created and "schema migrated to version" in created
            assert "schema is up to date" in qdb.cli("migrate", env=env, check=True).stdout
        tables = query_once(connect(Dsn.parse(with_database(qdb.dsn, name))), "SHOW TABLES")
        assert len(tables) == len(qdb.query("SHOW TABLES"))
    finally:
        qdb.query(f"DROP DATABASE IF EXISTS `{name}`")
