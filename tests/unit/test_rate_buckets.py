"""A rate bucket's name (mysqlq.core.rates): a handler's, per rate key or not, or a queue's; and whose
limit it counts under, as `mysqlq limits` and the dashboard name it."""

from __future__ import annotations

from mysqlq.core.rates import MAX_KEY, bucket_owner, handler_bucket, queue_bucket


def test_a_handlers_buckets_with_or_without_a_key_count_under_the_handler() -> None:
    assert handler_bucket("mail.send", None) == "handler:mail.send"
    assert handler_bucket("mail.send", "tenant:42") == "handler:mail.send:tenant:42"
    for key in (None, "k", "tenant:42", "x" * (MAX_KEY + 1)):
        assert bucket_owner(handler_bucket("mail.send", key)) == ("handler", "mail.send")


def test_a_queues_bucket_counts_under_the_queue_whatever_its_name() -> None:
    assert queue_bucket("default") == "queue:default"
    assert bucket_owner(queue_bucket("default")) == ("queue", "default")
    assert bucket_owner(queue_bucket("a:b")) == ("queue", "a:b")
