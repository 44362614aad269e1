"""Where a process's login comes from (pgsched.login), and a process's own /proc entries
once it has concealed it (pgsched.secrecy), without a database: the child processes here
only call ``conceal()`` and wait, and this test reads their /proc entries as a task would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict

from pgsched.cli import main
from pgsched.errors import ConfigError
from pgsched.login import choose, libpq_credentials, read_dsn_file, with_credentials


def test_the_command_line_wins_over_the_environment_and_one_level_gives_one():
    assert choose("a", None, False, False) == ("dsn", "a")
    assert choose(None, "/f", False, True) == ("dsn_file", "/f")
    assert choose("a", "/f", True, False) == ("dsn", "a")
    assert choose("a", "/f", False, True) == ("dsn_file", "/f")
    assert choose("", "", False, False) is None  # PGSCHED_DSN= (empty) means unset
    assert choose("", "/f", False, False) == ("dsn_file", "/f")
    with pytest.raises(ConfigError, match="--dsn and --dsn-file are both given"):
        choose("a", "/f", True, True)
    with pytest.raises(ConfigError, match="PGSCHED_DSN and PGSCHED_DSN_FILE are both given"):
        choose("a", "/f", False, False)


def test_a_dsn_file_is_read_whole_and_its_problems_name_it(tmp_path):
    path = tmp_path / "dsn"
    path.write_text("  host=db password=secret \n")
    assert read_dsn_file(str(path)) == "host=db password=secret"
    path.write_text("\n")
    with pytest.raises(ConfigError, match=rf"dsn_file: '{path}' is empty"):
        read_dsn_file(str(path))
    with pytest.raises(ConfigError, match=r"dsn_file: '/nonexistent/dsn' cannot be read: No such"):
        read_dsn_file("/nonexistent/dsn")
    path.write_bytes(b"x" * (64 * 1024 + 1))
    with pytest.raises(ConfigError, match="holds more than 65536 bytes"):
        read_dsn_file(str(path))


def test_a_dsn_read_from_standard_input_leaves_it_pointing_at_dev_null(tmp_path):
    path = tmp_path / "dsn"
    path.write_text("host=db password=secret\n")
    code = (
        "import os; from pgsched.login import read_dsn_file; "
        "print(read_dsn_file('-')); print(os.readlink('/proc/self/fd/0'))"
    )
    with open(path, "rb") as stdin:
        out = subprocess.run(
            [sys.executable, "-c", code], stdin=stdin, capture_output=True, text=True, check=True
        ).stdout
    assert out.splitlines() == ["host=db password=secret", "/dev/null"]


def test_a_dsn_file_other_users_may_read_is_warned_about(tmp_path, caplog):
    path = tmp_path / "dsn"
    path.write_text("host=db")
    path.chmod(0o600)
    read_dsn_file(str(path))
    assert caplog.messages == []
    path.chmod(0o644)
    read_dsn_file(str(path))
    assert caplog.messages == [
        f"dsn_file {path} may be read by other users (mode 0644): chmod 600 it"
    ]


def test_libpq_credentials_go_into_the_dsn_where_it_lacks_them():
    environ = {"PGPASSWORD": "pw", "PGPASSFILE": "/p", "PGHOST": "db", "PGSYSCONFDIR": "/etc"}
    taken = libpq_credentials(environ)
    assert taken == {"password": "pw", "passfile": "/p"}  # PGHOST names no secret
    folded = conninfo_to_dict(with_credentials("host=h password=own", taken))
    assert folded == {"host": "h", "password": "own", "passfile": "/p"}  # the DSN's own wins
    assert with_credentials("postgresql://u@h/d", {}) == "postgresql://u@h/d"
    with pytest.raises(ConfigError, match="not a connection string") as raised:
        with_credentials("password=secret nonsense", taken)
    assert "secret" not in str(raised.value)


def test_the_cli_names_a_dsn_file_it_cannot_read_in_one_line():
    result = CliRunner().invoke(main, ["--dsn-file", "/nonexistent/dsn", "task", "list"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: dsn_file: '/nonexistent/dsn' cannot be read: No such file or directory"
    ]
    result = CliRunner().invoke(main, ["--dsn", "x", "--dsn-file", "/f", "task", "list"])
    assert result.exit_code == 1
    assert "--dsn and --dsn-file are both given" in result.output


CONCEALING = textwrap.dedent("""
    import json, os, subprocess, sys
    from pgsched.secrecy import conceal
    done = conceal()
    child = subprocess.run(["env"], capture_output=True, text=True).stdout
    print(json.dumps({"wiped": sorted(done.variables), "arguments": done.arguments,
                      "undumpable": done.undumpable, "argv": sys.argv[1:],
                      "child_env": child, "live": os.environ.get("PGSYSCONFDIR")}), flush=True)
    sys.stdin.read()
""")


def test_a_concealed_process_shows_its_login_nowhere_in_proc():
    marker = "mark" + os.urandom(8).hex()
    env = {
        **os.environ,
        "PGSCHED_DSN": f"host=h password={marker}",
        "PGPASSWORD": marker,
        "PGSYSCONFDIR": f"/etc/{marker}",
        "KEPT": "visible",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", CONCEALING, "--dsn", f"password={marker}", f"--dsn={marker}", "x"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        report = json.loads(proc.stdout.readline())
        with open(f"/proc/{proc.pid}/environ", "rb") as f:
            environ = f.read()
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            cmdline = f.read()
    finally:
        proc.communicate("")
    assert marker.encode() not in environ
    assert marker.encode() not in cmdline
    assert b"\0KEPT=visible\0" in environ  # nothing else was touched
    assert cmdline.split(b"\0")[-2:] == [b"x", b""]
    assert report["wiped"] == ["PGPASSWORD", "PGSCHED_DSN", "PGSYSCONFDIR"]
    assert "PGPASSWORD" not in report["child_env"]  # its keyword is libpq's: it left
    assert report["arguments"] == 2
    assert report["argv"] == ["--dsn", "<hidden>", "--dsn=<hidden>", "x"]
    assert report["undumpable"] is True
    # libpq reads PGSYSCONFDIR again at each connection: it stays in the live environment
    # (a copy) and leaves /proc; pgsched's own variables leave both
    assert report["live"] == f"/etc/{marker}"
    assert "PGSCHED_DSN" not in report["child_env"]
