"""JSON values shown on pages capped in size and depth, and values read from the database
that are nested too deep for Python to load.

A page shows a task's params, an execution's params and result, an alert's details: at
most :data:`MAX_BYTES` of their text and :data:`MAX_DEPTH` levels of nesting; beyond that a
:class:`Preview` says how large the whole value is, and the page links to the raw JSON
(the REST API). Nothing here recurses, so no nesting depth can raise RecursionError.

PostgreSQL's jsonb nests far deeper than Python's ``json.loads`` can read (it raises
RecursionError near 1,000 levels): :func:`install_loader` makes psycopg load such a value
as :class:`TooDeep`, its JSON text as a ``str``, instead of failing the whole query.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_BYTES = 16 * 1024  # bytes of JSON text shown on a page
MAX_DEPTH = 20  # levels of nesting shown on a page
TOO_DEEP_BYTES = 1024  # bytes shown of a value too deep to load (TooDeep)
_MAX_NODES = 4 * 1024  # values walked for a preview: its text is cut at MAX_BYTES anyway


class TooDeep(str):
    """A JSON value from the database nested deeper than ``json.loads`` can read: its JSON
    text, unparsed (the API answers it as that text, a JSON string)."""


def _loads(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        return TooDeep(data.decode() if isinstance(data, bytes) else data)


def install_loader() -> None:
    """Load json and jsonb through :func:`_loads` on every psycopg connection made from now
    on in this process (psycopg's global adapters). A value ``json.loads`` reads is loaded
    as before; one nested too deep becomes :class:`TooDeep`."""
    from psycopg.types.json import set_json_loads

    set_json_loads(_loads)


@dataclass(frozen=True)
class Preview:
    """What a page shows of a JSON value: ``text`` (indented JSON, at most MAX_BYTES plus
    a mark), whether it is ``truncated``, the whole value's ``size`` (bytes of its compact
    JSON text) and ``depth`` (levels of nesting; 0 for a scalar, None when too deep to
    read), and ``reason`` (what was left out)."""

    text: str
    truncated: bool
    size: int
    depth: int | None
    reason: str = ""


def measure(value: Any) -> tuple[int, int]:
    """``(size, depth)`` of ``value``: bytes of its compact JSON text, levels of nesting.
    Walks with a stack of its own, whatever the depth."""
    size, deepest = 0, 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            size += 2 + max(0, 2 * len(item) - 1)  # {} plus a colon per key, commas between
            for key, child in item.items():
                size += _scalar_size(str(key))
                stack.append((child, depth + 1))
        elif isinstance(item, (list, tuple)):
            deepest = max(deepest, depth + 1)
            size += 2 + max(0, len(item) - 1)
            stack.extend((child, depth + 1) for child in item)
        else:
            size += _scalar_size(item)
    return size, deepest


def nesting(value: Any) -> int:
    """Levels of nesting of ``value`` (0 for a scalar, 1 for ``[1]``), walked with a stack
    of its own."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        if isinstance(item, (list, tuple, type({}.values()))):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in item)
    return deepest


def _scalar_size(item: Any) -> int:
    return len(json.dumps(item, ensure_ascii=False, default=str).encode())


def _clip(value: Any, max_depth: int) -> tuple[Any, bool]:
    """A copy of ``value`` with what lies deeper than ``max_depth`` levels, or past
    _MAX_NODES values, replaced by a text saying what was left out; whether anything was."""
    clipped = False
    nodes = 0
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    while stack:
        item, parent, key, depth = stack.pop()
        nodes += 1
        if isinstance(item, (dict, list, tuple)) and (depth >= max_depth or nodes > _MAX_NODES):
            kind = "object" if isinstance(item, dict) else "list"
            where = f"deeper than {max_depth} levels" if depth >= max_depth else "past the preview"
            parent[key] = f"… a {kind} of {len(item)} item(s) {where}"
            clipped = True
        elif isinstance(item, dict):
            copy: dict[str, Any] = dict.fromkeys(item)
            parent[key] = copy
            stack.extend((child, copy, k, depth + 1) for k, child in reversed(item.items()))
        elif isinstance(item, (list, tuple)):
            items: list[Any] = [None] * len(item)
            parent[key] = items
            stack.extend(
                (child, items, i, depth + 1) for i, child in reversed(list(enumerate(item)))
            )
        else:
            parent[key] = item
    return root[0], clipped


def preview(
    value: Any, *, indent: int | None = 2, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Preview:
    """What a page shows of ``value`` (a JSON value as loaded, or :class:`TooDeep`):
    ``indent`` spaces per level (None: one line), at most ``max_bytes`` bytes of text and
    ``max_depth`` levels."""
    if isinstance(value, TooDeep):
        size = len(value.encode())
        return Preview(
            _cut(str(value), min(max_bytes, TOO_DEEP_BYTES)),  # its brackets tell little
            True,
            size,
            None,
            "nested deeper than can be read here",
        )
    size, depth = measure(value)
    clipped, deep = _clip(value, max_depth)
    text = json.dumps(clipped, indent=indent, ensure_ascii=False, default=str)
    long = len(text.encode()) > max_bytes
    reasons = [f"nested deeper than {max_depth} levels"] if deep else []
    if long:
        reasons.append(f"longer than {max_bytes} bytes")
    return Preview(
        _cut(text, max_bytes) if long else text,
        deep or long,
        size,
        depth,
        " and ".join(reasons),
    )


def _cut(text: str, max_bytes: int) -> str:
    """The first ``max_bytes`` bytes of ``text`` (whole characters), then a mark."""
    return text.encode()[:max_bytes].decode(errors="ignore") + " …"


def text_preview(text: str | None, max_chars: int = 4000) -> str:
    """``text`` (an error message, a log line) cut to ``max_chars`` characters, with a mark
    saying how long the whole is."""
    if not text or len(text) <= max_chars:
        return text or ""
    return f"{text[:max_chars]} … ({len(text)} characters in all)"
