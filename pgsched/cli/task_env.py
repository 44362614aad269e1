"""``task update``'s options for a task's env (``--unset-env``, ``--env-replace``: ``--env``
merges by default) and the check of the secret references ``task create`` and ``update``
are given (docs/security.md, "Secrets"): a malformed one is refused naming its field and
value, one naming a stored secret the tenant lacks is warned of (it may be set later)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import PgschedError, ValidationError
from ..secret_refs import SecretUnresolved, references, strings

UPDATE_ENV_OPTIONS = [
    click.option(
        "--unset-env",
        "unset_env",
        multiple=True,
        metavar="NAME",
        help="Remove variable NAME from the task's environment (repeat); the others stay.",
    ),
    click.option(
        "--env-replace",
        "env_replace",
        is_flag=True,
        help="Make the --env given the whole environment (without it, --env merges; "
        "--no-env removes every variable).",
    ),
]


def env_update(o: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``tasks.update``'s keywords for the env options given (``merge_env``,
    ``unset_env``), ``fields`` completed with the env to set over the stored one. Raises
    ValidationError for options that contradict each other."""
    unset = list(o.get("unset_env") or ())
    both = sorted(set(unset) & set(fields.get("env") or {}))
    if both:
        raise ValidationError(
            "unset_env", both[0], "is also given by --env: set it or remove it, not both"
        )
    if o.get("env_replace") and not o.get("env"):
        raise PgschedError(
            "--env-replace: replaces the environment with the --env given, and none was: give "
            "--env NAME=VALUE, or --no-env to remove every variable"
        )
    for flag in ("env_replace", "no_env"):
        if unset and o.get(flag):
            raise ValidationError(
                "unset_env", unset[0], f"give --unset-env or --{flag.replace('_', '-')}, not both"
            )
    if o.get("env_replace") or o.get("no_env"):
        return {}
    if unset:
        fields.setdefault("env", {})
    return {"merge_env": "env" in fields, "unset_env": unset}


def check_references(
    fields: dict[str, Any], handler_kind: str | None, stored: set[str] | None, tenant: str
) -> list[str]:
    """Warnings for the secret references of ``fields``' env values and (a Python task's)
    params: each stored secret (``{{secret:NAME}}``) the tenant has none of in ``stored``
    (None: not known, none warned of),
    and a command's params' references, passed on as written. Raises ValidationError
    naming the field (``env.NAME``, ``params.KEY``) and its value for a malformed one."""
    warnings = []
    where = [(f"env.{k}", v) for k, v in (fields.get("env") or {}).items()]
    params = fields.get("params") or {}
    where += [(f"params.{k}", v) for k, v in params.items()]
    for field, value in where:
        for text in strings(value):
            try:
                found = references(text)
            except SecretUnresolved as exc:
                raise ValidationError(field, text, f"{exc.reference} {exc.reason}") from None
            if found and field.startswith("params.") and handler_kind != "python":
                warnings.append(
                    f"{field}: a command's params are passed as written, references "
                    "unresolved: give secrets in --env"
                )
            for ref in found:
                if ref.provider == "db" and stored is not None and ref.name not in stored:
                    warnings.append(
                        f"{field} references {ref.text}, which tenant {tenant!r} has no secret "
                        f"of (yet): its runs fail until 'pgsched secret set {ref.name}'"
                    )
    return list(dict.fromkeys(warnings))
