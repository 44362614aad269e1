"""Lost attempts on real workers (migration 0008): executions held unstarted in the buffers
of workers SIGKILLed again and again are never charged for it, while a handler that kills
its own worker every time still ends in the dead-letter queue, one loss later than the
limit says (its first loss cannot be told from a buffered one's)."""

from __future__ import annotations

import signal
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent('''
    import os, signal, time
    from pgsched import App

    app = App()

    @app.task()
    def warm():
        """Short: a worker that ran many sizes a full prefetch."""

    @app.task()
    def block(marker, tag):
        """Holds a slot until its worker is killed."""
        with open(marker, "a") as f:
            f.write(tag + "\\n")
        while True:
            time.sleep(0.05)

    @app.task()
    def stamp(marker, n):
        with open(marker, "a") as f:
            f.write(f"{n}\\n")

    def worker_pid():
        """The worker: this process in a thread, the zygote's parent in a child process
        (--python-isolation process, where killing itself would end only the child)."""
        with open("/proc/self/cmdline", "rb") as f:
            if b"python_child" not in f.read():
                return os.getpid()
        with open(f"/proc/{os.getppid()}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])

    @app.task()
    def poison(marker):
        worker = worker_pid()
        with open(marker, "a") as f:
            f.write(f"{worker}\\n")
        os.kill(worker, signal.SIGKILL)
''')

CONCURRENCY = 2
STAMPS = 8  # fewer than the prefetch (20): every worker holds all of them in its buffer
KILLS = 4  # more than max_lost_attempts (3): the old rescue sent the buffered ones to the DLQ
WORKER_ARGS = (
    "--concurrency",
    str(CONCURRENCY),
    "--prefetch",
    "20",
    "--poll-interval",
    "0.2",
    "--heartbeat-interval",
    "0.5",
)


@pytest.fixture
def tasks(dsn, tmp_path) -> Path:
    (tmp_path / "losttasks.py").write_text(MODULE)
    for name in ("warm", "block", "stamp", "poison"):
        cli(dsn, "task", "create", name, "--python", f"losttasks:{name}")
    return tmp_path


def worker_id(sql, worker) -> int:
    return wait_until(
        lambda: sql.execute(
            "SELECT id FROM pgsched.worker WHERE pid = %s AND state = 'running'", (worker.proc.pid,)
        ).fetchone(),
        message="the worker registers",
    )["id"]


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_executions_buffered_by_workers_killed_again_and_again_are_not_charged(
    dsn, sql, start, tasks
):
    stamped, blocked = tasks / "stamped", tasks / "blocked"
    ids = {
        r["id"]: r["n"]
        for r in sql.execute(
            "SELECT pgsched.enqueue_v1('stamp', jsonb_build_object('marker', %s::text, 'n', g), priority => 9) AS id, "
            "g AS n FROM generate_series(1, %s) g",
            (str(stamped), STAMPS),
        ).fetchall()
    }
    start("scheduler", "--max-sleep", "0.5")
    held: list[set[int]] = []
    for kill in range(KILLS):
        # Short ones first (the prefetch grows), then one blocker per slot, then the stamps:
        # those wait in the buffer behind slots that never free up.
        sql.execute("SELECT pgsched.enqueue_v1('warm', priority => 1) FROM generate_series(1, 100)")
        tags = [f"k{kill}b{i}" for i in range(CONCURRENCY)]
        blockers = [
            sql.execute(
                "SELECT pgsched.enqueue_v1('block', jsonb_build_object('marker', %s::text, "
                "'tag', %s::text), priority => 2) AS id",
                (str(blocked), tag),
            ).fetchone()["id"]
            for tag in tags
        ]
        worker = start("worker", "--pythonpath", str(tasks), *WORKER_ARGS)
        wid = worker_id(sql, worker)

        def settled() -> set[int] | None:
            """The stamps this worker holds, once every slot is blocked, every stamp still
            live is in its buffer, and every stamp that ran has been recorded."""
            if not set(tags) <= set(lines(blocked)):
                return None
            live = {
                r["id"]: r["worker_id"]
                for r in sql.execute(
                    "SELECT id, worker_id FROM pgsched.execution WHERE id = ANY(%s)", (list(ids),)
                )
            }
            recorded = {
                r["id"]
                for r in sql.execute(
                    "SELECT id FROM pgsched.execution_history WHERE id = ANY(%s)", (list(ids),)
                )
            }
            ran = {i for i, n in ids.items() if str(n) in lines(stamped)}
            if any(w != wid for w in live.values()) or not ran <= recorded:
                return None
            return set(live) or None

        held.append(
            wait_until(
                settled, timeout=60, message=f"worker {wid} blocked with the stamps in its buffer"
            )
        )
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(10)
        wait_until(
            lambda: (
                not sql.execute(
                    "SELECT 1 FROM pgsched.execution WHERE worker_id = %s", (wid,)
                ).fetchone()
            ),
            timeout=30,
            message=f"the rescue of worker {wid}",
        )
        for blocker in blockers:  # they ran: not this test's subject
            assert (
                sql.execute("SELECT pgsched.cancel_v1(%s) AS o", (blocker,)).fetchone()["o"]
                == "cancelled"
            )

    start("worker", "--pythonpath", str(tasks), *WORKER_ARGS)
    done = wait_until(
        lambda: (
            (
                rows := sql.execute(
                    "SELECT id, state, attempt, max_attempts, lost_attempts FROM pgsched.execution_history WHERE id = ANY(%s)",
                    (list(ids),),
                ).fetchall()
            )
            and len(rows) == STAMPS
            and rows
        ),
        timeout=60,
        message="every stamp ran",
    )
    assert {r["state"] for r in done} == {"succeeded"}  # nothing dead
    assert Counter(lines(stamped)) == {str(n): 1 for n in ids.values()}  # each ran exactly once
    tries: dict[int, list[tuple[int, str]]] = {}
    for a in sql.execute(
        "SELECT execution_id, attempt, state FROM pgsched.execution_attempt "
        "WHERE execution_id = ANY(%s) ORDER BY attempt",
        (list(ids),),
    ):
        tries.setdefault(a["execution_id"], []).append((a["attempt"], a["state"]))
    assert (
        all(sum(s == "succeeded" for _, s in t) == 1 for t in tries.values())
        and len(tries) == STAMPS
    )
    # Held unstarted by every killed worker: the first loss is recorded (not counted), the
    # later ones go back as never claimed; it then runs once, as attempt 2.
    always = set.intersection(*held)
    assert always, f"no stamp was in every killed worker's buffer: {held}"
    for r in done:
        if r["id"] in always:
            assert (r["attempt"], r["max_attempts"], r["lost_attempts"]) == (2, 2, 0), r
            assert tries[r["id"]] == [(1, "lost"), (2, "succeeded")]


