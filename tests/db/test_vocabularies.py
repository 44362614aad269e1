"""Each vocabulary of pgsched is one StrEnum in a pure module, and the database holds the
same set as a CHECK constraint: the constraints of a migrated database are read
(``pg_get_constraintdef``) and compared with the enums, both ways."""

from __future__ import annotations

import re

import pytest

from pgsched.dag.rules import FailurePolicy, TriggerRule
from pgsched.lifecycle import (
    FINAL_STATES,
    LIVE_STATES,
    AttemptState,
    DagRunState,
    DagRunTrigger,
    ExecutionState,
    ExecutionTrigger,
    LogStream,
    NodeRunState,
    SchedulerRole,
    WorkerState,
)
from pgsched.limits import RateScope
from pgsched.retry import RetryPolicy
from pgsched.roles import ActorKind, LoginPurpose, Role
from pgsched.schedule import ScheduleKind
from pgsched.task_kinds import HandlerKind, MisfirePolicy, PausedBy, PythonIsolation
from pgsched.windows import OverlapPolicy, UniquePolicy, UniqueScope

# (table, column) -> the values the Python side has for it
VOCABULARIES: dict[tuple[str, str], set[str]] = {
    ("task", "schedule_kind"): set(ScheduleKind),
    ("task", "handler_kind"): set(HandlerKind),
    ("task", "retry_policy"): set(RetryPolicy),
    ("task", "misfire_policy"): set(MisfirePolicy),
    ("task", "paused_by"): set(PausedBy),
    ("task", "python_isolation"): set(PythonIsolation),
    ("execution", "state"): set(LIVE_STATES),
    ("execution_history", "state"): set(FINAL_STATES),
    ("execution", "trigger"): set(ExecutionTrigger),
    ("execution_attempt", "state"): set(AttemptState),
    ("execution_log", "stream"): set(LogStream),
    ("worker", "state"): set(WorkerState),
    ("scheduler_node", "role"): set(SchedulerRole),
    ("dag", "failure_policy"): set(FailurePolicy),
    ("dag_node", "trigger_rule"): set(TriggerRule),
    ("dag_run", "state"): set(DagRunState),
    ("dag_run", "trigger"): set(DagRunTrigger),
    ("dag_node_run", "state"): set(NodeRunState),
    ("web_user", "role"): set(Role),
    ("api_token", "role"): set(Role),
    ("tenant_role", "purpose"): set(LoginPurpose),
    ("audit_event", "actor_kind"): set(ActorKind),
    ("rate_start", "scope"): set(RateScope),
    ("task", "overlap_policy"): set(OverlapPolicy),
    ("task", "unique_policy"): set(UniquePolicy),
    ("task", "unique_scope"): set(UniqueScope),
    ("unique_period", "scope"): set(UniqueScope),
}
# Value lists in the schema that Python does not name as a vocabulary (yet): they are
# written only in SQL (statistics and alerting are kept by the database itself).
NOT_ENUMS = {("stats_bucket", "kind"), ("alert", "kind"), ("webhook_delivery", "event")}

_CHECKS = """
SELECT t.relname AS "table", a.attname AS "column", pg_get_constraintdef(c.oid) AS definition
  FROM pg_constraint c
  JOIN pg_class t ON t.oid = c.conrelid
  JOIN pg_namespace n ON n.oid = t.relnamespace
  JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = c.conkey[1]
 WHERE n.nspname = 'pgsched' AND c.contype = 'c' AND cardinality(c.conkey) = 1
   AND NOT t.relispartition
   AND pg_get_constraintdef(c.oid) ~ '= ANY \\(ARRAY\\['
"""


def allowed_values(sql) -> dict[tuple[str, str], set[str]]:
    """(table, column) -> the text values its CHECK (column IN (...)) allows."""
    found: dict[tuple[str, str], set[str]] = {}
    for row in sql.execute(_CHECKS):
        key = (row["table"], row["column"])
        assert key not in found, f"two value lists constrain {key}"
        found[key] = {
            v.replace("''", "'") for v in re.findall(r"'((?:[^']|'')*)'::text", row["definition"])
        }
    return found


@pytest.fixture
def schema_values(sql):
    return allowed_values(sql)


@pytest.mark.parametrize("key", sorted(VOCABULARIES), ids=lambda k: ".".join(k))
def test_each_enum_holds_the_values_its_check_constraint_allows(schema_values, key):
    assert key in schema_values, f"no CHECK (... IN ...) on pgsched.{key[0]}.{key[1]}"
    assert VOCABULARIES[key] == schema_values[key]


def test_every_value_list_in_the_schema_has_its_enum(schema_values):
    assert set(schema_values) - NOT_ENUMS == set(VOCABULARIES)


def test_an_execution_is_live_or_final_never_both():
    assert set(LIVE_STATES) | set(FINAL_STATES) == set(ExecutionState)
    assert not set(LIVE_STATES) & set(FINAL_STATES)


def test_the_reader_parses_a_constraint_definition(sql):
    """The parser of pg_get_constraintdef's text, on a table made here: it can fail."""
    sql.execute("CREATE TABLE pgsched.vocabulary_probe (x text CHECK (x IN ('a', 'it''s')))")
    try:
        assert allowed_values(sql)[("vocabulary_probe", "x")] == {"a", "it's"}
    finally:
        sql.execute("DROP TABLE pgsched.vocabulary_probe")
