"""The CLI's plain-text shapes (pgsched/cli/output.py): a record's key-value lines and a
table's columns."""

from pgsched.cli.output import print_fields, table


def test_a_records_values_start_in_one_column_after_its_longest_key(capsys):
    print_fields({"name": "imports", "rate_limit_remaining_in_window": 3, "paused": None})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "name                           imports",
        "rate_limit_remaining_in_window 3",
    ]


def test_short_keys_keep_the_usual_column(capsys):
    print_fields({"name": "imports", "state": "pending"})
    assert capsys.readouterr().out.splitlines() == [
        "name".ljust(18) + " imports",
        "state".ljust(18) + " pending",
    ]


def test_a_table_cuts_long_cells_but_the_last_columns(capsys):
    reason = "waits: " + "x" * 80
    table([{"id": "a" * 70, "reason": reason}], ["id", "reason"])
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "REASON"]
    assert row.startswith("a" * 57 + "...")
    assert row.endswith(reason)
