"""Optional dependencies: each broker client and database driver is an extra
(``pip install 'tupletree[kafka]'``), needed only by those who use it. ``require``
imports one and, when it is missing, says which extra brings it. Below every layer
(standard library only), so connectors and the store alike can use it."""

from __future__ import annotations

import importlib
from types import ModuleType

# extra -> the modules it brings (pyproject.toml's [project.optional-dependencies])
EXTRAS = {
    "kafka": ("confluent_kafka",),
    "rabbitmq": ("pika",),
    "redis": ("redis",),
    "nats": ("nats",),
    "postgresql": ("psycopg",),
}


class MissingExtraError(ModuleNotFoundError):
    """A feature needs a package of an extra that is not installed; ``extra`` names it."""

    def __init__(self, message: str, *, name: str, extra: str) -> None:
        super().__init__(message, name=name)
        self.extra = extra


def missing(module: str, extra: str, feature: str) -> MissingExtraError:
    """The error to raise (``from`` the ImportError) when ``feature`` cannot import
    ``module``: it names the extra to install."""
    return MissingExtraError(
        f"{feature} needs the {module.split('.')[0]!r} package, which is not "
        f"installed: pip install 'tupletree[{extra}]' (or 'tupletree[all]')",
        name=module,
        extra=extra,
    )


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``; MissingExtraError naming ``extra`` if absent."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(module, extra, feature) from exc
