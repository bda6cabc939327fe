"""Sealing data frames: what makes a frame between workers authentic, addressed and new.

A data frame is ``mac (32) | sender length (2) | sender address | sequence (8) | payload``
(the payload is frames.py's layout).

- **Authentic.** The mac is a keyed BLAKE2b of everything after it. The receiver checks
  it before it reads anything but the frame's length (``open_frame``): a payload is
  marshalled and may hold pickles, which run code when loaded.
- **Addressed.** The key is the topology's data key bound to the receiver's address
  (``link_key``), so a frame sealed for one worker does not open at another, nor at a
  worker that took over a dead one's place under a new address.
- **New.** A sender numbers the frames of each link, one up per frame, in the order it
  sends them; the receiver keeps the highest number seen from each sender
  (``ReplayGuard``) and refuses a frame not above it. ZeroMQ delivers one connection's
  frames in order, so a genuine frame is never refused: what is refused is a frame
  someone on the path recorded and sent again (ARCHITECTURE.md's trust boundaries say
  what that would have done). Numbers may skip (a frame sealed and then dropped with its
  peer), never repeat.

Why a link's numbers start at the clock (``time.time_ns()`` when the link is made) and
not at 1: a worker restarted on the same host may get the same port back, so its frames
carry the same sender address as its earlier life's; starting from the clock puts them
above every number that earlier life used (it would have had to send more than one
frame a nanosecond to catch up). A clock stepped back between two lives of a worker on
one address, on the same port, would get its frames refused until the numbers pass the
old ones; the ports are random, so that needs both at once.

Left open, on purpose: a receiver restarted on the same address (the same random port)
forgets what it saw, so until a sender's next frame arrives there, a recorded frame to
its earlier life would open. ``ReplayGuard`` forgets the sender seen least recently once
it holds ``max_senders`` (each is a real worker process: only the key's holders make
entries), so a long-dead sender's frames could be replayed once each after thousands
of restarts.

Pure: no sockets, no clock of its own (the caller passes a link's first number).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

MAC_BYTES = 32
SEQUENCE_BYTES = 8
_LINK_KEY_CONTEXT = b"tupletree data frames to "


def link_key(key: bytes, receiver: str) -> bytes:
    """The key that seals frames for the worker at ``receiver`` (its address): the data
    key bound to that address, 64 bytes (BLAKE2b's largest key)."""
    if len(key) > 64:
        key = hashlib.blake2b(key).digest()
    return hashlib.blake2b(_LINK_KEY_CONTEXT + receiver.encode("utf-8"), key=key).digest()


def sender_header(sender: str) -> bytes:
    """What follows the mac in every frame ``sender`` seals: its address, length-prefixed
    (outside the payload, so that even a frame refused says whom it claims to be from)."""
    raw = sender.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise ValueError(f"a sender address must fit in 65,535 bytes, got {len(raw):,}")
    return len(raw).to_bytes(2, "big") + raw


def seal_overhead(sender: str) -> int:
    """The bytes a seal adds to each payload ``sender`` sends: mac, header, number."""
    return MAC_BYTES + len(sender_header(sender)) + SEQUENCE_BYTES


class Link:
    """A sender's end of the link to one receiver: seals frames for it, numbered."""

    def __init__(self, key: bytes, sender: str, receiver: str, first_sequence: int) -> None:
        if not 0 <= first_sequence < 2**64 - 2**40:
            raise ValueError(f"first_sequence must be in [0, 2**64 - 2**40), got {first_sequence}")
        self._key = link_key(key, receiver)
        self._header = sender_header(sender)
        self.receiver = receiver
        self.sequence = first_sequence  # the number of the latest frame sealed
        self.overhead = seal_overhead(sender)

    def seal(self, payload: bytes) -> bytes:
        """The frame that carries ``payload`` to this link's receiver, with the next
        number. One copy of the payload (into the frame), none for the mac."""
        self.sequence += 1
        head = self._header + self.sequence.to_bytes(SEQUENCE_BYTES, "big")
        mac = hashlib.blake2b(head, key=self._key, digest_size=MAC_BYTES)
        mac.update(payload)
        return b"".join((mac.digest(), head, payload))


def open_frame(key: bytes, data: Any) -> tuple[str, int, Any] | None:
    """``(sender, sequence, payload)`` of a frame sealed with ``key`` (``link_key`` of
    the receiver's own address) whose mac checks out; None for any other bytes (too short
    for a mac and a header, a mac that does not match, a header that does not fit).
    Nothing of the frame is interpreted before its mac is checked but its length."""
    if len(data) < MAC_BYTES + 2 + SEQUENCE_BYTES:
        return None
    body = data[MAC_BYTES:]
    mac = hashlib.blake2b(body, key=key, digest_size=MAC_BYTES).digest()
    if not hmac.compare_digest(data[:MAC_BYTES], mac):
        return None
    n = int.from_bytes(body[:2], "big")
    if len(body) < 2 + n + SEQUENCE_BYTES:
        return None  # only a sealer with the key could have made it; refuse it all the same
    sender = bytes(body[2 : 2 + n]).decode("utf-8", "replace")
    sequence = int.from_bytes(body[2 + n : 2 + n + SEQUENCE_BYTES], "big")
    return sender, sequence, body[2 + n + SEQUENCE_BYTES :]


def claimed_sender(data: Any) -> str:
    """The sender an unauthenticated frame claims (for counting refusals): whatever bytes
    stand where the header would, at most 200; never trusted for anything else."""
    n = int.from_bytes(data[MAC_BYTES : MAC_BYTES + 2], "big")
    claimed = bytes(data[MAC_BYTES + 2 : MAC_BYTES + 2 + min(n, 200)])
    return claimed.decode("utf-8", "replace") if claimed else "(no sender)"


class ReplayGuard:
    """The highest frame number seen from each sender, for at most ``max_senders``
    senders (the one seen least recently is forgotten first)."""

    def __init__(self, max_senders: int = 4096) -> None:
        if max_senders < 1:
            raise ValueError(f"max_senders must be >= 1, got {max_senders}")
        self.max_senders = max_senders
        self._last: dict[str, int] = {}

    def admit(self, sender: str, sequence: int) -> int | None:
        """None when ``sequence`` is above the last one seen from ``sender`` (then it is
        the last one); else the last one, and the frame is to be refused."""
        last = self._last.pop(sender, None)
        if last is not None and sequence <= last:
            self._last[sender] = last
            return last
        self._last[sender] = sequence  # (re)inserted last: the dict's order is recency
        if len(self._last) > self.max_senders:
            del self._last[next(iter(self._last))]
        return None

    def __len__(self) -> int:
        return len(self._last)
