"""Broker clients and database drivers are extras: a missing one is an error that names
the extra to install, raised where the user imports the connector."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tupletree.extras import EXTRAS, MissingExtraError, require

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.mark.parametrize(
    ("connector", "client", "extra"),
    [
        ("tupletree.connectors.kafka", "confluent_kafka", "kafka"),
        ("tupletree.connectors.rabbitmq", "pika", "rabbitmq"),
        ("tupletree.connectors.redis", "redis", "redis"),
        ("tupletree.connectors.nats", "nats", "nats"),
    ],
)
def test_a_connector_without_its_client_names_the_extra(connector, client, extra) -> None:
    """Importing a connector whose client is absent fails at the import, naming
    ``pip install 'tupletree[<extra>]'``; tupletree itself still imports."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules[{client!r}] = None  # what Python does for a package not installed
        import tupletree
        try:
            import {connector}
        except ModuleNotFoundError as exc:
            print(type(exc).__name__, exc.extra, exc)
        else:
            print("imported")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(f"MissingExtraError {extra} ")
    assert f"pip install 'tupletree[{extra}]'" in out


def test_require_returns_the_module_when_present() -> None:
    assert require("json", "none", "a test").dumps([1]) == "[1]"
    with pytest.raises(MissingExtraError, match=r"tupletree\[x\]") as info:
        require("no_such_module_here", "x", "a feature")
    assert info.value.extra == "x"


def test_every_extra_named_in_code_is_declared_in_pyproject() -> None:
    """extras.EXTRAS and pyproject's optional dependencies name the same extras."""
    import tomllib

    declared = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)
    assert set(EXTRAS) <= set(declared["all"][0].split("[")[1].rstrip("]").split(","))
