"""Masked values sent back: what a form or an update carries where a viewer was shown the
mask. Pure (no database).

Which values are sensitive, and who sees them, is decided in PostgreSQL alone (migration
0031, ``pgsched_internal.shown_v1``; docs/security.md, "Sensitive values and who sees
them"): every value of a task's ``env``, and every ``params`` value under a key whose name
says secret or that the task marks (``sensitive_params``), at any depth. A session that may
not read them is shown :data:`MASK` instead. An operator who may change a task but not read
its secrets edits what he was shown, masks included; :func:`restore` puts the stored value
back wherever the mask comes back, so an edit never writes the mask over a secret. It needs
no rule of its own: wherever the submitted document holds the mask and the stored one has a
value at the same place, that value stays.
"""

from __future__ import annotations

from typing import Any

#: What a viewer sees instead of a sensitive value: fixed, so it tells nothing of the
#: value's length. The same text as ``pgsched_internal.mask_v1()`` (tests/db/test_masking.py).
MASK = "••••••"


#: How deep :func:`restore` looks. The database masks a value more than 32 levels deep
#: whole (migration 0031), so no mask it shows lies deeper; below this, what is submitted
#: is taken as it is (and a document 10,000 levels deep costs no recursion error).
MAX_DEPTH = 40


def restore(submitted: Any, stored: Any, depth: int = 0) -> Any:
    """``submitted`` with each :data:`MASK` replaced by the value at the same place in
    ``stored`` (object keys and list positions, down to :data:`MAX_DEPTH` levels); a mask
    with no stored value there stays as given (it is then the value someone typed).
    Neither argument is changed. ``submitted`` and ``stored`` are JSON values (dicts,
    lists, scalars)."""
    if submitted == MASK:
        return stored if stored is not None else submitted
    if depth >= MAX_DEPTH:
        return submitted
    if isinstance(submitted, dict) and isinstance(stored, dict):
        return {
            k: restore(v, stored[k], depth + 1) if k in stored else v for k, v in submitted.items()
        }
    if isinstance(submitted, list) and isinstance(stored, list):
        return [
            restore(v, stored[i], depth + 1) if i < len(stored) else v
            for i, v in enumerate(submitted)
        ]
    return submitted
