"""What hints may cost: the wake budget, and a real listener flooded with valid hints."""

from __future__ import annotations

import pathlib
import socket
import time
from collections.abc import Iterator

import pytest

from mysqlq import Dsn, Settings
from mysqlq.hint import Listener, wire
from mysqlq.hint.limit import BURST, HERD, RATE, WakeBudget
from mysqlq.hint.listener import EMPTY_READS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_allows_a_burst_then_the_rate() -> None:
    clock = Clock()
    budget = WakeBudget(rate=10, burst=20, clock=clock)
    assert [budget.take() for _ in range(20)] == [0.0] * 20
    assert budget.take() == pytest.approx(0.1)
    clock.now += 1.0
    taken = 0
    while budget.take() == 0.0:
        taken += 1
    assert taken == 10


def test_wake_ups_that_found_work_are_given_back() -> None:
    budget = WakeBudget(rate=10, burst=2, clock=Clock())
    for _ in range(100):
        assert budget.take() == 0.0
        budget.give_back()


def test_a_sustained_flood_costs_at_most_the_rate() -> None:
    clock = Clock()
    budget = WakeBudget(clock=clock)
    woke = 0
    for _ in range(10_000):  # a hint every millisecond for 10 s
        clock.now += 0.001
        woke += budget.take() == 0.0
    assert woke <= BURST + RATE * 10


@pytest.fixture
def listener(tmp_path: pathlib.Path) -> Iterator[Listener]:
    settings = Settings(dsn=Dsn(), hint_dir=str(tmp_path / "hints"), hint_bind="127.0.0.1:0")
    found = Listener(settings)
    yield found
    found.close()


def send(listener: Listener, count: int, queue: str = "default") -> None:
    assert listener.advertised
    host, port = listener.advertised.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _ in range(count):
            sock.sendto(wire.encode(listener.key, queue, 0), (host, int(port)))


def test_the_listener_records_where_it_listens_and_its_key(listener: Listener) -> None:
    addr, key = listener.registry_entry
    assert addr and addr.startswith("127.0.0.1:") and not addr.endswith(":0")
    assert key == listener.key


def test_a_flood_of_valid_hints_wakes_the_worker_at_the_rate_and_postpones_the_rest(listener: Listener) -> None:
    clock = Clock()
    listener.budget = WakeBudget(clock=clock)
    woke = 0
    for _ in range(60):  # 60 wake-ups' worth of hints in 1 s; none of them leads to a job
        send(listener, 3)
        clock.now += 1 / 60
        wake = listener.wake(listener.sockets, ["default"], ())
        woke += wake.claim
        if wake.claim:
            listener.settle(False)  # its claim found nothing
    assert BURST <= woke <= BURST + RATE * 1
    assert listener.postponed == 60 - woke
    postponed = listener.deferred_for()
    assert postponed is not None and postponed > 0  # the last one is waiting for a token, not dropped
    clock.now += 1.0
    assert listener.wake([], ["default"], ()).claim


def test_hints_that_bring_jobs_are_never_slowed(listener: Listener) -> None:
    listener.budget = WakeBudget(clock=Clock())  # time stands still: no token ever comes back by waiting
    for _ in range(200):
        send(listener, 1)
        assert listener.wake(listener.sockets, ["default"], ()).claim
        listener.settle(True)  # its claim found jobs: proof enough, whenever their outcomes are written
    assert listener.postponed == 0


def test_a_wake_up_that_sent_no_claim_costs_nothing(listener: Listener) -> None:
    listener.budget = WakeBudget(clock=Clock())
    for _ in range(200):  # every slot busy: the hint asks for a claim the worker cannot send yet
        send(listener, 1)
        assert listener.wake(listener.sockets, ["default"], ()).claim
        listener.settle(None)
    assert listener.postponed == 0


def test_the_herd_is_paid_for_by_the_wake_up_that_found_the_job() -> None:
    """Four idle workers hinted for every commit, 50 commits a second for a minute: each commit's
    job is found by one of them (in turn, or always the same one), the other three find nothing.
    No worker's wake-up is ever postponed."""
    for winners in ([0, 1, 2, 3], [0], [0, 0, 0, 1]):
        clock = Clock()
        budgets = [WakeBudget(clock=clock) for _ in range(4)]
        postponed = [0, 0, 0, 0]
        for commit in range(50 * 60):
            clock.now += 0.02
            winner = winners[commit % len(winners)]
            for index, budget in enumerate(budgets):
                if budget.take() > 0:
                    postponed[index] += 1
                elif index == winner:
                    budget.found()
                else:
                    budget.found_nothing()
        # a worker that finds jobs is never postponed; one that never does runs out (others serve)
        assert [postponed[index] for index in set(winners)] == [0] * len(set(winners)), postponed
        assert all(postponed[index] > 0 for index in range(4) if index not in winners), postponed


def test_a_flood_beside_real_jobs_costs_at_most_the_herd_allowance_per_job_found() -> None:
    clock = Clock()
    budget = WakeBudget(clock=clock)
    woke = found = 0
    for tick in range(10_000):  # a forged-looking flood of a hint a millisecond for 10 s ...
        clock.now += 0.001
        if budget.take() == 0.0:
            woke += 1
            if tick % 100 == 0:  # ... while this worker really finds a job 10 times a second
                found += 1
                budget.found()
            else:
                budget.found_nothing()
    assert woke - found <= BURST + RATE * 10 + HERD * found


