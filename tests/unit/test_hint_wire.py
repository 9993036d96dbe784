"""The network hint datagram: what it carries, and what a worker accepts."""

from __future__ import annotations

import pytest

from mysqlq.hint import wire
from mysqlq.hint.wire import Rejected, Verifier

KEY = bytes(range(32))
NOW = 1_800_000_000.0


def test_a_hint_carries_the_queue_and_the_delay_and_nothing_else() -> None:
    data = wire.encode(KEY, "mail", 1.5, now=NOW)
    hint = Verifier(KEY).decode(data, now=NOW + 0.01)
    assert (hint.queue, hint.delay) == ("mail", 1.5)
    assert len(data) == wire.HEADER.size + len("mail") + wire.MAC_SIZE


def test_a_hint_signed_with_another_key_is_rejected() -> None:
    data = wire.encode(bytes(32), "mail", 0, now=NOW)
    with pytest.raises(Rejected, match="bad signature"):
        Verifier(KEY).decode(data, now=NOW)


@pytest.mark.parametrize("position", [0, 5, 13, 21, 25, -1])
def test_any_changed_byte_is_rejected(position: int) -> None:
    data = bytearray(wire.encode(KEY, "mail", 0, now=NOW))
    data[position] ^= 0x01
    with pytest.raises(Rejected):
        Verifier(KEY).decode(bytes(data), now=NOW)


@pytest.mark.parametrize("data", [b"", b"MQH1", b"default\n0.0", b"x" * 600])
def test_garbage_is_rejected(data: bytes) -> None:
    with pytest.raises(Rejected, match="malformed"):
        Verifier(KEY).decode(data, now=NOW)


def test_a_replayed_hint_is_rejected() -> None:
    verifier = Verifier(KEY)
    data = wire.encode(KEY, "mail", 0, now=NOW)
    verifier.decode(data, now=NOW)
    with pytest.raises(Rejected, match="replayed"):
        verifier.decode(data, now=NOW + 1)
    verifier.decode(wire.encode(KEY, "mail", 0, now=NOW), now=NOW + 1)  # a new one (new nonce) is fine


@pytest.mark.parametrize("skew", [-wire.WINDOW - 1, wire.WINDOW + 1])
def test_a_hint_from_outside_the_time_window_is_rejected_with_the_skew(skew: float) -> None:
    data = wire.encode(KEY, "mail", 0, now=NOW - skew)
    with pytest.raises(Rejected, match="time window") as caught:
        Verifier(KEY).decode(data, now=NOW)
    assert caught.value.skew == pytest.approx(skew, abs=0.01)


def test_a_replay_after_the_window_is_rejected_by_its_age() -> None:
    verifier = Verifier(KEY)
    data = wire.encode(KEY, "mail", 0, now=NOW)
    verifier.decode(data, now=NOW)
    verifier.decode(wire.encode(KEY, "mail", 0, now=NOW + 3 * wire.WINDOW), now=NOW + 3 * wire.WINDOW)
    assert len(verifier._seen) == 1  # the first nonce is forgotten: it is too old to be accepted anyway
    with pytest.raises(Rejected, match="time window"):
        verifier.decode(data, now=NOW + 3 * wire.WINDOW)


def test_a_queue_name_too_long_for_the_datagram_is_sent_as_any_queue() -> None:
    data = wire.encode(KEY, "\U0001f600" * 100, 0, now=NOW)
    assert Verifier(KEY).decode(data, now=NOW).queue == wire.ANY_QUEUE
    assert Verifier(KEY).decode(wire.encode(KEY, "\U0001f600" * 60, 0, now=NOW), now=NOW).queue == "\U0001f600" * 60


def test_delays_are_kept_to_the_millisecond_and_never_negative() -> None:
    assert Verifier(KEY).decode(wire.encode(KEY, "q", 0.0123, now=NOW), now=NOW).delay == 0.012
    assert Verifier(KEY).decode(wire.encode(KEY, "q", -5, now=NOW), now=NOW).delay == 0.0


def test_every_worker_life_has_its_own_key() -> None:
    assert wire.new_key() != wire.new_key()
    assert len(wire.new_key()) == wire.KEY_SIZE
