"""Logging of long-running processes: to stderr, with levels, as text or as JSON lines
(``--log-format json``) for log shippers."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json", "console")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (UTC ISO 8601), level, logger, message, and exc."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
            "thread": record.threadName,
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup(level: str = "info", fmt: str = "text") -> None:
    """Send pgsched's logs to stderr at ``level`` in format ``fmt`` (text, json, or console:
    short times for a person watching ``pgsched dev``)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif fmt == "console":
        handler.setFormatter(logging.Formatter("%(asctime)s  %(message)s", "%H:%M:%S"))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("pgsched").setLevel(level.upper())
