"""When jobs over a rate limit come back (mysqlq.core.rates.plan_turns): those that fit start now, in
order of id; the others take the places of the starts that leave the window first, one place apart,
in order of id within their bucket, behind the jobs already waiting; turns close together come due
together, so that one promotion, claim and admission serves them all."""

from __future__ import annotations

import datetime

import pytest

from mysqlq.core.rates import RateLimit, plan_turns

NOW = datetime.datetime(2026, 11, 27, 1, 0, 0)


def ms(value: float) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def test_jobs_that_fit_start_now_and_the_rest_queue_at_the_steady_rate() -> None:
    turns = plan_turns(RateLimit(3, 1.0), NOW, 0, [], None, [11, 12, 13, 14, 15], set(), False, span=0)
    assert turns.admitted == [11, 12, 13]
    # The window holds the three started now: the first of the others takes a place a period later,
    # and each next one a third of a second after the one before.
    third = datetime.timedelta(seconds=1 / 3)
    assert turns.deferred == {14: NOW + ms(1000), 15: NOW + ms(1000) + third}
    assert turns.waiting == [14, 15]
    assert turns.next_at == NOW + ms(1000) + 2 * third


def test_returning_jobs_over_the_limit_come_back_one_place_apart_not_all_at_once() -> None:
    oldest = [NOW - ms(900), NOW - ms(800), NOW - ms(700)]  # the window's first starts
    turns = plan_turns(RateLimit(10, 1.0), NOW, 10, oldest, NOW + ms(500), [1, 2, 3], {1, 2, 3}, True, span=0)
    assert turns.admitted == [] and turns.waiting == []
    assert turns.deferred == {1: NOW + ms(100), 2: NOW + ms(200), 3: NOW + ms(300)}


def test_new_jobs_wait_behind_jobs_set_aside_before_even_with_room() -> None:
    turns = plan_turns(RateLimit(10, 1.0), NOW, 2, [NOW - ms(500)], NOW + ms(400), [7, 8], set(), True, span=0)
    assert turns.admitted == []
    assert turns.deferred == {7: NOW + ms(400), 8: NOW + ms(500)}
    assert turns.next_at == NOW + ms(600)


def test_a_returning_job_goes_before_new_ones_of_its_batch() -> None:
    turns = plan_turns(RateLimit(1, 1.0), NOW, 0, [], NOW, [3, 9], {3}, True, span=0)
    assert turns.admitted == [3]
    assert turns.deferred == {9: NOW + ms(1000)} and turns.waiting == [9]


def test_turns_within_the_span_come_due_together_at_the_last_one() -> None:
    # 200/s: one place every 5 ms; a span of 12 ms groups three places.
    turns = plan_turns(RateLimit(200, 1.0), NOW, 0, [], NOW, [1, 2, 3, 4, 5], set(), True, span=0.012)
    assert turns.deferred == {1: NOW + ms(10), 2: NOW + ms(10), 3: NOW + ms(10),
                              4: NOW + ms(20), 5: NOW + ms(20)}


def test_no_job_comes_due_before_a_job_of_lower_id() -> None:
    # Job 4 returns and job 2 is new: job 2's turn is behind the queue's tail, later than job 4's place.
    oldest = [NOW - ms(900), NOW - ms(800)]
    turns = plan_turns(RateLimit(5, 1.0), NOW, 5, oldest, NOW + ms(600), [2, 4], {4}, True, span=0)
    assert turns.deferred[2] == NOW + ms(600)
    assert turns.deferred[4] >= turns.deferred[2]
    assert sorted(turns.deferred, key=lambda job: (turns.deferred[job], job)) == [2, 4]


def test_each_start_counts_over_its_period_and_the_grace_its_handler_is_entered_within() -> None:
    # A fortieth of the period, from 10 ms to 25 ms: a limit reaches period / (period + grace) of itself.
    assert RateLimit(50, 1.0).grace == 0.025 and RateLimit(50, 1.0).counted == RateLimit(50, 1.025)
    assert RateLimit(5, 0.8).grace == pytest.approx(0.02)
    assert RateLimit(20, 0.1).grace == 0.01 and RateLimit(1, 0.001).grace == 0.01
    assert RateLimit(100, 3600.0).grace == 0.025
