"""The schemas of the OpenAPI 3.1 document (its ``components``): the bodies the REST API
takes and returns, and the shared pieces its paths are written with (:mod:`.openapi`).
"""

from __future__ import annotations

from typing import Any

from ..limits import MAX_RATE_PERIOD_SECONDS, MIN_RATE_PERIOD_SECONDS, RATE_PERIOD_RANGE
from .api_dags import RUN_STATES
from .api_executions import STATES
from .credentials import ROLES

J = dict[str, Any]
NAME = {"type": "string", "minLength": 1, "maxLength": 200}
ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
OBJ: J = {"type": "object"}
NULLABLE_TEXT = {"type": ["string", "null"]}


def ref(name: str) -> J:
    """A reference to the schema ``name`` of :data:`SCHEMAS`."""
    return {"$ref": f"#/components/schemas/{name}"}


TASK_FIELDS: J = {
    "name": {**NAME, "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$"},
    "description": NULLABLE_TEXT,
    "handler_kind": {"enum": ["shell", "argv", "python"]},
    "command": NULLABLE_TEXT,
    "argv": {"type": ["array", "null"], "items": {"type": "string"}},
    "python_target": NULLABLE_TEXT,
    "schedule_kind": {"enum": ["cron", "interval", "once", "none"]},
    "schedule": NULLABLE_TEXT,
    "timezone": {"type": "string"},
    "params": {
        **OBJ,
        "description": "Read below admin with the values under keys named like a secret "
        "(password, token...) or listed in sensitive_params as the mask '••••••'; sent back, "
        "a mask keeps the stored value (docs/security.md).",
    },
    "env": {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "Every value read below admin as the mask '••••••'; sent back, a mask "
        "keeps the stored value.",
    },
    "stdin": NULLABLE_TEXT,
    "timeout_seconds": {"type": ["number", "null"]},
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 1000},
    "retry_policy": {"enum": ["fixed", "linear", "exponential", "exponential_jitter"]},
    "retry_base_seconds": {"type": "number", "minimum": 0},
    "retry_max_seconds": {"type": "number", "minimum": 0},
    "priority": {"type": "integer", "minimum": 1, "maximum": 10},
    "queue": {"type": "string"},
    "no_retry_exit_codes": {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 255},
    },
    "no_retry_exceptions": {"type": "array", "items": {"type": "string"}},
    "misfire_policy": {"enum": ["skip", "once", "all"]},
    "idempotent": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
    "sensitive_params": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
    # overlap and unique windows (issue 18, items 5-6; docs/limits.md)
    "overlap_policy": {"enum": ["allow", "skip", "queue_one"]},
    "unique_policy": {"enum": ["none", "pending"]},
    "unique_period_seconds": {"type": ["number", "null"], "exclusiveMinimum": 0},
    "unique_scope": {"enum": ["task", "key"]},
    # where its Python handler runs (migration 0035; null: the worker's --python-isolation)
    "python_isolation": {"enum": ["process", "thread", None]},
}
# Why a task is paused (read only; all null while it is enabled): paused_by 'scheduler'
# means its schedule could not be computed (pause_reason says why; fixing the schedule
# with PATCH resumes it).
PAUSE_FIELDS: J = {
    "paused_at": {"type": ["string", "null"], "format": "date-time"},
    "paused_by": {"enum": ["operator", "scheduler", None]},
    "pause_reason": NULLABLE_TEXT,
}
SCHEMAS: J = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "field"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "field": NULLABLE_TEXT,
                },
            }
        },
    },
    "TaskCreate": {
        "type": "object",
        "required": ["name"],
        "additionalProperties": False,
        "properties": {**TASK_FIELDS, "enabled": {"type": "boolean"}},
    },
    "TaskUpdate": {
        "type": "object",
        "additionalProperties": False,
        "properties": {k: v for k, v in TASK_FIELDS.items() if k != "name"},
    },
    "Task": {
        "type": "object",
        "properties": {"id": ID, "tenant": {"type": "string"}, **TASK_FIELDS, **PAUSE_FIELDS},
    },
    "TaskSummary": {
        "type": "object",
        "properties": {"name": NAME, "state": {"enum": ["active", "paused"]}, **PAUSE_FIELDS},
    },
    "Trigger": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "params": OBJ,
            "run_at": {"type": "string", "format": "date-time"},
            "priority": {"type": "integer", "minimum": 1, "maximum": 10},
            "idempotency_key": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "The task's own key: the same key on another task is another run.",
            },
        },
    },
    "Enqueued": {
        "type": "object",
        "required": ["execution_id", "deduplicated", "dedup_reason", "succeeded_execution_id"],
        "description": "What the trigger did. deduplicated is false when a new execution was "
        "queued. When true, nothing new runs, because of the idempotency key (a "
        "key belongs to one task): dedup_reason 'live': an execution of the task "
        "with the key is queued or running, and execution_id is that one; "
        "'succeeded': the key already succeeded in succeeded_execution_id, and "
        "execution_id is the 'skipped' execution recorded for this call. A task's unique "
        "window (docs/limits.md): 'unique_pending': an execution of the task (or key) is "
        "pending, and execution_id is that one; 'unique_period': execution_id was enqueued "
        "within the task's unique period.",
        "properties": {
            "execution_id": ID,
            "deduplicated": {"type": "boolean"},
            "dedup_reason": {
                "enum": ["live", "succeeded", "unique_pending", "unique_period", None]
            },
            "succeeded_execution_id": {"type": ["integer", "null"], "minimum": 1},
        },
    },
    "Execution": {
        "type": "object",
        "properties": {
            "id": ID,
            "task_name": {"type": "string"},
            "state": {"enum": list(STATES)},
            # its Python handler's latest ctx.progress (migration 0038); null: none reported
            "progress": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "progress_message": NULLABLE_TEXT,
            "progress_at": {"type": ["string", "null"], "format": "date-time"},
        },
    },
    "DagRun": {
        "type": "object",
        "properties": {
            "id": ID,
            "dag_name": {"type": "string"},
            "state": {"enum": list(RUN_STATES)},
        },
    },
    "AuditEvent": {
        "type": "object",
        "properties": {
            "id": ID,
            "at": {"type": "string", "format": "date-time"},
            "tenant": NULLABLE_TEXT,
            "actor_kind": {"enum": ["token", "user", "cli", "anonymous"]},
            "actor": {"type": "string"},
            "action": {"type": "string"},
            "target": {"type": "string"},
            "detail": {"type": "object"},
            "ip": NULLABLE_TEXT,
        },
    },
    "RetryAll": {
        "type": "object",
        "required": ["expected_count"],
        "additionalProperties": False,
        "properties": {
            "expected_count": {"type": "integer", "minimum": 0},
            "task": {"type": "string"},
        },
    },
    "TokenCreate": {
        "type": "object",
        "required": ["role"],
        "additionalProperties": False,
        "properties": {
            "role": {"enum": list(ROLES)},
            "name": {"type": "string", "maxLength": 200},
            "expires_in": {
                "type": "string",
                "pattern": "^([0-9]{1,9}[smhdw])+$",
                "description": "Lifetime, e.g. 30d, 12h, 1d12h (s, m, h, d, w); omitted: never "
                "expires. At most 10 years.",
            },
            # of the instance scope: only an instance admin may make one
            "instance": {"type": "boolean"},
            # reads env values and sensitive params (migration 0036): only from a principal
            # that does itself
            "may_reveal": {"type": "boolean"},
        },
    },
}

