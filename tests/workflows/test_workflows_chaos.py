"""Workflows under chaos: 1,000 groups of 10 members and 1,000 chains of 5 steps, drained by 4 workers
while workers are kill -9'd and the database server crashes once. Every callback and chain step runs
once its parents are done and never before; transactional ones (the callbacks, the chains' steps)
leave exactly one effect; nothing is lost."""

from __future__ import annotations

import os
import signal
from collections import Counter

from mysqlq_harness.jobs import EVERY_JOB, every_job

from mysqlq import Job

from ..conftest import QueueDB

GROUPS, MEMBERS = 1000, 10
CHAINS, STEPS = 1000, 5


def test_chaos_groups_and_chains_lose_nothing_and_run_nothing_early(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    callbacks: list[int] = []
    members: dict[int, list[int]] = {}
    chains: list[list[int]] = []
    with qdb.producer() as producer:
        for g in range(GROUPS):
            group = producer.group([Job("test.echo", {"value": g * MEMBERS + m}) for m in range(MEMBERS)],
                                   then=Job("test.tgather"))
            callbacks.append(group.callback)
            members[group.callback] = group.members
        for c in range(CHAINS):
            chains.append(producer.chain(*[Job("test.tstep", {"tag": f"{c}.{s}"}) for s in range(STEPS)]))
    total = GROUPS * (MEMBERS + 1) + CHAINS * STEPS
    args = ("--batch-size", "25", "--heartbeat-interval", "0.5", "--lease", "10", "--concurrency", "4")
    names = ["w1", "w2", "w3", "w4"]
    running = {name: qdb.worker("--name", name, *args) for name in names}

    def done() -> int:
        return int(qdb.scalar(f"SELECT COUNT(*) FROM {every_job('status')} WHERE status = 'done'"))

    for round_, threshold in enumerate((1500, 4000, 7000, 10000, 13000)):
        qdb.wait_for(lambda t=threshold: done() >= t, timeout=180, what=f"{threshold} jobs done")
        if round_ == 2:
            qdb.server.kill()  # the database crashes too, once
            qdb.server.start()
            continue
        name = names[round_ % len(names)]
        os.kill(running[name].pid, signal.SIGKILL)
        running[name].wait()
        running[name] = qdb.worker("--name", name, *args)  # systemd's Restart=
    qdb.wait_for(lambda: qdb.statuses() == {"done": total}, timeout=300,
                 what=f"every job done (now {qdb.statuses()})")

    records = qdb.records()
    assert [words for words in records if words[1] == "early"] == []  # nothing ran before its parents were done
    # Transactional callbacks and steps: exactly one effect each, however often they were attempted.
    effects = Counter(int(row[0]) for row in qdb.query("SELECT job_id FROM test_effects"))
    transactional = callbacks + [job_id for chain in chains for job_id in chain]
    assert sorted(effects) == sorted(transactional)
    assert set(effects.values()) == {1}
    # Each callback got all of its members' ids and results; each chain's last step all of its steps' tags.
    results = dict(qdb.query(f"SELECT id, CAST(result AS CHAR) FROM {EVERY_JOB} WHERE id IN ({{}})".format(
        ",".join(str(job_id) for job_id in [*callbacks, *(chain[-1] for chain in chains)]))))
    import json

    for g, callback in enumerate(callbacks):
        got = json.loads(results[callback])
        assert got == {"ids": members[callback], "results": [g * MEMBERS + m for m in range(MEMBERS)],
                       "statuses": ["done"]}
    for c, chain in enumerate(chains):
        assert json.loads(results[chain[-1]]) == [f"{c}.{s}" for s in range(STEPS)]
    # The committed run of each step started after its parent's completion: its run order in the
    # records (a step's last run is the one that committed) follows its parent's.
    last_run = {int(words[0]): n for n, words in enumerate(records) if words[1] == "step"}
    for chain in chains:
        assert [last_run[job_id] for job_id in chain] == sorted(last_run[job_id] for job_id in chain)
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE waiting_for > 0") == 0
    runs = Counter(int(words[0]) for words in records if words[1] in ("step", "gather"))
    attempts = qdb.scalar(f"SELECT SUM(attempts) FROM {EVERY_JOB}")
    print(f"\n{total} jobs; callbacks and steps run {sum(runs.values())} times for {len(runs)} jobs "
          f"({sum(1 for n in runs.values() if n > 1)} more than once); {attempts} attempts in all")
