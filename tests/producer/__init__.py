"""The producer (mysqlq.producer): enqueues of every form, its pool, bad inputs, dedupe scopes and
tags."""
