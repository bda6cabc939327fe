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