# Queues and quotas (issue 18; pgsched.stores.limits). Limits null: none.
COUNT = {"type": ["integer", "null"], "minimum": 1, "maximum": 2**31 - 1}
QUOTA = {"type": ["integer", "null"], "minimum": 0}
LIMIT_SCHEMAS: J = {
    "Queue": {
        "type": "object",
        "properties": {
            "tenant": {"type": "string"},
            "name": {"type": "string"},
            "max_running": COUNT,
            "rate_limit": COUNT,
            "rate_period_seconds": {"type": ["number", "null"]},
            "paused_at": {"type": ["string", "null"], "format": "date-time"},
            "paused_by": {**NULLABLE_TEXT, "description": "user NAME, token ID or login ROLE"},
            "pause_reason": NULLABLE_TEXT,
            "running": {"type": "integer"},
            "ready": {"type": "integer", "description": "pending and due"},
            "waiting": {"type": "integer", "description": "of the ready, held by a limit"},
            "workers": {"type": "integer", "description": "live workers serving it"},
        },
    },
    "QueuePause": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"reason": {"type": ["string", "null"], "maxLength": 500}},
    },
    "QueueLimits": {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "description": "A field left out stays; null removes the limit (a rate limit and its "
        "period go together).",
        "properties": {
            "max_running": COUNT,
            "rate_limit": COUNT,
            "rate_period_seconds": {
                "type": ["number", "null"],
                "minimum": MIN_RATE_PERIOD_SECONDS,
                "maximum": MAX_RATE_PERIOD_SECONDS,
                "description": f"seconds, {RATE_PERIOD_RANGE}",
            },
        },
    },
    "Quotas": {
        "type": "object",
        "properties": {
            "tenant": {"type": "string"},
            "max_running": QUOTA,
            "running": {"type": "integer"},
            "max_starts_per_hour": QUOTA,
            "hour_starts": {"type": "integer", "description": "this clock hour, UTC"},
            "max_compute_minutes_per_month": QUOTA,
            "compute_minutes": {"type": "number", "description": "this calendar month, UTC"},
            "max_log_bytes": QUOTA,
            "log_bytes": {"type": "integer"},
            "weight": {"type": "integer", "minimum": 1, "maximum": 100},
            "over": {"type": "array", "items": {"enum": ["compute_minutes", "log_bytes"]}},
            "measured_at": {"type": ["string", "null"], "format": "date-time"},
        },
    },
    "QuotasUpdate": {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "description": "A field left out stays; null: no quota (weight is never null).",
        "properties": {
            "max_running": {**QUOTA, "maximum": 2**31 - 1},
            "max_starts_per_hour": {**QUOTA, "maximum": 2**31 - 1},
            "max_compute_minutes_per_month": {**QUOTA, "maximum": 2**63 - 1},
            "max_log_bytes": {**QUOTA, "maximum": 2**63 - 1},
            "weight": {"type": "integer", "minimum": 1, "maximum": 100},
        },
    },
    "AlertWebhook": {
        "type": "object",
        "properties": {
            "tenant": {"type": "string"},
            "alert_webhook": {"type": ["string", "null"], "format": "uri"},
        },
    },
    "AlertWebhookUpdate": {
        "type": "object",
        "additionalProperties": False,
        "required": ["alert_webhook"],
        "properties": {
            "alert_webhook": {
                "type": ["string", "null"],
                "maxLength": 2000,
                "description": "an http:// or https:// URL; null: nowhere",
            }
        },
    },
}
SCHEMAS.update(LIMIT_SCHEMAS)
