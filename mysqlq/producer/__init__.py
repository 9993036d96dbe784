"""The producer side: enqueueing jobs on a connection of mysqlq's own, or inside the caller's
transaction (the outbox form), then waking idle workers through the hint."""

from __future__ import annotations

from mysqlq.producer.enqueue import Producer
from mysqlq.producer.outbox import Transaction, enqueue_on

__all__ = ["Producer", "Transaction", "enqueue_on"]
