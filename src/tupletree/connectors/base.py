"""Connector: what broker spouts and sinks share (naming, the check at submit, the I/O
thread's life, its error mailbox).

A connector is named ``"<class> '<component id>'"`` in every error it raises or reports.
``check_config`` (called at submit by the cluster, with the component's full config)
connects once through ``probe()`` unless ``check_at_submit`` is False, raising a
ConnectorError that names the connector, ``address()`` and the cause. ``_start_io``
(at the end of open/prepare) registers the ``connector`` metric and the round hook and
starts the I/O thread; ``_stop_io`` stops it and waits for it (bounded).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tupletree.connectors.errors import ConnectorError
from tupletree.connectors.mailbox import ErrorMailbox, as_connector_error
from tupletree.connectors.retry import RetryPolicy
from tupletree.redact import scrub, secrets

# The attributes where connectors keep what the user gave as the broker's address, and
# the client configs whose secret-named entries are credentials (tupletree/redact.py).
_ADDRESS_ATTRIBUTES = ("url", "servers", "bootstrap_servers", "dsn")
_CONFIG_ATTRIBUTES = ("producer_config", "consumer_config")

# How connectors reconnect after a failure, unless given ``reconnect=``.
RECONNECT = RetryPolicy(initial_delay_secs=0.1, max_delay_secs=5.0)
# The longest close/cleanup waits for the I/O thread.
STOP_WAIT_SECS = 10.0


class Connector:
    component = "?"

    def _init_connector(self, reconnect: RetryPolicy | None, check_at_submit: bool) -> None:
        self.reconnect = reconnect if reconnect is not None else RECONNECT
        self.check_at_submit = check_at_submit
        self.component = "?"

    def address(self) -> str:
        """Where the broker is, for messages (no password)."""
        raise NotImplementedError

    def probe(self) -> None:
        """Connect once and check what the connector needs; raise on trouble."""
        raise NotImplementedError

    def connector_name(self) -> str:
        return f"{type(self).__name__} {self.component!r}"

    def connector_error(self, cause: str) -> ConnectorError:
        """A ConnectorError naming this connector and ``address()``, saying ``cause``
        (with any credential of the address scrubbed from it)."""
        return ConnectorError(self.connector_name(), self.address(), self.scrub(cause))

    def scrub(self, text: str) -> str:
        """``text`` without the credentials of this connector's address and client
        config: a client library's error message may quote them."""
        hidden = secrets(*(getattr(self, a, None) for a in _ADDRESS_ATTRIBUTES))
        for attribute in _CONFIG_ATTRIBUTES:
            for key, value in (getattr(self, attribute, None) or {}).items():
                if isinstance(value, str) and value and secrets(f"{key}={value}"):
                    hidden.add(value)
        return scrub(text, hidden)

    def scrubbed(self, exc: BaseException) -> ConnectorError:
        """``exc`` as a ConnectorError of this connector, credentials scrubbed."""
        err = as_connector_error(self.connector_name(), self.address(), exc)
        return ConnectorError(err.connector, self.scrub(err.address), self.scrub(err.cause))

    def check_config(self, conf: dict[str, Any], component: str) -> None:
        """Called at submit; raises ConnectorError naming the component."""
        self.component = component
        if self.check_at_submit:
            try:
                self.probe()
            except Exception as exc:
                raise self.scrubbed(exc) from exc

    def connector_metrics(self) -> dict[str, int]:
        raise NotImplementedError

    def _start_io(
        self, context: Any, io_loop: Callable[[], None], each_round: Callable[[], bool]
    ) -> None:
        self.context = context
        self._errors = ErrorMailbox(self.scrubbed)
        self._kick = threading.Event()  # wakes the I/O thread
        self._stopping = threading.Event()
        context.register_metric("connector", self.connector_metrics)
        context.call_each_round(each_round)
        self._thread = threading.Thread(
            target=io_loop, name=f"tupletree-{self.connector_name()}", daemon=True
        )
        self._thread.start()

    def _stop_io(self) -> None:
        self._stopping.set()
        self._kick.set()
        thread = self._thread
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout=STOP_WAIT_SECS)
