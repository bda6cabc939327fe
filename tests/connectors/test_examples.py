"""The connector examples of docs/connectors.md and the examples/*.py pipelines run as
written, against the brokers of this machine (each skipped, with the reason, where its
broker is down)."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.support import until
from tupletree import LocalCluster
from tupletree.connectors import connector_totals

ROOT = Path(__file__).resolve().parents[2]


def redis_up() -> str | None:
    try:
        import redis

        redis.Redis(socket_connect_timeout=2).ping()
    except Exception as exc:
        return f"no Redis at 127.0.0.1:6379 ({exc})"
    return None


def rabbitmq_up() -> str | None:
    try:
        import pika

        pika.BlockingConnection(pika.URLParameters("amqp://guest:guest@127.0.0.1:5672/%2F")).close()
    except Exception as exc:
        return f"no RabbitMQ at 127.0.0.1:5672 ({exc!r})"
    return None


def kafka_up() -> str | None:
    try:
        import confluent_kafka  # noqa: F401

        from tupletree.connectors.kafka.local_broker import tansu_binary

        tansu_binary()
    except Exception as exc:
        return f"no Kafka-compatible broker to start ({exc})"
    return None


def nats_up() -> str | None:
    import asyncio

    async def probe() -> None:
        import nats

        nc = await nats.connect("nats://127.0.0.1:4222", max_reconnect_attempts=1)
        try:
            await nc.jetstream().account_info()
        finally:
            await nc.close()

    try:
        asyncio.run(probe())
    except Exception as exc:
        return f"no NATS with JetStream at 127.0.0.1:4222 ({exc!r})"
    return None


PAGE = ROOT / "docs" / "connectors.md"


def connector_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def run_block(code: str, name: str) -> Any:
    """Run a page's block as a script of its own (components are copied with pickle,
    which finds classes by module name)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(code, f"docs/connectors.md ({name})", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


@pytest.mark.parametrize(
    "index,up",
    [(0, redis_up), (1, rabbitmq_up), (2, kafka_up), (3, nats_up)],
    ids=["redis", "rabbitmq", "kafka", "jetstream"],
)
def test_the_docs_connector_examples_run(index: int, up: Any, capsys: Any) -> None:
    reason = up()
    if reason:
        pytest.skip(reason)
    blocks = connector_blocks()
    assert len(blocks) == 4
    module = run_block(blocks[index], f"docs_connectors_{index}")
    printed = capsys.readouterr().out
    if index == 0:
        assert "'acked': 100" in printed
        assert module.r.xpending("example-orders", "shop")["pending"] == 0
        module.r.delete("example-orders", "example-shouted", "example-dead")
    elif index == 1:
        assert printed.strip() == "0 100"
        for queue in ("example-orders", "example-shouted"):
            module.channel.queue_delete(queue)
    elif index == 2:
        assert printed.strip() == "[50, 50]"
    else:
        assert printed.strip() == "0"


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name,up",
    [
        ("redis_streams", redis_up),
        ("rabbitmq_queue", rabbitmq_up),
        ("kafka_topic", kafka_up),
        ("jetstream_stream", nats_up),
    ],
)
def test_the_example_pipelines_move_every_message(name: str, up: Any) -> None:
    reason = up()
    if reason:
        pytest.skip(reason)
    example = load_example(name)
    try:
        with LocalCluster() as cluster:
            cluster.submit_topology(name, example.CONF, example.topology(messages=300))
            assert until(
                lambda: connector_totals(cluster.metrics(name)["orders"]).get("acked") == 300
            )
            assert until(
                lambda: connector_totals(cluster.metrics(name)["shouted"]).get("written", 0) >= 300
            )
            metrics = cluster.metrics(name)
        report = example.report(metrics)
    finally:
        del sys.modules[name]
    assert "'received': 300" in report and "'dead_lettered': 0" in report
