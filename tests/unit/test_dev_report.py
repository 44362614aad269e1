"""``pgsched dev``'s line per finished attempt (pgsched/dev.py ``report_finish``)."""

from pgsched.dev import report_finish
from pgsched.handlers import Outcome

ROW = {"task_name": "long", "id": 12, "attempt": 1, "max_attempts": 1}


def test_an_attempt_the_stop_handed_back_says_it_runs_again_uncounted(capsys):
    report_finish(ROW, Outcome("failed", error="stopped by the worker"), [], "lost")
    line = capsys.readouterr().out.strip()
    assert "BACK long (execution 12, attempt 1 stopped with the worker: it runs again" in line
    assert "will retry" not in line and "1/1" not in line


def test_a_failure_to_be_retried_and_one_to_the_dead_letter_queue(capsys):
    report_finish({**ROW, "max_attempts": 3}, Outcome("failed", error="exit 1"), [], None)
    report_finish({**ROW, "attempt": 3, "max_attempts": 3}, Outcome("failed"), [], "dead")
    retried, dead = capsys.readouterr().out.strip().splitlines()
    assert "(execution 12, attempt 1/3, will retry) exit 1" in retried
    assert "(execution 12, attempt 3/3, to the dead-letter queue)" in dead