def test_hints_for_other_queues_or_paused_ones(listener: Listener) -> None:
    send(listener, 1, "reports")
    wake = listener.wake(listener.sockets, ["default"], ())
    assert not wake.claim and not wake.poll
    send(listener, 1, "default")
    wake = listener.wake(listener.sockets, ["default"], ("default",))
    assert wake.poll and not wake.claim
    send(listener, 1, wire.ANY_QUEUE)
    assert listener.wake(listener.sockets, ["default"], ()).claim


def test_unsigned_datagrams_are_counted_and_ignored(listener: Listener) -> None:
    assert listener.advertised
    host, port = listener.advertised.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _ in range(50):
            sock.sendto(b"default\n0", (host, int(port)))
            sock.sendto(wire.encode(bytes(32), "default", 0), (host, int(port)))
    wake = listener.wake(listener.sockets, ["default"], ())
    assert not wake.claim
    assert listener.rejected == {"malformed": 50, "bad signature": 50}


def test_network_hints_work_when_the_hint_directory_cannot_be_used(tmp_path: pathlib.Path) -> None:
    (tmp_path / "file").write_text("")
    settings = Settings(dsn=Dsn(), hint_dir=str(tmp_path / "file" / "hints"), hint_bind="127.0.0.1:0")
    listener = Listener(settings)
    try:
        assert listener.local is None and listener.sockets == [listener.udp]
        send(listener, 1)
        assert listener.wake(listener.sockets, ["default"], ()).claim
    finally:
        listener.close()


class Recorder:
    """A logger that keeps what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, object]]] = []

    def __getattr__(self, level: str) -> object:
        return lambda event, **fields: self.events.append((level, event, fields))


def test_hints_from_a_clock_far_off_are_refused_and_said_once(tmp_path: pathlib.Path) -> None:
    log = Recorder()
    listener = Listener(Settings(dsn=Dsn(), hint_dir=str(tmp_path / "hints"), hint_bind="127.0.0.1:0"), log)
    try:
        assert listener.advertised
        host, port = listener.advertised.rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _ in range(3):
                sock.sendto(wire.encode(listener.key, "default", 0, now=time.time() - 3600), (host, int(port)))
        assert not listener.wake(listener.sockets, ["default"], ()).claim
        assert listener.rejected == {"outside the time window": 3}
        warnings = [event for level, event, _ in log.events if level == "warning"]
        assert warnings == ["hint.clock_skew"]
    finally:
        listener.close()


def test_a_flood_of_fruitless_wake_ups_reads_the_newest_job_at_most_once_a_second(tmp_path: pathlib.Path) -> None:
    """Each wake-up of a flood costs its claim; the question whether jobs were enqueued meanwhile (a
    statement of its own), once a few answers said no, is asked at most once a second, not once per
    wake-up."""
    reads = []
    listener = Listener(Settings(dsn=Dsn(), hint_dir=str(tmp_path / "hints"), hint_bind="127.0.0.1:0"),
                        newest_job=lambda: reads.append(1) or 7)
    clock = Clock()
    listener.budget = WakeBudget(clock=clock)
    try:
        woke = 0
        for _ in range(1000):  # 100 wake-ups' worth of hints a second for 10 s; none leads to a job
            send(listener, 1)
            clock.now += 0.01
            if listener.wake(listener.sockets, ["default"], ()).claim:
                woke += 1
                listener.settle(False)
        assert woke <= BURST + RATE * 10
        assert 1 <= len(reads) <= 1 + EMPTY_READS + 10
    finally:
        listener.close()




def test_jobs_enqueued_between_reads_give_back_the_wake_ups_they_excuse(tmp_path: pathlib.Path) -> None:
    """Wake-ups charged while the newest job id was not read (reads had found nothing new: a flood,
    it seemed) get their tokens back at the next read when jobs were enqueued meanwhile (other
    workers took them: these were the herd's)."""
    newest, reads = [100], []
    listener = Listener(Settings(dsn=Dsn(), hint_dir=str(tmp_path / "hints"), hint_bind="127.0.0.1:0"),
                        newest_job=lambda: reads.append(1) or newest[0])
    clock = Clock()
    listener.budget = WakeBudget(rate=1.0, burst=40, clock=clock)

    def fruitless() -> None:
        send(listener, 1)
        assert listener.wake(listener.sockets, ["default"], ()).claim
        listener.settle(False)

    try:
        for _ in range(30):  # from the 21st on the budget is low: a first read, three that find
            fruitless()  # nothing new (the last one's wake-up charged), then six charged without a read
        assert len(reads) == 1 + EMPTY_READS
        assert listener.budget.tokens == pytest.approx(10)
        newest[0] += 10  # ten jobs enqueued meanwhile
        clock.now += 1.0  # a token back, and the next read is due
        fruitless()  # the read: the seven charged since the last one were the herd's, and this one too
        assert len(reads) == 2 + EMPTY_READS
        assert listener.budget.tokens == pytest.approx(11 - 1 + 7 + 1)
    finally:
        listener.close()
