"""AdaptiveBackoff: a dead destination versus a bad message, by failure ratio (manual clock)."""

from __future__ import annotations

import pytest

from framework.runtime.backoff import AdaptiveBackoff, BackoffConfig


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(**kw: float) -> tuple[AdaptiveBackoff, Clock]:
    clock = Clock()
    cfg = BackoffConfig(**{"window_s": 10.0, "min_samples": 4, "down_min_keys": 3, "park_after": 3, **kw})
    return AdaptiveBackoff(cfg, clock=clock, jitter=lambda: 1.0), clock


def test_many_keys_failing_is_an_outage_that_never_parks() -> None:
    b, _ = make()
    for k in ("a", "b", "c", "d"):
        b.record_failure("es", k)
    assert b.is_down("es") and b.any_down
    decisions = [b.decide("es", n) for n in range(1, 10)]
    assert not any(d.park for d in decisions)
    delays = [d.delay for d in decisions]
    assert delays == sorted(delays) and delays[0] == 1.0 and delays[-1] <= 60.0
    b.record_success("a")  # a retry got through: the destination is back
    assert not b.is_down("es")


def test_one_key_failing_while_others_get_through_is_a_bad_message() -> None:
    b, clock = make()
    first = clock.t
    for _ in range(3):
        b.record_failure("es", "x")
    clock.t += 0.5
    for k in "abcdefgh":
        b.record_success(k)
    assert not b.is_down("es")
    assert [b.decide("es", n, "x", first).park for n in (1, 2, 3)] == [False, False, True]


def test_a_transient_failure_never_parks_on_its_own_evidence() -> None:
    """Successes from before the event's first failure, or of the failing key itself, are
    no evidence that the destination works now: the event is retried, not parked."""
    b, clock = make()
    for k in "abcdefgh":
        b.record_success(k)  # before the failure: the window is full of them
    clock.t += 1
    first = clock.t
    b.record_failure("es", "x")
    b.record_success("x")  # an earlier event of the same key went through: not another key
    assert [b.decide("es", n, "x", first).park for n in range(1, 20)] == [False] * 19
    assert not b.decide("es", 50).park  # no first-failure time: no evidence either
    clock.t += 0.1
    b.record_success()  # a written micro-batch of other keys
    assert b.decide("es", 3, "x", first).park


def test_a_fresh_outage_is_not_diluted_by_earlier_successes() -> None:
    b, clock = make()
    for i in range(500):
        b.record_success(f"k{i}")  # a busy minute before the outage
    clock.t += 1
    for k in ("a", "b", "c", "d"):
        b.record_failure("es", k)
    assert b.is_down("es")
    assert not b.decide("es", 10, "a", clock.t - 1).park


def test_old_failures_leave_the_window() -> None:
    b, clock = make()
    b.record_failure("es", "a")
    b.record_failure("es", "b")
    clock.t += 11
    b.record_failure("es", "c")
    b.record_failure("es", "d")
    assert not b.is_down("es")  # only two keys failing inside the window


def test_end_outages_and_bad_config() -> None:
    b, _ = make()
    for k in "abcd":
        b.record_failure("db", k)
    b.end_outages()
    assert not b.any_down
    with pytest.raises(ValueError):
        BackoffConfig(down_ratio=0)
