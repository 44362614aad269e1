"""JSON as pgsched writes it: what PostgreSQL's jsonb accepts, and how the faces (CLI,
REST API, log streams) turn values that JSON lacks into text. Pure (no database)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from .errors import ValidationError

_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def has_nul(json_text: str) -> bool:
    """Whether ``json_text`` (made by json.dumps) encodes a NUL character, which PostgreSQL's
    jsonb refuses (https://www.postgresql.org/docs/current/datatype-json.html)."""
    return "\\u0000" in json_text and _NUL_ESCAPE.search(json_text) is not None


def check_json_object(field: str, value: object) -> None:
    """Raise ValidationError unless ``value`` is a dict that PostgreSQL's jsonb accepts:
    no NaN or infinities, no NUL characters."""
    if not isinstance(value, dict):
        raise ValidationError(field, value, "must be a JSON object")
    if not value:
        return
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(field, value, f"is not valid JSON for PostgreSQL ({exc})") from None
    if has_nul(text):
        raise ValidationError(
            field, value, "contains a NUL character, which PostgreSQL's jsonb refuses"
        )


def json_default(value: Any) -> Any:
    """``json.dumps``'s ``default`` for rows read from the database: an aware datetime as
    ISO 8601 text, anything else (Decimal, UUID ...) as its ``str``."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)
