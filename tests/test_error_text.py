"""A task's error text is safe to print and is one report (runtime/error_log.py): no
control character a terminal acts on (ESC, CR, RLO...) comes out raw, and no line of a
user's message can pass for another report (every line after the first is indented)."""

from __future__ import annotations

import logging
import unicodedata
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tupletree import Bolt, TopologyBuilder
from tupletree.runtime.error_log import (
    CONTINUATION,
    MAX_ERROR_CHARS,
    bounded,
    format_error,
    printable,
)
from tupletree.testing import FeederSpout

HOSTILE = (
    "\x1b[2J\x1b[31mcleared the screen\rover\x08written\x07 \u202eelgnis\u202c"
    "\ntopology 't': feed[task 1] next_tuple: RuntimeError: a forged report"
)


def _raw_controls(text: str) -> set[str]:
    """Characters of ``text`` a terminal acts on or reorders (tab and newline aside)."""
    return {
        ch
        for ch in text
        if ch not in "\t\n" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    }


def _one_report(text: str) -> bool:
    return all(line.startswith(CONTINUATION) for line in text.rstrip("\n").split("\n")[1:])


class Hostile(Bolt):
    outputs: list[str] = []

    def execute(self, tup: Any) -> None:
        raise ValueError(HOSTILE)


def test_a_bolts_hostile_error_is_kept_and_logged_escaped_as_one_report(sim_cluster, caplog):
    """ESC sequences, CR, backspace, BEL and RLO in a bolt's message: escaped in
    ``errors()`` and in the log; its second line, made to look like another task's
    report, is indented under the real one."""
    feeder = FeederSpout(["x"])
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("hostile", Hostile()).shuffle_grouping("feed")
    sim_cluster.submit_topology("t", None, b.create_topology())
    feeder.feed(["x"], msg_id=1)
    with caplog.at_level(logging.WARNING, logger="tupletree"):
        sim_cluster.wait_idle()
    (text,) = sim_cluster.errors("t")
    (logged,) = [r.getMessage() for r in caplog.records if "hostile[task" in r.getMessage()]
    for out in (text, logged):
        assert _raw_controls(out) == set(), out
        assert "\\x1b[2J" in out and "\\u202e" in out and "\\x0d" in out
        assert _one_report(out), out
    assert text.startswith("hostile[task ") and "execute: ValueError: " in text
    assert f"\n{CONTINUATION}topology 't': feed[task 1]" in text


@given(st.text())
def test_printable_leaves_no_control_character_and_no_unindented_line(text: str) -> None:
    """Any text at all: nothing a terminal acts on is left raw, every line after the
    first is indented, and what is not a control character is kept in order."""
    out = printable(text)
    assert _raw_controls(out) == set()
    assert _one_report(out)
    kept = [ch for ch in text if ch == "\n" or not _raw_controls(ch)]
    it = iter(out)
    assert all(ch in it for ch in kept)  # a subsequence: nothing reordered or lost


@given(st.text(alphabet=st.sampled_from("\x1b\r\n\u202ea"), max_size=20_000))
def test_escaped_texts_stay_within_their_bound(text: str) -> None:
    """Escapes lengthen a text (one character becomes six): the kept text is cut after
    escaping, so the bound on what a worker holds still stands."""
    assert len(bounded(text)) <= MAX_ERROR_CHARS + 40
    try:
        raise RuntimeError(text)
    except RuntimeError as exc:
        assert len(format_error("c", 1, "execute", exc)) <= MAX_ERROR_CHARS + 40
