"""A credential in a connector's address never reaches what tupletree shows: the submit
error, ``errors()`` (which REST and the page read) and the logs; in every form the
client libraries accept (tupletree/redact.py has the unit tests)."""

from __future__ import annotations

import logging

import pytest

from tupletree import LocalCluster, TopologyBuilder
from tupletree.connectors import ConnectorError
from tupletree.connectors.nats import JetStreamSpout
from tupletree.connectors.redis import RedisStreamSpout

from .support import until

SECRET = "s3cretTOKENxyz"


def _with_spout(spout) -> object:
    b = TopologyBuilder()
    b.set_spout("src", spout)
    return b.create_topology()


@pytest.mark.parametrize(
    "spout",
    [
        JetStreamSpout("s", "d", f"nats://{SECRET}@127.0.0.1:1"),
        RedisStreamSpout("s", "g", f"redis://127.0.0.1:1/0?password={SECRET}"),
        RedisStreamSpout("s", "g", f"host=127.0.0.1 password={SECRET}"),
    ],
    ids=["nats-token", "redis-query-password", "connection-string"],
)
def test_the_submit_error_and_the_log_never_show_the_secret(spout, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology("t", {}, _with_spout(spout))
    assert SECRET not in str(err.value)
    assert SECRET not in err.value.address and SECRET not in err.value.cause
    assert "***" in err.value.address
    assert SECRET not in caplog.text


def test_errors_reported_while_running_never_show_the_secret(caplog) -> None:
    """A broker that cannot be reached after submit is reported in errors() and the log,
    scrubbed, however the client library words it."""
    caplog.set_level(logging.DEBUG)
    spout = RedisStreamSpout("s", "g", f"redis://:{SECRET}@127.0.0.1:1/0", check_at_submit=False)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {}, _with_spout(spout))
        assert until(lambda: cluster.errors("t"), 30)
        errors = cluster.errors("t")
    assert errors and all(SECRET not in e for e in errors)
    assert any("***" in e for e in errors)
    assert SECRET not in caplog.text


def test_an_error_text_that_quotes_the_address_is_scrubbed() -> None:
    """Client libraries word errors their own way, some quoting the URL or the password
    itself; whatever reaches a ConnectorError is scrubbed of the address's secrets and
    of secret-named client config entries."""
    spout = RedisStreamSpout("s", "g", f"redis://u:{SECRET}@127.0.0.1:1/0")
    err = spout.scrubbed(RuntimeError(f"AUTH u {SECRET} failed at redis://u:{SECRET}@h"))
    assert SECRET not in str(err) and "AUTH u *** failed" in str(err)
    from tupletree.connectors.kafka import KafkaSpout

    kafka = KafkaSpout("t", "g", "127.0.0.1:1", consumer_config={"sasl.password": SECRET})
    assert SECRET not in str(kafka.connector_error(f"SASL {SECRET} refused"))
