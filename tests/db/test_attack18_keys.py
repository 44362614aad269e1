"""Attacks on concurrency keys (migration 0021, concurrency_key_v1) by tenant B's own
logins. Each test asserts the safe behaviour: it fails while the attack works."""

from __future__ import annotations

import time

from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from ..tenancy import login as _as


def test_attack18_a_key_template_costs_an_enqueue_no_more_than_its_500_characters(sql, ab):
    """B's engine login gives its own task the template '{a}' 66 times (200 characters,
    the CHECK's most); B's application enqueues one run whose param a is 1 MB. The key is
    cut to 500 characters only at the end: concurrency_key_v1 first extracts a from the
    jsonb 66 times and concatenates a 66 MB string by repeated copies (quadratic), in the
    insert trigger of every way in. Measured: 1 MB costs the shared server 6.6 s of CPU
    per enqueue, 10 MB 127 s; two such calls hold both cores of this machine."""
    _, b, _ = ab
    with _as(b.engine) as c:
        assert (
            c.execute(
                "UPDATE pgsched.task SET concurrency_key = repeat('{a}', 66) WHERE name = 'job'"
            ).rowcount
            == 1
        )
    with _as(b.app) as c:
        c.execute("SET statement_timeout = '3s'")
        started = time.monotonic()
        try:
            c.execute("SELECT pgsched.enqueue_v1('job', %s)", [Jsonb({"a": "x" * 1_000_000})])
            error = None
        except pg_errors.QueryCanceled as e:
            error = e
        took = time.monotonic() - started
    assert error is None and took < 1.0, (
        f"one enqueue of a 1 MB param took the server {took:.1f} s ({error})"
    )
