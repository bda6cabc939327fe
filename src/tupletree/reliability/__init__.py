"""The reliability core: pure, deterministic algorithms with no I/O, threads or clocks."""

from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.pending import SpoutPending
from tupletree.reliability.rotating_map import RotatingMap

__all__ = ["AckerLedger", "IdGenerator", "RotatingMap", "SpoutPending"]