def test_a_handler_that_kills_its_worker_is_dead_after_max_lost_attempts_plus_one_losses(
    dsn, sql, start, tasks
):
    sql.execute("UPDATE pgsched.setting SET value = '2' WHERE name = 'max_lost_attempts'")
    marker = tasks / "poisoned"
    ident = sql.execute(
        "SELECT pgsched.enqueue_v1('poison', jsonb_build_object('marker', %s::text)) AS id",
        (str(marker),),
    ).fetchone()["id"]
    start("scheduler", "--max-sleep", "0.5")
    pids = []
    for loss in range(1, 4):
        worker = start("worker", "--pythonpath", str(tasks), *WORKER_ARGS)
        assert worker.proc.wait(60) == -signal.SIGKILL  # its handler killed it
        pids.append(worker.proc.pid)
        if loss < 3:
            wait_until(
                lambda: sql.execute(
                    "SELECT 1 FROM pgsched.execution WHERE id = %s AND state = 'pending'", (ident,)
                ).fetchone(),
                timeout=30,
                message=f"requeued after loss {loss}",
            )
    dead = wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution_history WHERE id = %s", (ident,)
        ).fetchone(),
        timeout=30,
        message="the poison in the DLQ",
    )
    assert (dead["state"], dead["attempt"], dead["lost_attempts"]) == ("dead", 3, 2)
    assert "lost 2 times, so it is dead" in dead["error"]
    assert lines(marker) == [str(p) for p in pids]  # it started in each of the three workers
    attempts = sql.execute(
        "SELECT a.attempt, a.state, a.error, w.pid FROM pgsched.execution_attempt a "
        "JOIN pgsched.worker w ON w.id = a.worker_id WHERE a.execution_id = %s ORDER BY a.attempt",
        (ident,),
    ).fetchall()
    assert [(a["attempt"], a["state"], a["pid"]) for a in attempts] == [
        (1, "lost", pids[0]),
        (2, "lost", pids[1]),
        (3, "lost", pids[2]),
    ]
    assert "start was not recorded" in attempts[0]["error"]  # the first loss: not counted
    assert all(
        "while running attempt" in a["error"] and "started at" in a["error"] for a in attempts[1:]
    )
