"""Sealing data frames: what makes a frame between workers authentic, addressed and new.

A data frame is ``tag (16) | sender length (2) | sender address | link id (8) |
sequence (8) | payload`` (the payload is frames.py's layout).

- **Authentic.** The tag is ChaCha20-Poly1305's (RFC 8439), used for authentication
  only: no plaintext, the payload as associated data, under a key of the link and a
  nonce of the frame's number. The receiver checks it before it reads anything but the
  header's bytes, which it needs to pick the key (``open_frame``): a payload is
  marshalled and may hold pickles, which run code when loaded. The header is not under
  the tag and need not be: its sender address and link id are part of the key, its
  number is the nonce, so changing any of them opens nothing.
- **Addressed.** The key is the topology's data key bound to the receiver's address
  (``link_key``), then to the sender's address and the link's id, so a frame sealed for
  one worker does not open at another, nor at a worker that took over a dead one's place
  under a new address.
- **New.** A sender numbers the frames of each link, one up per frame, in the order it
  sends them; the receiver keeps the highest number seen from each sender
  (``ReplayGuard``) and refuses a frame not above it. ZeroMQ delivers one connection's
  frames in order, so a genuine frame is never refused: what is refused is a frame
  someone on the path recorded and sent again (ARCHITECTURE.md's trust boundaries say
  what that would have done). Numbers may skip (a frame sealed and then dropped with its
  peer), never repeat.

Why ChaCha20-Poly1305 and not the keyed BLAKE2b of before: CPython's BLAKE2b is its
portable C, about 14 instructions a byte, the largest single cost of a frame crossing
(539 of 3,966 instructions per item, callgrind); OpenSSL's Poly1305, through the
``cryptography`` package, is vectorised: per 10 KB frame 26k instructions and 2.6 us
against 143k and 11.6 us here (notes/performance.md, 2026-11-27).

What a Poly1305 key must never do is tag two payloads under one nonce (the two tags
would give away that nonce's one-time key, and a forgery under it). A link's nonces
are its numbers, which never repeat within a link; and every ``Link`` (each life of a
sender, each new peer address) draws a random 64-bit link id, which enters its key, so
two links never share a key even when a restarted worker gets its port back and a
clock stepped back repeats its numbers.

Why a link's numbers start at the clock (``time.time_ns()`` when the link is made) and
not at 1: the receiver's guard knows senders by address, and a worker restarted on the
same host may get the same port back; starting from the clock puts its numbers above
every number its earlier life used (it would have had to send more than one frame a
nanosecond to catch up). A clock stepped back between two lives of a worker on one
address, on the same port, would get its frames refused until the numbers pass the old
ones; the ports are random, so that needs both at once.

Left open, on purpose: a receiver restarted on the same address (the same random port)
forgets what it saw, so until a sender's next frame arrives there, a recorded frame to
its earlier life would open. ``ReplayGuard`` forgets the sender seen least recently once
it holds ``max_senders`` (each is a real worker process: only the key's holders make
entries), so a long-dead sender's frames could be replayed once each after thousands
of restarts.

Pure: no sockets, no clock and no randomness of its own (the caller passes a link's
first number and its id).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

# Final: the compiled build then uses the numbers, not a module lookup per use.
MAC_BYTES: Final = 16  # Poly1305's tag
LINK_ID_BYTES: Final = 8
SEQUENCE_BYTES: Final = 8
# Links whose ciphers a receiver keeps made: one per life of a sender whose frame opened
# (a stranger's headers never get in); past it the cache starts over. (Not Final: a test
# lowers it.)
MAX_OPENERS = 4096
_LINK_KEY_CONTEXT: Final = b"tupletree data frames to "
_SENDER_KEY_CONTEXT: Final = b"tupletree data frames from "
_NONCE_PAD: Final = bytes(12 - SEQUENCE_BYTES)


def link_key(key: bytes, receiver: str) -> bytes:
    """The key frames for the worker at ``receiver`` (its address) are sealed under,
    before a sender's address and link id are bound in: the data key bound to the
    receiver's address, 64 bytes (BLAKE2b's largest key)."""
    if len(key) > 64:
        key = hashlib.blake2b(key).digest()
    return hashlib.blake2b(_LINK_KEY_CONTEXT + receiver.encode("utf-8"), key=key).digest()


def _link_cipher(receiver_key: bytes, sender_and_link: bytes) -> ChaCha20Poly1305:
    """The cipher of one link: ``receiver_key`` bound to the header's length-prefixed
    sender address and link id."""
    return ChaCha20Poly1305(
        hashlib.blake2b(
            _SENDER_KEY_CONTEXT + sender_and_link, key=receiver_key, digest_size=32
        ).digest()
    )


def sender_header(sender: str) -> bytes:
    """What follows the tag in every frame ``sender`` seals, before the link id: its
    address, length-prefixed (outside the payload, so that even a frame refused says
    whom it claims to be from)."""
    raw = sender.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise ValueError(f"a sender address must fit in 65,535 bytes, got {len(raw):,}")
    return len(raw).to_bytes(2, "big") + raw


def seal_overhead(sender: str) -> int:
    """The bytes a seal adds to each payload ``sender`` sends: tag, header, link id,
    number."""
    return MAC_BYTES + len(sender_header(sender)) + LINK_ID_BYTES + SEQUENCE_BYTES


class Link:
    """A sender's end of the link to one receiver: seals frames for it, numbered.

    ``link_id``: 8 bytes the caller draws at random for each Link (they make its key
    its own: the module's docstring says why that matters)."""

    def __init__(
        self, key: bytes, sender: str, receiver: str, first_sequence: int, link_id: bytes
    ) -> None:
        if not 0 <= first_sequence < 2**64 - 2**40:
            raise ValueError(f"first_sequence must be in [0, 2**64 - 2**40), got {first_sequence}")
        if len(link_id) != LINK_ID_BYTES:
            raise ValueError(f"a link id is {LINK_ID_BYTES} bytes, got {len(link_id)}")
        self._header = sender_header(sender) + bytes(link_id)
        self._cipher = _link_cipher(link_key(key, receiver), self._header)
        self.receiver = receiver
        self.sequence = first_sequence  # the number of the latest frame sealed
        self.overhead = seal_overhead(sender)

    def seal(self, payload: bytes) -> bytes:
        """The frame that carries ``payload`` to this link's receiver, with the next
        number. One copy of the payload (into the frame), none for the tag."""
        self.sequence += 1
        number = self.sequence.to_bytes(SEQUENCE_BYTES, "big")
        tag = self._cipher.encrypt(_NONCE_PAD + number, b"", payload)
        return b"".join((tag, self._header, number, payload))


def open_frame(
    key: bytes, data: Any, ciphers: dict[bytes, tuple[ChaCha20Poly1305, str]] | None = None
) -> tuple[str, int, Any] | None:
    """``(sender, sequence, payload)`` of a frame sealed for the receiver whose
    ``link_key`` is ``key`` whose tag checks out; None for any other bytes (too short
    for a tag and a header, a header that does not fit, a tag that does not match).
    Nothing of the frame is interpreted before its tag is checked but the header's
    length and bytes, which name the key to check it with. ``ciphers`` (the receiver's,
    across frames) keeps each link's cipher and sender made once, at most MAX_OPENERS of
    them. ``data``: bytes (what the transport receives), or any bytes-like object."""
    if type(data) is not bytes:
        data = bytes(data)
    frame: bytes = data
    size = len(frame)
    if size < MAC_BYTES + 2 + LINK_ID_BYTES + SEQUENCE_BYTES:
        return None
    # Read by index, not int.from_bytes of a slice: a frame's fixed cost counts (stop 41).
    n = (frame[MAC_BYTES] << 8) | frame[MAC_BYTES + 1]
    link_end = MAC_BYTES + 2 + n + LINK_ID_BYTES
    start = link_end + SEQUENCE_BYTES
    if size < start:
        return None
    link = frame[MAC_BYTES:link_end]
    cached = ciphers.get(link) if ciphers is not None else None
    cipher = cached[0] if cached is not None else _link_cipher(key, link)
    number = frame[link_end:start]
    payload = frame[start:]
    try:
        cipher.decrypt(_NONCE_PAD + number, frame[:MAC_BYTES], payload)
    except InvalidTag:
        return None
    if cached is None:
        sender = link[2 : 2 + n].decode("utf-8", "replace")
        if ciphers is not None:
            # Kept once a frame opened with it: a stranger's made-up headers never get in.
            if len(ciphers) >= MAX_OPENERS:
                ciphers.clear()
            ciphers[link] = (cipher, sender)
    else:
        sender = cached[1]
    return sender, int.from_bytes(number, "big"), payload


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
