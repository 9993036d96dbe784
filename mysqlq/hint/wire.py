"""The network hint datagram: a queue name and a due delay, signed with the receiving worker's key.

Layout (big-endian): ``MQH1`` | sent_at µs (uint64, wall clock) | nonce (8 random bytes) |
delay ms (uint32) | queue length (uint8) | queue (UTF-8) | the first 16 bytes of
HMAC-SHA256(key, everything before). At most 41 + 255 bytes; no job data.

A datagram is accepted only if its MAC is right, it was sent within ``WINDOW`` seconds of the
receiver's clock, and its nonce was not seen in that window (replays are dropped).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import time
from dataclasses import dataclass

MAGIC = b"MQH1"
HEADER = struct.Struct("!4sQ8sIB")
MAC_SIZE = 16
KEY_SIZE = 32
WINDOW = 30.0  # seconds either side: the hosts' clocks must agree this well (NTP does far better)
MAX_DELAY_MS = 2**32 - 1
ANY_QUEUE = "*"
POLL_NOW = "*poll"  # not a queue: every worker polls at once (an operator changed a rate limit)
REPLAY_LIMIT = 100_000  # nonces remembered at most; beyond that a flood of valid datagrams is dropped


def new_key() -> bytes:
    """A fresh random key for one worker's life."""
    return os.urandom(KEY_SIZE)


@dataclass(frozen=True)
class Hint:
    """One received hint: a queue (or ANY_QUEUE) and the seconds until its job is due."""

    queue: str
    delay: float


def encode(key: bytes, queue: str, delay: float, now: float | None = None) -> bytes:
    """The signed datagram for one hint (a queue name too long to fit is sent as ANY_QUEUE)."""
    name = queue.encode()
    if len(name) > 255:
        name = ANY_QUEUE.encode()
    sent_at = round((time.time() if now is None else now) * 1e6)
    delay_ms = min(MAX_DELAY_MS, max(0, round(delay * 1000)))
    body = HEADER.pack(MAGIC, sent_at, os.urandom(8), delay_ms, len(name)) + name
    return body + hmac.new(key, body, hashlib.sha256).digest()[:MAC_SIZE]


class Rejected(Exception):
    """A datagram that is not a valid hint for this worker; ``reason`` says why."""

    def __init__(self, reason: str, skew: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.skew = skew


class Verifier:
    """A worker's check of incoming datagrams: MAC, age, and replay."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._seen: dict[bytes, float] = {}  # nonce -> when it may be forgotten (receiver's clock)

    def decode(self, data: bytes, now: float | None = None) -> Hint:
        """The hint in ``data``, or Rejected."""
        if len(data) < HEADER.size + MAC_SIZE or not data.startswith(MAGIC):
            raise Rejected("malformed")
        body, mac = data[:-MAC_SIZE], data[-MAC_SIZE:]
        if not hmac.compare_digest(hmac.new(self.key, body, hashlib.sha256).digest()[:MAC_SIZE], mac):
            raise Rejected("bad signature")
        _, sent_at_us, nonce, delay_ms, length = HEADER.unpack_from(body)
        if len(body) != HEADER.size + length:
            raise Rejected("malformed")
        now = time.time() if now is None else now
        skew = now - sent_at_us / 1e6
        if abs(skew) > WINDOW:
            raise Rejected("outside the time window", skew)
        self._forget(now)
        if nonce in self._seen:
            raise Rejected("replayed")
        if len(self._seen) >= REPLAY_LIMIT:
            raise Rejected("too many hints")
        self._seen[nonce] = now + 2 * WINDOW
        try:
            queue = body[HEADER.size:].decode()
        except UnicodeDecodeError:
            raise Rejected("malformed") from None
        return Hint(queue, delay_ms / 1000)

    def _forget(self, now: float) -> None:
        # Insertion order is expiry order (give or take clock steps), so stop at the first live one.
        while self._seen:
            nonce, expires = next(iter(self._seen.items()))
            if expires > now:
                return
            del self._seen[nonce]
