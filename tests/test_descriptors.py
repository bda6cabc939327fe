"""DescriptorBudget with plain numbers: what the services may hold of the process's
open-file limit, and what stays in reserve."""

from __future__ import annotations

import logging

import pytest

from tupletree.descriptors import RESERVE_FDS, DescriptorBudget


class Limits:
    """A process's (soft, hard) limit, as the budget reads and raises it."""

    def __init__(self, soft: int, hard: int, can_raise: bool = True) -> None:
        self.soft, self.hard, self.can_raise = soft, hard, can_raise

    def get(self) -> tuple[int, int]:
        return self.soft, self.hard

    def set_soft(self, soft: int) -> None:
        if not self.can_raise or (self.hard != -1 and soft > self.hard):
            raise ValueError("not allowed")
        self.soft = soft


def budget(limits: Limits) -> DescriptorBudget:
    return DescriptorBudget(limits.get, limits.set_soft)


def test_both_services_fit_and_the_reserve_stays_free():
    """With room, each service gets its cap; the caps, their overheads and the reserve
    stay within the limit."""
    limits = Limits(4096, 4096)
    b = budget(limits)
    assert b.take("drpc", 512, 65, explicit=False) == 512
    assert b.take("ui", 64, 65, explicit=False) == 64
    assert b.held == 512 + 65 + 64 + 65
    assert b.held + RESERVE_FDS <= limits.soft


def test_the_soft_limit_is_raised_toward_the_hard_one_when_needed():
    limits = Limits(1024, 65536)
    b = budget(limits)
    assert b.take("drpc", 512, 65, explicit=True) == 512
    assert b.take("ui", 512, 65, explicit=True) == 512
    assert limits.soft >= b.held + RESERVE_FDS
    assert limits.soft <= limits.hard


def test_a_default_cap_shrinks_leaving_room_for_the_other_service(caplog):
    """On a small limit that cannot be raised, the first service (DRPC, started first)
    takes at most half of what is left, so the web view still gets a share: neither
    starves the other, and the reserve is kept."""
    caplog.set_level(logging.WARNING)
    limits = Limits(512, 512)
    b = budget(limits)
    drpc = b.take("tupletree DRPC server", 512, 65, explicit=False)
    ui = b.take("tupletree-ui", 64, 65, explicit=False)
    reserve = min(RESERVE_FDS, 512 // 4)
    assert 8 <= drpc < 512 and 8 <= ui <= 64
    assert b.held + reserve <= 512
    assert "tupletree DRPC server: max_connections=512 needs 577" in caplog.text
    assert "ulimit -n" in caplog.text


def test_a_cap_the_user_asked_for_that_cannot_fit_is_refused_with_the_numbers():
    limits = Limits(512, 512)
    b = budget(limits)
    with pytest.raises(ValueError, match=r"ui: max_connections=1000 needs 1065 .* limit is 512"):
        b.take("ui", 1000, 65, explicit=True)
    assert b.held == 0


def test_nothing_left_is_refused_and_giving_back_makes_room():
    limits = Limits(300, 300)
    b = budget(limits)
    first = b.take("a", 100, 65, explicit=True)
    with pytest.raises(ValueError, match="fewer than 8 are left"):
        b.take("b", 100, 65, explicit=False)
    b.give_back(first + 65)
    assert b.held == 0
    assert b.take("b", 100, 65, explicit=True) == 100


def test_an_unlimited_hard_limit_is_raised_only_as_far_as_needed():
    limits = Limits(256, -1)
    b = budget(limits)
    assert b.take("drpc", 512, 65, explicit=True) == 512
    assert limits.soft == 512 + 65 + RESERVE_FDS
