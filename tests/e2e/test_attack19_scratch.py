"""Attack 19 on the sandbox's scratch directories (issue 19, item 1), on a real worker whose
``TMPDIR`` is not ``/tmp`` (``/var/tmp/...``, a home: where its scratch directories are
made). Tenant A's command writes what it built from its secret into its scratch directory;
tenant B's sandboxed command, the same user (nobody), looks beside its own scratch
directory for A's. The secure outcome: B sees no other scratch directory (under
``--isolation rlimits``, the control, it reads A's file)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile

import pytest

from pgsched.stores import executions, tasks

from ..factories import make_task
from .test_sandbox import PY, _argv_task, _history, _logged, _worker

pytestmark = pytest.mark.e2e

PEEK = r"""
import glob, json, os
mine = os.getcwd()
found = {}
for path in glob.glob(os.path.join(os.path.dirname(mine), "*", "built.conf")):
    try:
        with open(path) as f:
            found[path] = f.read().strip()
    except OSError as exc:
        found[path] = str(exc)
print(json.dumps({"mine": mine, "found": found}))
"""


@pytest.mark.parametrize("level", ["sandbox", "rlimits"])
def test_attack19_a_sandboxed_command_sees_no_other_scratch_directory(db, sql, start, level):
    root = tempfile.mkdtemp(prefix="pgsched-tmpdir-", dir="/var/tmp")
    os.chmod(root, 0o1777)  # as a TMPDIR is: anyone may list it
    marker = secrets.token_hex(12)
    try:
        make_task(
            db, "builder", tenant="a", env={"PASSWORD": marker},
            command='echo "password=$PASSWORD" > built.conf; echo up; sleep 30',
        )  # fmt: skip
        _argv_task(db, "peek", [PY, "-I", "-c", PEEK], tenant="b")
        _worker(start, level, "--concurrency", "2", env={"TMPDIR": root})
        holder = tasks.trigger(db, "builder", tenant="a")
        _logged(sql, holder, "up")
        row = _history(sql, tasks.trigger(db, "peek", tenant="b"))
        assert row["state"] == "succeeded", row
        result = row["result"]
        assert result["mine"].startswith(root + "/"), result
        seen = json.dumps(result["found"])
        if level == "sandbox":
            assert result["found"] == {} and marker not in seen, result
        else:  # the control: the same user without namespaces reads it
            assert marker in seen, result
        executions.cancel(db, holder, "a")
    finally:
        shutil.rmtree(root, ignore_errors=True)
