"""Names a package exports but imports only when first used (PEP 562, a module-level
``__getattr__``), so that importing one pure submodule of it (``pgsched.cron``,
``pgsched.worker.outcome``) does not load the driver or the faces its siblings need. Pure: imports only the standard library."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package`` (its ``__name__``) for ``names``: public name ->
    the module that defines it (absolute, or relative to ``package`` when it starts with a
    dot). The value found is stored in the package's namespace, so a name is looked up
    once. Raises AttributeError, as Python would, for a name not in ``names``."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(names[name], package)
        value = getattr(module, name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
