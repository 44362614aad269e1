"""Claims by queue (migration 0014, execution_claim): what other queues hold costs a claim
nothing, measured in the buffers PostgreSQL touches (EXPLAIN ANALYZE), never in time; the
claim's order (priority, run_at, id) holds across a worker's queues; a worker of several
queues locks no more rows than it claims."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from ..factories import T0, make_task
from .claim_plans import explain_claim
from .test_claim import claim, register

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

BACKLOG = 100_000


def fill(sql, task: str, queue: str, n: int, *, oldest: datetime) -> None:
    """``n`` ready executions of ``task`` on ``queue``, run_at from ``oldest`` on, a
    millisecond apart, in one INSERT (the statement trigger checks the task once)."""
    sql.execute(
        """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at, queue)
                   SELECT t.id, %(oldest)s, %(oldest)s + g * interval '1 ms', %(queue)s
                     FROM pgsched.task t, generate_series(1, %(n)s) g
                    WHERE t.name = %(task)s""",
        {"task": task, "queue": queue, "n": n, "oldest": oldest},
    )


def claim_buffers(
    dsn: str, worker: int, queues: list[str], limit: int = 10, tenants: list[str] | None = None
) -> tuple[dict[str, int], list[int]]:
    """The shared buffers (hit + read) one execution_claim of ``queues`` touches, from
    EXPLAIN (ANALYZE, BUFFERS): ``picked``, choosing and locking the rows (that CTE reads
    the ones before it), and ``all``, the whole statement; and the ids it claimed. Rolled
    back, so the same claim can be measured again."""
    params = {
        "queues": queues,
        "tenants": tenants,
        "limit": limit,
        "worker_id": worker,
        "now": T0,
        "known_task_ids": [],
        "known_task_versions": [],
    }
    plan, ids = explain_claim(dsn, params)
    return {"picked": plan["picked"], "all": plan["all"]}, ids


def flat(before: dict[str, int], after: dict[str, int], claimed: int, queues: int) -> bool:
    """Whether a claim beside the backlog touched about what it touched without: choosing
    the rows, a buffer or two more per front it reads (each of its queues' ten priorities,
    read twice, once to see whether the tenant has work due and once to take it, each
    descent a level deeper: 4 per front); the whole statement, a few more per claimed
    row (the table is 1,000 times larger: each row's update descends a deeper primary key
    and free-space map), and a few for the rest of the claim (the tenant's usage row, the
    walk of the tenants with pending work, a level deeper too). Never in proportion to the
    backlog: the index without the queue read about 3,000 buffers more."""
    fronts = 10 * queues
    return (
        after["picked"] <= before["picked"] + 4 * fronts + 10
        and after["all"] <= before["all"] + 4 * fronts + 5 * claimed + 25
    )


def test_a_claim_touches_no_more_beside_a_backlog_on_another_queue(dsn, db, sql):
    """100,000 ready executions on 'bulk', older than default's (so the index without the
    queue, (priority, run_at, id), held them all before default's): a claim on 'default',
    and one of a worker serving 'default' and 'urgent', touch what they touch without."""
    make_task(db, "job", now=T0)
    make_task(db, "hurry", queue="urgent", now=T0)
    make_task(db, "heavy", queue="bulk", now=T0)
    fill(sql, "job", "default", 50, oldest=T0 - timedelta(hours=1))
    fill(sql, "hurry", "urgent", 50, oldest=T0 - timedelta(minutes=30))
    worker = register(db, queues=("default", "urgent"))
    sql.execute("VACUUM ANALYZE pgsched.execution")
    served = [("default",), ("default", "urgent")]
    alone = {q: claim_buffers(dsn, worker, list(q)) for q in served}
    fill(sql, "heavy", "bulk", BACKLOG, oldest=T0 - timedelta(days=1))
    sql.execute("VACUUM ANALYZE pgsched.execution")
    beside = {q: claim_buffers(dsn, worker, list(q)) for q in served}
    print({",".join(q): (alone[q][0], beside[q][0]) for q in served})  # without, beside
    for q in served:
        (before, ids_before), (after, ids_after) = alone[q], beside[q]
        assert ids_after == ids_before and len(ids_before) == 10  # the same ones claimed
        assert flat(before, after, len(ids_after), len(q)), (q, before, after)


def test_a_worker_of_the_backlogged_queue_and_another_reads_only_the_fronts(dsn, db, sql):
    """A worker serving 'default' and 'bulk': its claim reads at most its limit from each
    queue's front, so 100,000 more ready executions behind bulk's front cost it about
    nothing; it takes the oldest of both queues, interleaved."""
    make_task(db, "job", now=T0)
    make_task(db, "heavy", queue="bulk", now=T0)
    start = T0 - timedelta(minutes=2)
    fill(sql, "heavy", "bulk", 200, oldest=start)
    fill(sql, "job", "default", 50, oldest=start + timedelta(microseconds=500))  # between
    worker = register(db, queues=("default", "bulk"))
    sql.execute("VACUUM ANALYZE pgsched.execution")
    small, ids_small = claim_buffers(dsn, worker, ["default", "bulk"])
    expected = [
        r["id"]
        for r in sql.execute(
            "SELECT id FROM pgsched.execution ORDER BY priority, run_at, id LIMIT 10"
        )
    ]
    assert ids_small == sorted(expected)
    queues = sql.execute("SELECT queue FROM pgsched.execution WHERE id = ANY(%s)", [expected])
    assert {r["queue"] for r in queues} == {"default", "bulk"}
    fill(sql, "heavy", "bulk", BACKLOG, oldest=T0 - timedelta(minutes=1))  # ready, behind
    sql.execute("VACUUM ANALYZE pgsched.execution")
    large, ids_large = claim_buffers(dsn, worker, ["default", "bulk"])
    print("without the backlog", small, "with", large)
    assert ids_large == ids_small
    assert flat(small, large, len(ids_large), 2), (small, large)


def test_the_claim_order_holds_across_a_workers_queues(db, sql):
    """Executions spread over three queues with random priorities and run_ats, and a fourth
    the worker does not serve: claims of every size take them exactly in (priority, run_at,
    id) order across the three, as one ordered queue would give them."""
    rng = random.Random(14)
    for q in "abcd":
        make_task(db, f"job-{q}", queue=q, now=T0)
    for _ in range(300):
        q = rng.choice("abcd")
        run_at = T0 - timedelta(seconds=rng.randrange(50))
        sql.execute(
            """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at, queue,
                                                     priority)
                       SELECT id, %s, %s, %s, %s FROM pgsched.task WHERE name = %s""",
            [T0, run_at, q, rng.randint(1, 10), f"job-{q}"],
        )
    expected = [
        r["id"]
        for r in sql.execute(
            "SELECT id FROM pgsched.execution WHERE queue <> 'd' ORDER BY priority, run_at, id"
        )
    ]
    worker = register(db, queues=("a", "b", "c"))
    got: list[int] = []
    sizes = iter([1, 2, 3, 5, 8, 13, 21, 34, 55, 89] * 10)
    while rows := claim(db, worker, limit=next(sizes), queues=("c", "a", "b", "a"), now=T0):
        got += [r["id"] for r in rows]
    assert got == expected  # each claim's rows in start order, and claim after claim
    assert {
        r["state"] for r in sql.execute("SELECT state FROM pgsched.execution WHERE queue = 'd'")
    } == {"pending"}


def test_a_claim_leaves_nothing_it_did_not_claim_locked(dsn, db, sql):
    """W serves 'a' and 'b' and claims 5 (in autocommit, as the worker's claimer does): it
    takes a's 5 older executions, and b's are free the moment the claim's statement ends:
    V, serving only 'b', gets all of them, and no row stays locked."""
    make_task(db, "job-a", queue="a", now=T0)
    make_task(db, "job-b", queue="b", now=T0)
    fill(sql, "job-a", "a", 5, oldest=T0 - timedelta(minutes=2))
    fill(sql, "job-b", "b", 5, oldest=T0 - timedelta(minutes=1))
    w, v = register(db, "w", queues=("a", "b")), register(db, "v", queues=("b",))
    mine = claim(db, w, limit=5, queues=("a", "b"), now=T0)
    assert {r["task_name"] for r in mine} == {"job-a"} and len(mine) == 5
    with psycopg.connect(dsn, row_factory=dict_row) as probe:  # what no transaction holds
        free = probe.execute(
            "SELECT count(*) AS n FROM (SELECT id FROM pgsched.execution FOR UPDATE SKIP LOCKED) x"
        ).fetchone()["n"]
    assert free == 10
    theirs = claim(db, v, limit=5, queues=("b",), now=T0)
    assert {r["task_name"] for r in theirs} == {"job-b"} and len(theirs) == 5


def test_a_held_row_at_the_front_never_keeps_a_claim_from_the_rows_behind_it(dsn, db, sql):
    """Another transaction holds the most urgent ready executions (SELECT ... FOR UPDATE, a
    cancel inside a longer transaction): a claim passes over them and takes the next ones
    in order, however few it asks for (a claim of 1 once came back empty)."""
    make_task(db, "job", now=T0)
    worker = register(db)
    fill(sql, "job", "default", 3, oldest=T0 - timedelta(minutes=2))
    sql.execute("UPDATE pgsched.execution SET priority = 1")
    fill(sql, "job", "default", 4, oldest=T0 - timedelta(minutes=1))  # priority 5, behind them
    urgent = [r["id"] for r in sql.execute("SELECT id FROM pgsched.execution WHERE priority = 1")]
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT 1 FROM pgsched.execution WHERE id = ANY(%s) FOR UPDATE", [urgent])
        got = [claim(db, worker, limit=1, now=T0) for _ in range(2)] + [
            claim(db, worker, limit=3, now=T0)
        ]
        holder.rollback()
    assert [len(rows) for rows in got] == [1, 1, 2]
    assert all(r["priority"] == 5 for rows in got for r in rows)
    assert [
        r["id"] for r in claim(db, worker, limit=5, now=T0)
    ] == urgent  # free again: claimed next


@pytest.mark.clone("claims from several threads at once")
def test_concurrent_claims_of_overlapping_queue_sets_never_share_an_execution(db, sql):
    """Six workers serving overlapping sets of three queues claim at once until nothing is
    left: every execution is claimed once, by a worker that serves its queue."""
    for i, q in enumerate("abc"):
        make_task(db, f"job-{q}", queue=q, now=T0)
        fill(sql, f"job-{q}", q, 150, oldest=T0 - timedelta(minutes=i + 1))
    sets = [("a",), ("b",), ("a", "b"), ("b", "c"), ("a", "b", "c"), ("c", "a")]
    workers = [(register(db, f"w{i}", queues=s), s) for i, s in enumerate(sets)]
    start = threading.Barrier(len(workers))

    def run(worker: int, queues: tuple[str, ...]) -> list[int]:
        start.wait(10)
        ids: list[int] = []
        misses = 0
        while misses < 3:  # others may still hold the last ones for a moment
            rows = claim(db, worker, limit=7, queues=queues, now=T0)
            ids += [r["id"] for r in rows]
            misses = 0 if rows else misses + 1
        return ids

    with ThreadPoolExecutor(len(workers)) as pool:
        futures = [pool.submit(run, w, s) for w, s in workers]
        claimed = [f.result(timeout=120) for f in futures]
    every = [i for ids in claimed for i in ids]
    assert len(every) == len(set(every)) == 450
    rows = sql.execute("SELECT id, worker_id, queue FROM pgsched.execution").fetchall()
    owners = {r["id"]: r for r in rows}
    for (worker, queues), ids in zip(workers, claimed, strict=True):
        assert all(owners[i]["worker_id"] == worker and owners[i]["queue"] in queues for i in ids)


def test_a_claim_reads_no_run_of_its_own_queue_that_is_due_later(dsn, db, sql):
    """100,000 runs enqueued for tomorrow on the worker's own queue, at its priority, with
    three due now: the claim reads the due ones only. Read by (queue, priority) front and
    bounded by run_at; a scan of the queue in priority order walked every future run of a
    priority before reaching the next (on PostgreSQL 14 to 17; 18's skip scan hid it)."""
    make_task(db, "job", now=T0)
    worker = register(db)
    fill(sql, "job", "default", 3, oldest=T0 - timedelta(minutes=1))
    sql.execute(
        "UPDATE pgsched.execution SET priority = 9"
    )  # the later priority: the scan passes the future runs
    sql.execute("VACUUM ANALYZE pgsched.execution")
    alone, ids_alone = claim_buffers(dsn, worker, ["default"])
    fill(sql, "job", "default", BACKLOG, oldest=T0 + timedelta(days=1))  # priority 5, due tomorrow
    sql.execute("VACUUM ANALYZE pgsched.execution")
    beside, ids_beside = claim_buffers(dsn, worker, ["default"])
    print("without the future runs", alone, "with", beside)
    assert ids_beside == ids_alone and len(ids_alone) == 3
    assert flat(alone, beside, 3, 1), (alone, beside)
