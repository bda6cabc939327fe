"""bench/trident_chaos.py with a short chaos: Kafka -> word count -> PostgreSQL on
SparkCluster while workers are SIGKILLed at random; the table's counts must equal the
true counts (the script exits 1 otherwise). The two-minute run's figures are in the
branch's report."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from .test_examples import postgres_and_kafka

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_word_count_into_postgresql_stays_exact_under_worker_kills(spark, capsys) -> None:
    reason = postgres_and_kafka()
    if reason:
        pytest.skip(reason)
    spec = importlib.util.spec_from_file_location(
        "trident_chaos", ROOT / "bench" / "trident_chaos.py"
    )
    assert spec is not None and spec.loader is not None
    chaos = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chaos)
    argv = ["20", "--kill-every", "6", "--rate", "150", "--drain", "150", "--seed", "7"]
    assert chaos.main(argv, spark=spark) == 0
    out = capsys.readouterr().out
    assert "EXACT" in out and "counted twice 0, missing 0" in out
