"""ConnectorError: a broker that cannot be used, naming the connector, the address and why."""

from __future__ import annotations

from tupletree.redact import redact

__all__ = ["ConnectorError", "redact"]


class ConnectorError(ConnectionError):
    """A broker is unreachable, refuses the credentials, or lacks the queue, stream,
    group or topic a connector needs.

    ``connector`` names the connector (class and component id when known), ``address``
    the broker it tried (credentials removed), ``cause`` what went wrong. Raised at
    submit by the connector's ``check_config``, and reported in ``cluster.errors(name)``
    when it happens while running (the connector keeps retrying then).
    """

    def __init__(self, connector: str, address: str, cause: str) -> None:
        super().__init__(f"{connector}: broker {address}: {cause}")
        self.connector = connector
        self.address = address
        self.cause = cause

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        return (type(self), (self.connector, self.address, self.cause))
