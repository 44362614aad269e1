"""Secret references in a task's env values and a Python task's params, and the masking
of resolved values in what an attempt leaves (docs/security.md, "Secrets"). Pure: no
database, no keys.

A reference is ``{{secret:NAME}}`` (a secret stored sealed in the database, in the task's
tenant: ``pgsched secret set``), ``{{secret:env:NAME}}`` (the worker's environment
variable ``PGSCHED_SECRET_ENV_NAME``) or ``{{secret:file:NAME}}`` (the file NAME in the
worker's ``PGSCHED_SECRET_DIR``, one trailing newline dropped). NAME is 1-64 letters,
digits and ``. _ -``, starting with a letter or digit: a provider's NAME is never a path.
A reference may stand alone (``"{{secret:db-url}}"``) or inside a string
(``"postgresql://app:{{secret:db-pw}}@db/app"``). ``{{secret:`` that does not make a
reference is an error, not text passed on: a mistyped reference would otherwise reach the
task as it is written.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

from .errors import PgschedError

PROVIDERS = ("db", "env", "file")
#: the variables of the processes that seal and open secrets: the key (base64) or a file
#: of keys (pgsched/secret_keys.py), the providers' values and folder
KEY_ENV = "PGSCHED_SECRET_KEY"
KEY_FILE_ENV = "PGSCHED_SECRET_KEY_FILE"
ENV_PREFIX = "PGSCHED_SECRET_ENV_"
DIR_ENV = "PGSCHED_SECRET_DIR"
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
NAME = re.compile(NAME_PATTERN)
_REFERENCE = re.compile(r"\{\{secret:(?:(env|file):)?(" + NAME_PATTERN + r")\}\}")
_OPENING = "{{secret:"

T = TypeVar("T")


def secret_variable(name: str) -> bool:
    """Whether environment variable ``name`` is about secrets (a key, a key file, a
    provider's value or folder): taken out of a worker's environment at its start and wiped
    from its /proc/PID/environ (pgsched/secrecy.py), passed to no command."""
    return name in (KEY_ENV, KEY_FILE_ENV, DIR_ENV) or name.startswith(ENV_PREFIX)


class SecretUnresolved(PgschedError):
    """A reference of a task could not be resolved: the attempt fails and is not retried
    (running it again resolves it no better). ``reference`` is the reference as written
    (never a value)."""

    def __init__(self, reference: str, reason: str):
        self.reference, self.reason = reference, reason
        super().__init__(f"secret reference {reference}: {reason}")


@dataclass(frozen=True, order=True)
class Reference:
    """One reference: ``provider`` (``db``, ``env`` or ``file``) and ``name``."""

    provider: str
    name: str

    @property
    def text(self) -> str:
        """The reference as written."""
        middle = "" if self.provider == "db" else f"{self.provider}:"
        return "{{secret:" + middle + self.name + "}}"


def references(text: str) -> list[Reference]:
    """The references of ``text`` in order. Raises SecretUnresolved for a ``{{secret:`` that
    opens no valid reference (naming what follows it, cut at 80 characters)."""
    found = []
    at = 0
    while (start := text.find(_OPENING, at)) >= 0:
        m = _REFERENCE.match(text, start)
        if m is None:
            shown = text[start : start + 80]
            end = shown.find("}}")
            shown = shown[: end + 2] if end >= 0 else shown
            raise SecretUnresolved(
                shown,
                "is not a reference: {{secret:NAME}}, {{secret:env:NAME}} or "
                "{{secret:file:NAME}}, NAME 1-64 letters, digits and . _ -",
            )
        found.append(Reference(m.group(1) or "db", m.group(2)))
        at = m.end()
    return found


def strings(value: Any) -> Iterable[str]:
    """Every string value of a JSON-like ``value`` (dict values and list items, at any
    depth; not keys)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def references_of(values: Iterable[str]) -> list[Reference]:
    """The distinct references of ``values``, sorted (:func:`references`' errors)."""
    return sorted({r for text in values for r in references(text)})


def substitute(text: str, resolved: Mapping[Reference, str]) -> str:
    """``text`` with each reference replaced by its value in ``resolved``."""
    return _REFERENCE.sub(lambda m: resolved[Reference(m.group(1) or "db", m.group(2))], text)


def substitute_all(value: T, resolved: Mapping[Reference, str]) -> T:
    """``value`` (JSON-like) with every string value's references replaced; a copy."""
    if isinstance(value, str):
        return substitute(value, resolved) if _OPENING in value else value  # type: ignore[return-value]
    if isinstance(value, Mapping):
        return {k: substitute_all(v, resolved) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [substitute_all(v, resolved) for v in value]  # type: ignore[return-value]
    return value


def mask_text(reference: Reference) -> str:
    """What a resolved value is replaced with in output, errors and results."""
    return f"[masked secret {reference.provider}:{reference.name}]"


class Masker:
    """Replaces every resolved value in text: the value itself, each of its lines when it
    has several (output is stored line by line), its JSON-escaped forms (a handler that
    prints ``json.dumps`` of it, with or without ``ensure_ascii``), its ``repr`` and its
    URL-quoted forms (a DSN in an error message), its words joined by one space (a shell's
    unquoted ``echo $V``). Longest first, so a value inside another is masked as the
    longer one's part. Empty values are not masked (there is nothing to find)."""

    def __init__(self, resolved: Mapping[Reference, str]):
        forms: dict[str, str] = {}
        for ref, value in resolved.items():
            mask = mask_text(ref)
            candidates = {
                value,
                json.dumps(value, ensure_ascii=False)[1:-1],
                json.dumps(value)[1:-1],  # json.dumps' default: non-ASCII as \uXXXX
                repr(value)[1:-1],  # a traceback's or a print of a container's
                quote(value, safe=""),  # a URL's, as an error message prints a DSN
                quote_plus(value),
                # as a shell's unquoted ``echo $V`` prints it: split into words, joined by
                # one space (spaces around it dropped; attack 19, test_attack19_masking.py)
                " ".join(value.split()),
            }
            if "\n" in value:
                candidates |= {line.strip() for line in value.splitlines()}
            for form in candidates:
                if form.strip():
                    forms.setdefault(form, mask)
        self._compile(forms)

    def _compile(self, forms: dict[str, str]) -> None:
        ordered = sorted(forms, key=len, reverse=True)
        self._forms = forms
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __or__(self, other: Masker) -> Masker:
        """A masker of both one's values and the other's (a child process that held both:
        :mod:`pgsched.handlers.process_pool`)."""
        both = Masker({})
        both._compile({**other._forms, **self._forms})
        return both

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        """``text`` with every form of every value replaced by its mask."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: self._forms[m.group(0)], text)

    def value(self, value: T) -> T:
        """A JSON-like ``value`` with every string masked (keys too); a copy."""
        if isinstance(value, str):
            return self(value)  # type: ignore[return-value]
        if isinstance(value, Mapping):
            return {self(str(k)): self.value(v) for k, v in value.items()}  # type: ignore[return-value]
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]  # type: ignore[return-value]
        return value

    def outcome(self, outcome: T) -> T:
        """A handler's outcome (:class:`pgsched.handlers.Outcome`) with its error and
        result masked."""
        if self._pattern is None:
            return outcome
        o: Any = outcome
        return dataclasses.replace(
            o, error=self(o.error) if o.error else o.error, result=self.value(o.result)
        )
