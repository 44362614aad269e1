"""Secret references resolved at execution time, on the worker (docs/security.md,
"Secrets"): a command's env values and a Python task's params get the values, the
attempt's output, error and result get them masked (:class:`pgsched.secret_refs.Masker`).
Nothing resolved is written back: the row keeps its references, the resolved copies live
in the slot thread only.

Stored secrets come sealed from the database (one statement per attempt that references
any, :func:`pgsched.stores.secrets.fetch_sealed`) and are opened with the worker's
keyring; provider secrets come from what the worker was started with: variables
``PGSCHED_SECRET_ENV_<NAME>`` (taken out of its environment at start, so no command
inherits them) and files of ``PGSCHED_SECRET_DIR``. An attempt without references costs
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from ..db import Database
from ..secret_keys import Keyring, SecretUnreadable, from_environment
from ..secret_refs import (
    DIR_ENV,
    ENV_PREFIX,
    KEY_ENV,
    KEY_FILE_ENV,
    Masker,
    Reference,
    SecretUnresolved,
    references_of,
    secret_variable,
    strings,
    substitute,
    substitute_all,
)
from ..stores.secrets import authored_params, fetch_sealed

#: the most a provider's file may hold (bytes), as a stored secret
MAX_FILE_BYTES = 64 * 1024


def take_environment(
    environ: MutableMapping[str, str],
) -> tuple[Keyring | None, dict[str, str], str | None]:
    """What a worker resolves with, from ``environ`` (its own, at start): the keyring
    (:func:`pgsched.secret_keys.from_environment`: ConfigError for a key that is not one),
    the ``PGSCHED_SECRET_ENV_*`` values by NAME and ``PGSCHED_SECRET_DIR``. Every such
    variable is then removed from ``environ``, so no command inherits it."""
    keyring = from_environment(environ)
    provided = {k[len(ENV_PREFIX) :]: v for k, v in environ.items() if k.startswith(ENV_PREFIX)}
    folder = environ.get(DIR_ENV) or None
    for name in [k for k in environ if secret_variable(k)]:
        del environ[name]
    return keyring, provided, folder


@dataclass
class Resolved:
    """What one attempt runs with: ``env`` and ``params`` with their references replaced
    (``params`` None when none were asked for), and the ``mask`` of every value used."""

    env: dict[str, str] | None
    params: Any
    mask: Masker


class SecretResolver:
    """Resolves the references of one worker's executions. ``keyring``: the worker's keys
    (None: none given; a stored secret then fails naming the missing key); ``provided``:
    the ``PGSCHED_SECRET_ENV_*`` values by NAME; ``folder``: ``PGSCHED_SECRET_DIR``."""

    def __init__(
        self,
        db: Database,
        keyring: Keyring | None,
        provided: Mapping[str, str] | None = None,
        folder: str | None = None,
    ):
        self.db, self.keyring = db, keyring
        self.provided = dict(provided or {})
        self.folder = folder

    def resolve(
        self, tenant: str, env: Mapping[str, str] | None, params: Any, task_id: int | None = None
    ) -> Resolved:
        """``env`` (a command's: its values, which only the task's author writes) and
        ``params`` (a Python task's, decoded; None for a command) resolved for an execution
        of ``tenant``. Of ``params``, only the top-level entries that are the task's own
        (task ``task_id`` defines the same key with the same value) are resolved: an
        execution's params are its task's merged with what its enqueuer gave (an
        application's login, a trigger, a DAG run, an upstream's result), and a reference
        written there is plain text, never a way to read the tenant's secrets (the attack
        of issue 19: an enqueuer's ``{{secret:NAME}}`` mailed out by a task that forwards
        its params). Raises SecretUnresolved naming the first reference that cannot be
        (malformed, missing, unreadable, no key), DatabaseError when the task's params or the
        sealed rows cannot be fetched (worth another attempt)."""
        authored = self._authored(tenant, params, task_id)
        texts = list((env or {}).values()) + list(strings(authored))
        refs = references_of(texts)
        if not refs:
            return Resolved(dict(env) if env is not None else None, params, Masker({}))
        values = self._values(tenant, refs)
        resolved_env = None if env is None else {k: substitute(v, values) for k, v in env.items()}
        resolved_params = None
        if params is not None:
            resolved_params = {**params, **substitute_all(authored, values)}
        return Resolved(resolved_env, resolved_params, Masker(values))

    def _authored(self, tenant: str, params: Any, task_id: int | None) -> dict[str, Any]:
        """The entries of ``params`` whose references may be resolved: those that task
        ``task_id`` was defined with, unchanged (never ``upstream``, which a DAG run fills
        from its upstream nodes' results)."""
        if not isinstance(params, dict) or task_id is None:
            return {}
        own = authored_params(self.db, tenant, task_id)
        return {k: v for k, v in params.items() if k != "upstream" and k in own and own[k] == v}

    def _values(self, tenant: str, refs: list[Reference]) -> dict[Reference, str]:
        values: dict[Reference, str] = {}
        stored = [r for r in refs if r.provider == "db"]
        if stored:
            if self.keyring is None:
                raise SecretUnresolved(
                    stored[0].text,
                    f"this worker has no secret key ({KEY_ENV} or {KEY_FILE_ENV}) to open it",
                )
            sealed = fetch_sealed(self.db, tenant, [r.name for r in stored])
            for r in stored:
                if r.name not in sealed:
                    raise SecretUnresolved(r.text, f"no secret {r.name!r} in tenant {tenant!r}")
                try:
                    values[r] = self.keyring.open(tenant, r.name, sealed[r.name])
                except SecretUnreadable as exc:
                    raise SecretUnresolved(r.text, str(exc)) from None
        for r in refs:
            if r.provider == "env":
                if r.name not in self.provided:
                    raise SecretUnresolved(
                        r.text, f"this worker was started without {ENV_PREFIX}{r.name}"
                    )
                values[r] = self.provided[r.name]
            elif r.provider == "file":
                values[r] = self._file(r)
        return values

    def _file(self, r: Reference) -> str:
        if self.folder is None:
            raise SecretUnresolved(r.text, f"this worker was started without {DIR_ENV}")
        path = os.path.join(self.folder, r.name)  # NAME holds no "/" and is not ".." (NAME_PATTERN)
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise SecretUnresolved(r.text, f"{path!r} cannot be read: {exc.strerror}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise SecretUnresolved(r.text, f"{path!r} is over {MAX_FILE_BYTES} bytes")
        text = raw.decode("utf-8", errors="replace")
        return text[:-1] if text.endswith("\n") else text
