"""examples/trident_word_count.py and examples/trident_kafka_postgres.py run as written
(the second skipped, with the reason, without its broker or PostgreSQL)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_tutorial_example_answers_its_query(capsys: Any) -> None:
    example = load_example("trident_word_count")
    try:
        assert example.main() == "[[5]]"
    finally:
        del sys.modules["trident_word_count"]
    assert 'words("cat the dog jumped") = [[5]]' in capsys.readouterr().out


def postgres_and_kafka() -> str | None:
    try:
        import confluent_kafka  # noqa: F401
        import psycopg

        from tupletree.connectors.kafka.local_broker import tansu_binary

        tansu_binary()
        psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", connect_timeout=3).close()
    except Exception as exc:
        return f"no Kafka broker to start or no PostgreSQL at 127.0.0.1:5432 ({exc})"
    return None


def test_the_kafka_to_postgresql_example_counts_exactly(capsys: Any) -> None:
    reason = postgres_and_kafka()
    if reason:
        pytest.skip(reason)
    example = load_example("trident_kafka_postgres")
    example.TABLE = f"trident_example_{example.RUN}"  # not a table another run uses
    try:
        assert example.main(2000)
    finally:
        example.drop_table()
        del sys.modules["trident_kafka_postgres"]
    assert ": exact" in capsys.readouterr().out


def docs_blocks() -> list[str]:
    """docs/trident.md's python blocks, in order."""
    import re

    text = (ROOT / "docs" / "trident.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def run_as_module(script: str, name: str) -> None:
    """Run ``script`` as module ``name`` (so pickle finds the classes it defines)."""
    import types

    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(script, "docs/trident.md", "exec"), module.__dict__)
    finally:
        del sys.modules[name]


def test_the_docs_tutorial_runs_as_written(capsys: Any) -> None:
    """docs/trident.md's tutorial block, as a script of its own."""
    run_as_module(docs_blocks()[0], "docs_trident")
    assert capsys.readouterr().out.strip() == "[[5]]"


def test_the_docs_tutorial_runs_on_simulated_time_as_written(capsys: Any) -> None:
    """docs/trident.md's simulated-time block in place of the tutorial's last one (the
    tutorial's own drpc.execute waits 600 s of real time there: nothing moves)."""
    tutorial, simulated = docs_blocks()[:2]
    assert "simulate_time=True" in simulated
    script = tutorial[: tutorial.index("with LocalCluster() as cluster:")] + simulated
    run_as_module(script, "docs_trident_sim")
    assert capsys.readouterr().out.strip() == "[[5]]"
