"""Tags on jobs against the real server: every way of enqueueing writes them (the tags column and one
mysqlq_job_tags row per tag, in the job's transaction), `jobs show` and the dashboard show them,
`jobs list --tag` and the dashboard's tag filter find them, retention deletes them with their jobs,
and a job without tags pays nothing for them."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mysqlq import InvalidJob, Job, enqueue_on
from mysqlq.core.config import Dsn
from mysqlq.core.errors import ConfigError
from mysqlq.leader.schedule_file import parse
from mysqlq.store import ops, schedules, web
from mysqlq.store.db import Connection, Cursor, connect
from mysqlq.store.sql import query

from ..conftest import MariaDBServer, QueueDB, fresh_database, with_database
from ..cost.test_enqueue_cost import session_counters
from ..cost.test_ops_hot_path import COLUMNS, handler_reads, reads_of
from ..ops_fixtures import assert_one_line_error
from ..plans import explain_json, sorts_rows, tables
from ..web.test_web_pages import client


def tags_of(qdb: QueueDB, job_id: int) -> tuple[list[str] | None, list[str]]:
    """The job's tags column (decoded) and its rows in mysqlq_job_tags (sorted)."""
    column = qdb.scalar("SELECT tags FROM mysqlq_jobs WHERE id = %s", (job_id,))
    rows = [str(row[0]) for row in qdb.query("SELECT tag FROM mysqlq_job_tags WHERE job_id = %s ORDER BY tag",
                                             (job_id,))]
    return (None if column is None else json.loads(column)), rows


def listed(qdb: QueueDB, *args: str) -> list[int]:
    return [row["id"] for row in json.loads(qdb.cli("jobs", "list", "--json", *args, check=True).stdout)]


