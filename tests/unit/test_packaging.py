"""The wheel carries sql/, migrations/, templates/ and examples/, and an installed copy
finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from ..helpers import REPO


def test_wheel_ships_sql_migrations_templates_and_examples(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("pgsched-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("sql", "migrations", "examples"):
        shipped = {p.name for p in (REPO / folder).iterdir() if p.is_file()}
        assert shipped, folder
        assert {f"pgsched/_resources/{folder}/{n}" for n in shipped} <= names, folder
    assert any(n.startswith("pgsched/_resources/templates/") for n in names)
    assert "pgsched/cli/__init__.py" in names and "pgsched/worker/process.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "pgsched = pgsched.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()

    # Installed from the wheel (no source tree on the path), it finds its own copies.
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "import pgsched.resources as r, pgsched.migrate as m, pgsched.queries as q;"
        "print(r.resource_dir('sql')); print(len(m.load())); print(len(q.registry()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target)},
    ).stdout.split()
    assert out[0].startswith(str(target)) and int(out[1]) >= 1 and int(out[2]) > 10
