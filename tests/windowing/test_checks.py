"""What a windowed bolt refuses, and where: bad arguments as the with_* call is made,
a bad combination when the topology is built, a window that cannot work with the
config at submit; each error names the bolt, the key and the numbers."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, InvalidTopologyError, LocalCluster, TopologyBuilder
from tupletree.errors import InvalidConfigError
from tupletree.testing import FeederSpout
from tupletree.windowing import Count, Duration, WindowedBolt, WindowedBoltExecutor


class Noop(WindowedBolt):
    outputs = ["x"]


class Persistent(WindowedBoltExecutor):
    """As StatefulWindowedBolt's executor will be: acks at checkpoints."""

    persistent = True


def topology(bolt: Any) -> Any:
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["id", "ts"]))
    b.set_bolt("win", bolt).shuffle_grouping("src")
    return b.create_topology()


def submit(bolt: Any, conf: dict[str, Any]) -> None:
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", conf, topology(bolt))


# -- at submit: the window against the config -----------------------------------------


def test_a_duration_window_longer_than_the_message_timeout_is_refused():
    """20 s + 15 s > 30 s: refused naming both numbers and the key to change."""
    bolt = Noop().with_window(Duration.seconds(20), Duration.seconds(15))
    with pytest.raises(InvalidConfigError) as err:
        submit(bolt, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30})
    assert err.value.key == Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS and err.value.value == 30
    text = str(err.value)
    assert "'win'" in text and "35000 ms" in text and "= 30 s" in text and "35 s" in text


def test_storms_rule_counts_only_the_durations_of_a_mixed_window():
    """Duration length + Count slide: the length alone is checked (Storm's validate)."""
    ok = Noop().with_window(Duration.seconds(30), Count(1000))
    submit(ok, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30})
    too_long = Noop().with_window(Count(3), Duration.seconds(31))
    with pytest.raises(InvalidConfigError, match="31000 ms"):
        submit(too_long, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30})


def test_a_long_window_is_accepted_when_timeouts_are_off_or_untracked():
    bolt = Noop().with_tumbling_window(Duration.minutes(5))
    submit(bolt, {Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: False})
    submit(bolt, {Config.TOPOLOGY_ACKER_EXECUTORS: 0})


def test_a_persistent_window_is_not_held_to_the_timeout():
    """A persistent window acks at checkpoints (StatefulWindowedBolt sets persistent)."""
    bolt = Noop().with_tumbling_window(Duration.minutes(5))
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["id"]))
    b.set_bolt("win", Persistent(bolt)).shuffle_grouping("src")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", {}, b.create_topology())


def test_a_count_window_over_max_spout_pending_is_refused():
    """5 + 2 tuples cannot be pending at once with max spout pending 6."""
    bolt = Noop().with_window(Count(5), Count(2))
    with pytest.raises(InvalidConfigError) as err:
        submit(bolt, {Config.TOPOLOGY_MAX_SPOUT_PENDING: 6})
    assert err.value.key == Config.TOPOLOGY_MAX_SPOUT_PENDING
    assert "7 tuples" in str(err.value) and "= 6" in str(err.value)
    submit(bolt, {Config.TOPOLOGY_MAX_SPOUT_PENDING: 7})


def test_max_spout_pending_set_on_the_bolt_itself_counts():
    """Per-component config (add_configuration) is what the bolt's check sees."""
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["id"]))
    b.set_bolt("win", Noop().with_tumbling_window(Count(10))).shuffle_grouping(
        "src"
    ).add_configuration(Config.TOPOLOGY_MAX_SPOUT_PENDING, 5)
    with LocalCluster(simulate_time=True) as cluster, pytest.raises(InvalidConfigError):
        cluster.submit_topology("w", {}, b.create_topology())


def test_a_count_window_larger_than_the_cap_is_refused():
    """Count 200,000: over the default cap of 100,000 held events."""
    bolt = Noop().with_window(Count(200_000), Count(1))
    with pytest.raises(InvalidConfigError) as err:
        submit(bolt, {})
    assert err.value.key == Config.TOPOLOGY_WINDOW_MAX_EVENTS
    assert "200001" in str(err.value) and "100000" in str(err.value)
    submit(bolt, {Config.TOPOLOGY_WINDOW_MAX_EVENTS: 200_001})


def test_a_session_gap_longer_than_the_timeout_is_refused():
    bolt = Noop().with_session_window(Duration.seconds(45))
    with pytest.raises(InvalidConfigError, match="session gap is 45000 ms") as refused:
        submit(bolt, {})
    # A session window cannot be persistent: the error does not offer that way out.
    assert "persistent" not in str(refused.value)
    assert str(refused.value).endswith("at least 45 s or shorten the gap")


