"""Real ``pgsched worker`` and ``pgsched scheduler`` processes whose host clock is shifted
by libfaketime (Debian package faketime) report their offset from the database's clock:
``pgsched status`` (text and ``--json``) shows each live process's offset and warns about
those above ``clock_offset_warn_seconds``; a process on the true clock shows about 0 and
no warning.

libfaketime is preloaded straight into the process (``LD_PRELOAD``, ``FAKETIME``) rather
than through the ``faketime`` wrapper: the wrapper forks and does not pass SIGTERM on, so
stopping it would leave the pgsched process running (tests.helpers.clock_off).
"""

from __future__ import annotations

import json
import re

import pytest

from ..helpers import cli, clock_off, wait_until


def measured(sql) -> bool:
    """Two workers and one scheduler have each stored an offset measured with a round trip
    (a heartbeat after registration; a second sighting of the scheduler)."""
    row = sql.execute(
        "SELECT (SELECT count(*) FROM pgsched.worker WHERE state = 'running' "
        "                AND clock_round_trip_seconds IS NOT NULL) AS workers, "
        "       (SELECT count(*) FROM pgsched.scheduler_node WHERE role <> 'stopped' "
        "                AND clock_round_trip_seconds IS NOT NULL) AS schedulers"
    ).fetchone()
    return row["workers"] == 2 and row["schedulers"] == 1


@pytest.mark.parametrize("shift", [300, -300], ids=["ahead", "behind"])
def test_status_shows_each_live_processs_clock_offset_and_warns_about_the_shifted_ones(
    dsn, sql, start, shift
):
    skewed_worker = start("worker", "--heartbeat-interval", "1", env=clock_off(shift))
    skewed_scheduler = start("scheduler", "--max-sleep", "0.5", env=clock_off(shift))
    true_worker = start("worker", "--heartbeat-interval", "1")
    wait_until(
        lambda: measured(sql), timeout=30, message="every process to measure its clock offset"
    )

    status = json.loads(cli(dsn, "status", "--json").stdout)

    offsets = {(c["kind"], c["pid"]): c for c in status["clock_offsets"]}
    assert set(offsets) == {
        ("worker", skewed_worker.proc.pid),
        ("worker", true_worker.proc.pid),
        ("scheduler", skewed_scheduler.proc.pid),
    }
    for proc, expected in ((skewed_worker, shift), (true_worker, 0)):
        got = offsets[("worker", proc.proc.pid)]
        assert abs(got["offset_seconds"] - expected) < 2, got
        assert got["warn"] is (expected != 0)
        assert 0 <= got["round_trip_seconds"] < 1
    scheduler = offsets[("scheduler", skewed_scheduler.proc.pid)]
    assert (
        abs(scheduler["offset_seconds"] - shift) < 2
        and scheduler["warn"]
        and scheduler["role"] == "leader"
    )
    assert status["clock_offset_warn_seconds"] == 1
    warned = [w["message"] for w in status["warnings"] if w["kind"] == "clock_offset"]
    way = "ahead of" if shift > 0 else "behind"
    assert len(warned) == 2 and all(f"{way} the database's" in m for m in warned), warned
    assert any(m.startswith("worker ") for m in warned) and any(
        m.startswith("scheduler (leader) ") for m in warned
    )
    # the worker listing carries it too
    by_pid = {w["pid"]: w for w in status["workers"]}
    assert abs(by_pid[skewed_worker.proc.pid]["clock_offset_seconds"] - shift) < 2

    text = cli(dsn, "status").stdout
    assert "clock offsets (host - database; warning above 1 s):" in text
    lines = text.splitlines()
    skewed_line = next(line for line in lines if f":{skewed_worker.proc.pid} on " in line)
    shown = re.search(r": ([+-]\d+\.\d{3}) s ", skewed_line)
    assert shown and abs(float(shown.group(1)) - shift) < 2 and skewed_line.endswith("WARNING"), (
        skewed_line
    )
    true_line = next(line for line in lines if f":{true_worker.proc.pid} on " in line)
    assert "WARNING" not in true_line, true_line
    assert sum(1 for line in lines if line.startswith("warning: ") and "clock is" in line) == 2, (
        text
    )

    # A threshold above the shift: shown, not warned about.
    sql.execute("UPDATE pgsched.setting SET value = '600' WHERE name = 'clock_offset_warn_seconds'")
    calm = json.loads(cli(dsn, "status", "--json").stdout)
    assert not any(c["warn"] for c in calm["clock_offsets"]) and calm["warnings"] == []
