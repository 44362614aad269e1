"""The CLI's lazy command table (root._Group.LAZY) names every command each module registers."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pgsched.cli
from pgsched.cli.root import _Group, main


def test_every_registered_command_is_in_the_lazy_table_with_its_module():
    for info in pkgutil.iter_modules(pgsched.cli.__path__):
        importlib.import_module(f"pgsched.cli.{info.name}")
    registered = {name: cmd.callback.__module__.rsplit(".", 1)[1] for name, cmd in main.commands.items()}
    assert registered == _Group.LAZY


def test_a_worker_start_does_not_import_the_dag_crontab_or_web_code():
    code = ("import sys; from pgsched.cli.root import main; main.get_command(None, 'worker'); "
            "print(sorted(m for m in sys.modules if m.startswith(('pgsched.cli.', 'pgsched.dag', 'yaml', "
            "'pgsched.web', 'pgsched.crontab'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["pgsched.cli.output", "pgsched.cli.processes", "pgsched.cli.root"]