def test_the_cap_key_has_a_finite_range():
    with pytest.raises(InvalidConfigError, match=r"tupletree\.window\.max\.events"):
        submit(Noop().with_tumbling_window(Count(2)), {Config.TOPOLOGY_WINDOW_MAX_EVENTS: 0})


# -- when the topology is built ---------------------------------------------------------


def test_a_late_tuple_stream_without_a_timestamp_is_refused_at_build():
    bolt = Noop().with_tumbling_window(Duration.seconds(5)).with_late_tuple_stream("late")
    with pytest.raises(InvalidTopologyError) as err:
        topology(bolt)
    assert err.value.component == "win"
    assert "with_late_tuple_stream needs event time" in str(err.value)


@pytest.mark.parametrize(
    "configure",
    [
        lambda b: b.with_tumbling_window(Count(3)).with_lag(Duration.of(5)),
        lambda b: b.with_tumbling_window(Count(3)).with_watermark_interval(Duration.of(5)),
    ],
)
def test_a_lag_or_watermark_interval_without_a_timestamp_is_refused(configure):
    with pytest.raises(InvalidTopologyError, match="needs event time"):
        topology(configure(Noop()))


def test_a_windowed_bolt_without_a_window_is_refused():
    with pytest.raises(InvalidTopologyError, match="no window is set"):
        topology(Noop())


def test_a_sliding_and_a_session_window_together_are_refused():
    bolt = Noop().with_tumbling_window(Count(3)).with_session_window(Duration.seconds(1))
    with pytest.raises(InvalidTopologyError, match="one window"):
        topology(bolt)


def test_the_late_stream_is_declared_with_its_one_field():
    bolt = (
        Noop()
        .with_tumbling_window(Duration.seconds(5))
        .with_timestamp_field("ts")
        .with_late_tuple_stream("late")
    )
    streams = topology(bolt).components["win"].streams
    assert streams["late"].fields == ["late_tuple"] and streams["default"].fields == ["x"]


class Declares(WindowedBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["x"])
        declarer.declare_stream("late", ["y"])


@pytest.mark.parametrize(("bolt", "stream"), [(Declares(), "late"), (Noop(), "default")])
def test_a_late_stream_named_as_one_of_the_bolts_own_is_refused_naming_the_call(bolt, stream):
    """The builder said "declares stream 'late' twice", of a stream the bolt declared
    once: the error names with_late_tuple_stream, which declared the other."""
    bolt = bolt.with_tumbling_window(Count(2)).with_timestamp_field("ts")
    with pytest.raises(InvalidTopologyError, match=rf"with_late_tuple_stream\('{stream}'\)"):
        topology(bolt.with_late_tuple_stream(stream))


def test_a_generator_execute_is_refused_like_a_bolts():
    class Gen(WindowedBolt):
        def execute(self, window):
            yield window

    with pytest.raises(InvalidTopologyError, match="generator"):
        topology(Gen().with_tumbling_window(Count(2)))


# -- as each with_* is called -----------------------------------------------------------


def test_bare_numbers_are_refused_with_a_hint():
    with pytest.raises(TypeError, match=r"did you mean Count\(5\) or Duration\(5\)"):
        Noop().with_window(5, Count(2))


@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.with_window(Count(0)),
        lambda b: b.with_window(Count(3), Duration(0)),
        lambda b: b.with_session_window(Duration(0)),
        lambda b: b.with_watermark_interval(Duration(0)),
    ],
)
def test_empty_lengths_are_refused(call):
    with pytest.raises(ValueError, match="positive"):
        call(Noop())


def test_one_timestamp_only():
    bolt = Noop().with_timestamp_field("ts")
    with pytest.raises(ValueError, match="already has a timestamp"):
        bolt.with_timestamp_extractor(lambda t: 0)


def test_lengths_are_storms_value_types():
    """Count and Duration: whole numbers, Storm's range, by value, immutable."""
    assert Duration.seconds(2) == Duration.of(2000) == Duration(2000)
    assert Duration.minutes(1).value == 60_000 and Duration.hours(1).value == 3_600_000
    assert Duration.days(1).value == 86_400_000 and Count.of(3) == Count(3)
    with pytest.raises(ValueError, match="from 0 to 24, got 25"):
        Duration.days(25)
    with pytest.raises(ValueError, match="2147483647"):
        Duration(2**31)
    with pytest.raises(TypeError):
        Count(2.5)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        Count(1).value = 2  # type: ignore[misc]


def test_without_a_sliding_interval_the_window_slides_every_tuple():
    spec = Noop().with_window(Duration.seconds(3)).window_spec
    assert spec.slide == Count(1)
