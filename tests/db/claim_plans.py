"""The plans of one claim, statement by statement: the claim is a plpgsql function
(pgsched_internal.execution_claim_v1, migration 0021), whose statements EXPLAIN of the call
does not show. auto_explain (a contrib module of PostgreSQL's own, in every build the tests
use) with nested statements logged at NOTICE sends each statement's plan, with its buffers,
to the client that runs it."""

from __future__ import annotations

import json
import os
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgsched import queries

SETTINGS = {
    "log_min_duration": "0",
    "log_analyze": "on",
    "log_buffers": "on",
    "log_nested_statements": "on",
    "log_format": "json",
    "log_level": "notice",
}


def nodes(node: dict) -> list[dict]:
    return [node, *(n for child in node.get("Plans", []) for n in nodes(child))]


def buffers(node: dict) -> int:
    return int(node["Shared Hit Blocks"] + node["Shared Read Blocks"])


def explain_claim(dsn: str, params: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """One execution_claim with ``params``, run twice and rolled back both times (the first
    warms the caches and gives the ids claimed). Returns ``picked``: the buffers of the
    statements that choose and lock the rows (every statement of the claim but the move to
    running, the read of the claimed rows that returns them, and the call itself); ``all``: those of the whole call;
    ``indexes``: the indexes a scan of those statements used that returned rows; and the
    ids claimed, sorted."""
    text = queries.get("execution_claim").text
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        ids = sorted(r["id"] for r in conn.execute(text, params))
        conn.rollback()
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for name, value in SETTINGS.items():
            conn.execute(f"SET auto_explain.{name} = {value}")
        conn.execute(text, params).fetchall()
        conn.rollback()
    plans = [json.loads(m[m.index("{") :]) for m in notices if "{" in m]
    call = [
        p for p in plans if p["Query Text"].lstrip().startswith("SELECT * FROM pgsched_internal.")
    ]
    inner = [p for p in plans if p not in call]
    # the move to running, and the read of the claimed rows by id that returns them (0026)
    choose = [
        p
        for p in inner
        if "UPDATE pgsched.execution e" not in p["Query Text"]
        and "unnest(all_ids, all_tags)" not in p["Query Text"]
    ]
    if os.environ.get("PGSCHED_SHOW_CLAIM_PLANS"):  # to see where a claim's buffers go
        for p in plans:
            print(buffers(p["Plan"]), json.dumps(p, indent=1))
    used = {
        n["Index Name"]
        for p in choose
        for n in nodes(p["Plan"])
        if n.get("Index Name") and n.get("Actual Loops", 0) > 0 and n.get("Actual Rows", 0) > 0
    }
    return {
        "picked": sum(buffers(p["Plan"]) for p in choose),
        "all": buffers(call[-1]["Plan"]) if call else sum(buffers(p["Plan"]) for p in inner),
        "indexes": used,
    }, ids