def test_enqueue_stores_the_tags_once_each_in_the_order_given(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", tags=["tenant:42", "order:1001", "tenant:42"])
        plain = producer.enqueue("test.record")
    assert tags_of(qdb, job_id) == (["tenant:42", "order:1001"], ["order:1001", "tenant:42"])
    assert tags_of(qdb, plain) == (None, [])


@pytest.mark.parametrize("tags, message", [
    ("tenant:42", "tags must be a list of strings"),
    (["a b"], "without spaces"),
    ([""], "1 to 64"),
    (["x" * 65], "1 to 64"),
    (["tab\there"], "without spaces"),
    (['say"hi'], "quotes"),
    ([7], "got 7"),
    ([f"t{n}" for n in range(11)], "at most 10 tags, got 11"),
])
def test_bad_tags_are_refused_in_one_line_before_anything_is_written(qdb: QueueDB, tags: Any, message: str) -> None:
    with qdb.producer() as producer:
        with pytest.raises(InvalidJob, match=message) as caught:
            producer.enqueue("test.record", tags=tags)
        assert "\n" not in str(caught.value)
        with pytest.raises(InvalidJob, match=f"item 1: .*{message}"):
            producer.enqueue_many([Job("test.record"), Job("test.record", tags=tags)])
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags") == 0


def test_ten_tags_of_sixty_four_characters_fit(qdb: QueueDB) -> None:
    tags = [f"{n}" + "é" * 63 for n in range(10)]
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", tags=tags)
    assert tags_of(qdb, job_id) == (tags, sorted(tags))


def test_a_job_without_tags_is_one_statement_and_one_with_tags_one_transaction(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.record")
        before = session_counters(producer)
        producer.enqueue("test.record")
        middle = session_counters(producer)
        producer.enqueue("test.record", tags=["a", "b"])
        after = session_counters(producer)
    assert middle["Com_insert"] - before["Com_insert"] == 1
    assert middle["Questions"] - before["Questions"] == 1
    assert after["Com_insert"] - middle["Com_insert"] == 2  # the job, then both its tags in one statement


def test_a_taken_dedupe_key_keeps_the_existing_jobs_tags(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", dedupe_key="k", tags=["first"])
        again = producer.enqueue("test.record", dedupe_key="k", tags=["second"])
        assert producer.enqueue_many([Job("test.record", dedupe_key="k", tags=["third"])]) == 0
    assert again == first
    assert tags_of(qdb, first) == (["first"], ["first"])
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags") == 1


def test_enqueue_many_tags_the_jobs_that_have_tags_and_inserts_the_rest_in_bulk(qdb: QueueDB) -> None:
    jobs = [Job("test.record", {"n": n}, tags=[f"n:{n}", "batch"] if n % 3 == 0 else ()) for n in range(30)]
    with qdb.producer() as producer:
        assert producer.enqueue_many(jobs) == 30
    rows = qdb.query("SELECT id, payload, tags FROM mysqlq_jobs ORDER BY id")
    by_n = {json.loads(payload)["n"]: (int(job_id), tags) for job_id, payload, tags in rows}
    for n, (job_id, _) in by_n.items():
        expected = [f"n:{n}", "batch"] if n % 3 == 0 else None
        assert tags_of(qdb, job_id)[0] == expected
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags WHERE tag = 'batch'") == 10


def test_enqueue_many_inserts_tagged_jobs_in_chunks_and_their_tags_in_one_statement_each(qdb: QueueDB) -> None:
    # 2,500 tagged jobs (chunks of 1,000), a taken dedupe key among them, plain jobs and a job after
    # another: three statements per chunk of tagged jobs, not two per job.
    with qdb.producer() as producer:
        taken = producer.enqueue("test.record", {"n": -1}, dedupe_key="taken", tags=["kept"])
        before = session_counters(producer)
        jobs = [Job("test.record", {"n": n}, tags=[f"n:{n}", "bulk"], dedupe_key="taken" if n == 1234 else None)
                for n in range(2500)]
        jobs += [Job("test.record", {"n": 2500 + n}) for n in range(10)]
        jobs.append(Job("test.record", {"n": 9999}, tags=["after"], after=[taken]))
        assert producer.enqueue_many(jobs) == 2500 - 1 + 10 + 1
        after = session_counters(producer)
    assert after["Com_insert"] - before["Com_insert"] <= 3 * 2 + 1 + 3  # tagged chunks, plain, the job after
    rows = qdb.query("SELECT id, payload FROM mysqlq_jobs")
    ids = {json.loads(payload)["n"]: int(job_id) for job_id, payload in rows}
    assert len(ids) == 2500 - 1 + 10 + 1 + 1 and 1234 not in ids
    assert tags_of(qdb, taken) == (["kept"], ["kept"])
    for n in (0, 999, 1000, 1233, 1235, 2499):
        assert tags_of(qdb, ids[n]) == ([f"n:{n}", "bulk"], sorted([f"n:{n}", "bulk"]))
    assert tags_of(qdb, ids[2500]) == (None, [])
    assert tags_of(qdb, ids[9999]) == (["after"], ["after"])
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags WHERE tag = 'bulk'") == 2499
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags") == 2 * 2499 + 2


def test_enqueue_many_rolls_back_and_inserts_one_by_one_when_another_insert_lands_among_a_chunks_ids(
        qdb: QueueDB, monkeypatch: pytest.MonkeyPatch) -> None:
    # A chunk's ids are one block on InnoDB; were another insert's row ever among them, its tag rows
    # could not be told apart by id. Simulated with ids two apart (auto_increment_increment, as on a
    # Galera node): a row committed between two of the chunk's just before they are read back. The
    # whole enqueue_many rolls back and goes again, one job at a time.
    from mysqlq.store import jobs as store_jobs

    read_back = store_jobs.execute
    landed: list[int] = []

    def intruding(cur: Cursor, name: str, params: Any = None) -> int:
        if name == "jobs_inserted" and not landed:
            conn = qdb.connect()
            try:
                with conn.cursor() as other:
                    other.execute("SET SESSION innodb_lock_wait_timeout = 5")
                    other.execute("INSERT INTO mysqlq_jobs (id, queue, handler, payload, status, run_at, enqueued_at,"
                                  " max_attempts, time_limit)"
                                  " VALUES (%s, 'default', 'test.record', '{}', 'ready', NOW(6), NOW(6), 1, 1)",
                                  (params["first"] + 1,))
                    landed.append(params["first"] + 1)
            finally:
                conn.close()
        return read_back(cur, name, params)

    monkeypatch.setattr(store_jobs, "execute", intruding)
    (increment,) = qdb.query("SELECT @@GLOBAL.auto_increment_increment")[0]
    qdb.query("SET GLOBAL auto_increment_increment = 2")  # for connections made from now on
    try:
        with qdb.producer() as producer:
            assert producer.enqueue_many([Job("test.record", {"n": n}, tags=[f"n:{n}"]) for n in range(5)]) == 5
    finally:
        qdb.query("SET GLOBAL auto_increment_increment = %s", (increment,))
    assert landed
    rows = qdb.query("SELECT id, payload FROM mysqlq_jobs WHERE id <> %s", (landed[0],))
    ids = {json.loads(payload)["n"]: int(job_id) for job_id, payload in rows}
    assert sorted(ids) == [0, 1, 2, 3, 4]  # each once: the first attempt rolled back whole
    assert all(job_id > landed[0] for job_id in ids.values())  # inserted again, after the intruder
    for n in range(5):
        assert tags_of(qdb, ids[n]) == ([f"n:{n}"], [f"n:{n}"])
    assert tags_of(qdb, landed[0]) == (None, [])


def test_enqueue_many_names_a_bad_jobs_place_in_the_list_given_whatever_the_tagged_jobs_before_it(
        qdb: QueueDB) -> None:
    jobs = [Job("test.record", {"n": 0}, tags=["t"]), Job("test.record", {"n": 1}), Job("test.record", "x" * 2000),
            Job("test.record", "y" * 2000, tags=["t"])]
    with qdb.producer(max_payload_bytes=1000) as producer:
        with pytest.raises(InvalidJob, match=r"^item 2: "):
            producer.enqueue_many(jobs)
        with pytest.raises(InvalidJob, match=r"^item 3: "):
            producer.enqueue_many([jobs[0], jobs[1], jobs[1], jobs[3]])  # a tagged job's own chunk
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0


def test_every_other_way_of_enqueueing_writes_the_tags(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = {"aenqueue": asyncio.run(producer.aenqueue("test.record", tags=["via:aenqueue"]))}
        with producer.transaction() as tx:
            ids["transaction"] = tx.enqueue("test.record", tags=["via:transaction"])
            chain = tx.chain(Job("test.record", tags=["via:chain"]), Job("test.record", tags=["via:chain"]))
        group = producer.group([Job("test.record", tags=["via:group"])], then=Job("test.record", tags=["via:then"]))
        ids["after"] = producer.enqueue("test.record", after=[group.callback], tags=["via:after"])

        async def in_async_transaction() -> int:
            async with producer.atransaction() as atx:
                return await atx.aenqueue("test.record", tags=["via:atransaction"])

        ids["atransaction"] = asyncio.run(in_async_transaction())
    conn = qdb.connect()
    try:
        conn.begin()
        ids["enqueue_on"] = enqueue_on(conn, Job("test.record", tags=["via:enqueue_on"]), qdb.settings())
        conn.commit()
    finally:
        conn.close()
    for via, job_id in ids.items():
        assert tags_of(qdb, job_id) == ([f"via:{via}"], [f"via:{via}"]), via
    assert [tags_of(qdb, job_id)[1] for job_id in chain] == [["via:chain"], ["via:chain"]]
    assert tags_of(qdb, group.members[0])[1] == ["via:group"] and tags_of(qdb, group.callback)[1] == ["via:then"]


def test_tags_enqueued_in_a_transaction_that_rolls_back_are_gone_with_the_job(qdb: QueueDB) -> None:
    conn = qdb.connect()
    try:
        conn.begin()
        enqueue_on(conn, Job("test.record", tags=["gone"]), qdb.settings())
        conn.rollback()
    finally:
        conn.close()
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags") == 0


def test_mysqlq_enqueue_takes_tags_from_options_the_environment_and_file_lines(qdb: QueueDB) -> None:
    one = int(qdb.cli("enqueue", "test.record", "--tag", "cli:1", "--tag", "cli:2", check=True).stdout)
    env = int(qdb.cli("enqueue", "test.record", env=qdb.env(MYSQLQ_ENQUEUE_TAG="env:1 env:2"), check=True).stdout)
    lines = qdb.tmp / "jobs.jsonl"
    lines.write_text('{"handler": "test.record", "tags": ["line:1"]}\n{"handler": "test.record"}\n')
    qdb.cli("enqueue", "--file", str(lines), "--tag", "default", check=True)
    assert tags_of(qdb, one)[0] == ["cli:1", "cli:2"]
    assert tags_of(qdb, env)[0] == ["env:1", "env:2"]
    from_file = [json.loads(tags) for (tags,) in qdb.query("SELECT tags FROM mysqlq_jobs WHERE id > %s ORDER BY id",
                                                          (env,))]
    assert sorted(from_file) == [["default"], ["line:1"]]
    assert_one_line_error(qdb.cli("enqueue", "test.record", "--tag", "a b"), "without spaces")


def test_a_schedule_entrys_tags_tag_each_ticks_job(qdb: QueueDB) -> None:
    [entry] = parse('[nightly]\nevery = "1h"\nhandler = "test.record"\ntags = ["sched:nightly", "tenant:1"]\n')
    assert entry.tags == ("sched:nightly", "tenant:1")
    tick = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            job_id, _ = schedules.enqueue_tick(cur, "nightly", entry.job(tick).row(qdb.settings()), tick, tick,
                                               tick + dt.timedelta(hours=1))
    finally:
        conn.close()
    assert tags_of(qdb, job_id) == (["sched:nightly", "tenant:1"], ["sched:nightly", "tenant:1"])
    with pytest.raises(ConfigError, match=r"field 'tags': .*without spaces"):
        parse('[bad]\nevery = "1h"\nhandler = "test.record"\ntags = ["a b"]\n')


def test_jobs_show_prints_the_tags(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", tags=["tenant:42", "order:1001"])
        plain = producer.enqueue("test.record")
    assert "  tags        tenant:42 order:1001\n" in qdb.cli("jobs", "show", str(job_id), check=True).stdout
    assert "  tags        -\n" in qdb.cli("jobs", "show", str(plain), check=True).stdout
    shown = json.loads(qdb.cli("jobs", "show", str(job_id), "--json", check=True).stdout)
    assert shown["tags"] == ["tenant:42", "order:1001"]
    assert json.loads(qdb.cli("jobs", "show", str(plain), "--json", check=True).stdout)["tags"] == []


def test_jobs_list_by_tag_newest_first_with_the_other_filters(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        a = [producer.enqueue("test.record", queue="a", tags=["tenant:42"]) for _ in range(3)]
        b = [producer.enqueue("test.flaky", queue="b", tags=["tenant:42", "vip"]) for _ in range(2)]
        producer.enqueue("test.record", queue="a", tags=["tenant:7"])
        producer.enqueue("test.record", queue="a")
    qdb.query("UPDATE mysqlq_jobs SET status = 'dead', finished_at = NOW(6) WHERE id = %s",
              (a[0],))
    assert listed(qdb, "--tag", "tenant:42") == sorted(a + b, reverse=True)
    assert listed(qdb, "--tag", "tenant:42", "--limit", "2") == sorted(a + b, reverse=True)[:2]
    assert listed(qdb, "--tag", "vip") == sorted(b, reverse=True)
    assert listed(qdb, "--tag", "tenant:42", "--queue", "a") == sorted(a, reverse=True)
    assert listed(qdb, "--tag", "tenant:42", "--status", "dead") == [a[0]]
    assert listed(qdb, "--tag", "tenant:42", "--handler", "test.flaky") == sorted(b, reverse=True)
    assert listed(qdb, "--tag", "nobody") == []
    table = qdb.cli("jobs", "list", "--tag", "vip", check=True).stdout
    assert [line.split()[0] for line in table.splitlines()[1:]] == [str(b[1]), str(b[0])]
    from_env = qdb.cli("jobs", "list", "--json", env=qdb.env(MYSQLQ_JOBS_TAG="vip"), check=True).stdout
    assert [row["id"] for row in json.loads(from_env)] == sorted(b, reverse=True)
    assert_one_line_error(qdb.cli("jobs", "list", "--tag", "a b"), "without spaces")


def test_jobs_list_shows_the_tags_in_a_column_and_in_its_json_when_a_listed_job_has_them(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        plain = producer.enqueue("test.record")
        tagged = producer.enqueue("test.record", tags=["tenant:42", "order:1001"])
    for args in ((), ("--status", "ready"), ("--queue", "default"), ("--tag", "tenant:42")):
        rows = json.loads(qdb.cli("jobs", "list", "--json", *args, check=True).stdout)
        assert {row["id"]: row["tags"] for row in rows}[tagged] == ["tenant:42", "order:1001"], args
    header, *lines = qdb.cli("jobs", "list", check=True).stdout.splitlines()
    assert header.split() == ["id", "queue", "handler", "status", "attempts", "enqueued", "(UTC)", "finished",
                              "(UTC)", "worker", "tags", "error"]
    by_id = {line.split()[0]: line for line in lines}
    assert by_id[str(tagged)].split()[-3:] == ["-", "tenant:42", "order:1001"]  # no worker yet; the tags
    assert by_id[str(plain)].split()[-2:] == ["-", "-"]  # no worker, no tags (and no error)
    assert json.loads(qdb.cli("jobs", "list", "--json", check=True).stdout)[-1]["tags"] == []
    untagged_only = qdb.cli("jobs", "list", "--status", "ready", "--limit", "1", "--queue", "none", check=True)
    assert "tags" not in untagged_only.stdout  # (no job listed)
    qdb.query("DELETE FROM mysqlq_job_tags")
    qdb.query("UPDATE mysqlq_jobs SET tags = NULL")
    assert "tags" not in qdb.cli("jobs", "list", check=True).stdout.splitlines()[0].split()


def test_retention_deletes_the_tags_of_the_jobs_it_deletes_and_only_those(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        old = [producer.enqueue("test.record", tags=["old", f"n:{n}"]) for n in range(3)]
        young = producer.enqueue("test.record", tags=["young"])
        dead = producer.enqueue("test.record", tags=["dead"])
    qdb.query("UPDATE mysqlq_jobs SET status = 'done', finished_at = NOW(6) - INTERVAL 10 DAY "
              "WHERE id IN (%s, %s, %s)", old)
    qdb.query("UPDATE mysqlq_jobs SET status = 'done', finished_at = NOW(6) WHERE id = %s",
              (young,))
    qdb.query("UPDATE mysqlq_jobs SET status = 'dead', finished_at = NOW(6) - INTERVAL 10 DAY "
              "WHERE id = %s", (dead,))
    assert "deleted 3 done" in qdb.cli("purge", "--done-older-than", "7d", check=True).stdout
    assert [str(row[0]) for row in qdb.query("SELECT tag FROM mysqlq_job_tags ORDER BY tag")] == ["dead", "young"]
    assert listed(qdb, "--tag", "old") == []


def test_the_dashboard_shows_a_jobs_tags_and_filters_its_list_by_tag(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        tagged = [producer.enqueue("test.record", queue="q", tags=["tenant:42", "<b>x</b>"]) for _ in range(3)]
        other = producer.enqueue("test.record", queue="q", tags=["tenant:7"])
    web = client(qdb, page_size=2)
    page = web.get(f"/jobs/{tagged[0]}").get_data(as_text=True)
    assert '<a href="/jobs?tag=tenant:42">tenant:42</a>' in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    listing = web.get("/jobs?tag=tenant:42").get_data(as_text=True)
    assert f'/jobs/{tagged[2]}"' in listing and f'/jobs/{tagged[1]}"' in listing
    assert f'/jobs/{tagged[0]}"' not in listing and f'/jobs/{other}"' not in listing  # the next page
    older = web.get(f"/jobs?tag=tenant:42&before={tagged[1]}").get_data(as_text=True)
    assert f'/jobs/{tagged[0]}"' in older
    assert f'/jobs/{tagged[2]}"' in web.get("/jobs?tag=tenant:42&queue=q&status=ready").get_data(as_text=True)
    assert 'name="tag" value="tenant:42"' in listing
    response = web.get("/jobs?tag=a%20b")
    assert response.status_code == 404 and "without spaces" in response.get_data(as_text=True)



# ---------------------------------------------------------------------------- bounded reads

TAGGED_DOUBLINGS = 16  # 65,536 jobs, every one tagged "common"
SMALL_TAGGED_DOUBLINGS = 14  # a quarter of that: the listings must read the same rows
LIMIT = 50
WINDOW = 5000  # a smaller window than HISTORY_WINDOW, so that both histories are longer than it


@contextlib.contextmanager
def tagged_history(mariadb: MariaDBServer, doublings: int) -> Iterator[Connection]:
    """A database of 2**doublings done jobs of handler test.record, all tagged "common", the three
    oldest also "rare"."""
    with fresh_database(mariadb.dsn) as name:
        conn = connect(Dsn.parse(with_database(mariadb.dsn, name)))
        try:
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) VALUES ('q', 'test.record', '{{}}', 'done', "
                            "NOW(6), 5, 1, NOW(6), NOW(6))")
                for _ in range(doublings):
                    cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) SELECT {COLUMNS} FROM mysqlq_jobs")
                cur.execute("INSERT INTO mysqlq_job_tags (job_id, tag) SELECT id, 'common' FROM mysqlq_jobs")
                cur.execute("INSERT INTO mysqlq_job_tags (job_id, tag) SELECT id, 'rare' FROM mysqlq_jobs "
                            "ORDER BY id LIMIT 3")
                for table in ("mysqlq_jobs", "mysqlq_job_tags"):
                    cur.execute(f"ANALYZE TABLE {table}")
                    cur.fetchall()
            yield conn
        finally:
            conn.close()


@pytest.fixture(scope="module")
def tagged_big(mariadb: MariaDBServer) -> Iterator[Connection]:
    with tagged_history(mariadb, TAGGED_DOUBLINGS) as conn:
        yield conn


@pytest.fixture(scope="module")
def tagged_small(mariadb: MariaDBServer) -> Iterator[Connection]:
    with tagged_history(mariadb, SMALL_TAGGED_DOUBLINGS) as conn:
        yield conn


LISTINGS: dict[str, Callable[[Cursor], Any]] = {
    "jobs list --tag common": lambda cur: ops.list_jobs(cur, queue=None, status=None, handler=None, limit=LIMIT,
                                                        tag="common"),
    "jobs list --tag rare": lambda cur: ops.list_jobs(cur, queue=None, status=None, handler=None, limit=LIMIT,
                                                      tag="rare"),
    "jobs list --tag common --status done --queue q": lambda cur: ops.list_jobs(
        cur, queue="q", status="done", handler=None, limit=LIMIT, tag="common"),
    "--tag common --handler (none match), a window": lambda cur: ops.tagged(
        cur, "common", queue=None, status=None, handler="test.rare", before=None, limit=LIMIT, window=WINDOW),
    "dashboard page of a tag": lambda cur: web.jobs_page(cur, queue=None, status=None, handler=None, before=None,
                                                         limit=LIMIT, tag="common"),
    "dashboard page of a tag, older": lambda cur: web.jobs_page(cur, queue=None, status=None, handler=None,
                                                                before=1000, limit=LIMIT, tag="common"),
}


def test_the_tag_listings_read_as_many_rows_with_four_times_the_jobs_with_the_tag(
        tagged_small: Connection, tagged_big: Connection) -> None:
    for name, listing in LISTINGS.items():
        few, many = reads_of(tagged_small, listing), reads_of(tagged_big, listing)
        assert abs(many - few) <= 2 * LIMIT, (name, few, many)
        assert many <= 4 * WINDOW + 50, (name, many)  # per entry: the index's, the job's (a range of one id)


def test_a_tag_page_reads_about_as_many_rows_as_it_shows(tagged_big: Connection) -> None:
    found: list[list[dict[str, Any]]] = []
    reads = reads_of(tagged_big, lambda cur: found.append(LISTINGS["jobs list --tag common"](cur)))
    assert len(found[0]) == LIMIT and reads <= 3 * LIMIT + 20
    assert [row["id"] for row in found[0]] == sorted((row["id"] for row in found[0]), reverse=True)
    rare: list[list[dict[str, Any]]] = []
    assert reads_of(tagged_big, lambda cur: rare.append(LISTINGS["jobs list --tag rare"](cur))) <= 20
    assert [row["id"] for row in rare[0]] == [3, 2, 1]


def test_a_filter_beside_the_tag_reads_a_window_of_its_entries_however_rare_the_match(
        tagged_big: Connection) -> None:
    pages: list[ops.HistoryPage] = []
    reads = reads_of(tagged_big, lambda cur: pages.append(LISTINGS["--tag common --handler (none match), a window"](
        cur)))
    assert pages[0].rows == [] and pages[0].searched_down_to > 2**TAGGED_DOUBLINGS - WINDOW - 10
    assert reads <= 4 * WINDOW + 50 and reads < 2**TAGGED_DOUBLINGS / 2
    with tagged_big.cursor() as cur:  # the measure sees a read of every job with the tag
        before = handler_reads(tagged_big)
        cur.execute("SELECT COUNT(*) FROM mysqlq_job_tags t JOIN mysqlq_jobs j ON j.id = t.job_id "
                    "WHERE t.tag = 'common' AND j.handler = 'test.rare'")
        cur.fetchall()
        assert handler_reads(tagged_big) - before >= 2**TAGGED_DOUBLINGS


def test_the_tag_listing_walks_the_tag_index_without_sorting(tagged_big: Connection) -> None:
    sql = query("tagged_job_ids")
    params = {"tag": "common", "before": None, "limit": LIMIT}
    with tagged_big.cursor() as cur:
        text = explain_json(cur, sql, params)
    assert not sorts_rows(text), text
    [access] = tables(json.loads(text))
    assert access["key"] == "mysqlq_job_tags_tag", access
