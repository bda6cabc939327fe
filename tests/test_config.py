"""The config keys: one table (config.SETTINGS) behind Config's names, defaults and checks."""

from __future__ import annotations

import pytest

from tupletree.config import DEFAULTS, SETTINGS, Config, validate
from tupletree.errors import InvalidConfigError


def _config_keys() -> set[str]:
    return {v for k, v in vars(Config).items() if k.isupper() and isinstance(v, str)}


def test_config_names_exactly_the_keys_the_table_knows():
    """A key added to Config without a default and a check (or the reverse) fails here."""
    assert _config_keys() == set(SETTINGS)
    assert set(DEFAULTS) == set(SETTINGS)


@pytest.mark.parametrize("key", sorted(SETTINGS))
def test_every_default_passes_its_own_check(key):
    """Defaults are valid values, so an empty config validates."""
    assert SETTINGS[key].check(SETTINGS[key].default) is None
    assert validate({})[key] == DEFAULTS[key]


@pytest.mark.parametrize("key", sorted(SETTINGS))
def test_a_wrongly_typed_value_is_refused_naming_the_key(key):
    """Every known key refuses a value of an unrelated type, and the error names the key."""
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")) as err:
        validate({key: object()})
    assert err.value.key == key


def _numeric(key: str) -> bool:
    default = SETTINGS[key].default
    probe = 1 if default is None else default
    return (
        not isinstance(default, bool)
        and SETTINGS[key].check(probe) is None
        and (isinstance(probe, int | float))
    )


NUMERIC = [k for k in sorted(SETTINGS) if _numeric(k)]


@pytest.mark.parametrize("key", NUMERIC)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 10**12])
def test_every_numeric_key_refuses_nan_infinity_and_absurd_sizes(key, bad):
    """NaN compares false with everything (a NaN timeout would never fire), infinity
    never comes, and an absurd size would allocate before anything refused it: each is
    refused at submit, naming the key and the range."""
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")) as err:
        validate({key: bad})
    assert err.value.key == key


def test_the_absurd_sizes_that_once_ate_gigabytes_are_refused_quickly():
    """topology.workers = 10**7 and topology.executor.batch.size = 10**9 were accepted
    and allocated 5 GB before submit returned; now validate refuses them."""
    for key, value in (
        (Config.TOPOLOGY_WORKERS, 10**7),
        (Config.TOPOLOGY_EXECUTOR_BATCH_SIZE, 10**9),
    ):
        with pytest.raises(InvalidConfigError, match="must be from 1 to"):
            validate({key: value})
    assert NUMERIC  # the parametrised test above covers every numeric key


def test_the_transfer_batching_defaults_are_the_transports():
    """config.SETTINGS states them as literals (config must not import the transport,
    and with it ZeroMQ); they must say what the transport does without the keys."""
    from tupletree.distributed.transport import FRAME_ITEMS, LINGER_SECS

    assert DEFAULTS[Config.TOPOLOGY_TRANSFER_BATCH_SIZE] == FRAME_ITEMS
    assert DEFAULTS[Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS] / 1000 == LINGER_SECS
    for key, bad in [
        (Config.TOPOLOGY_TRANSFER_BATCH_SIZE, 0),
        (Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS, 0),
        (Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS, -1),
    ]:
        with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
            validate({key: bad})
