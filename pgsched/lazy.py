"""Names a package exports but imports only when first used (PEP 562, a module-level
``__getattr__``), so that importing one pure submodule of it (``pgsched.cron``,
``pgsched.worker.outcome``) does not load the driver or the faces its siblings need. Pure: imports only the standard library."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``) for ``names``:
    public name -> the module that defines it (absolute, or relative to ``package`` when it
    starts with a dot). A value found is stored in the package's namespace, so a name is
    looked up once; ``__getattr__`` raises AttributeError, as Python would, for a name not
    in ``names``; ``__dir__`` lists the package's own names with these."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(names[name], package)
        value = getattr(module, name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(names))

    return __getattr__, __dir__
