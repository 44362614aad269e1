"""The CLI's lazy command table (root._Group.LAZY) names every command each module registers,
and a command loaded alone has every subcommand it has with all modules loaded."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import click

import pgsched.cli
from pgsched.cli.root import _Group, main


def test_every_registered_command_is_in_the_lazy_table_with_its_module():
    for info in pkgutil.iter_modules(pgsched.cli.__path__):
        importlib.import_module(f"pgsched.cli.{info.name}")
    registered = {
        name: cmd.callback.__module__.rsplit(".", 1)[1] for name, cmd in main.commands.items()
    }
    assert registered == {name: modules[0] for name, modules in _Group.LAZY.items()}


# Prints the command paths under one top-level command, as a fresh `pgsched <command>` sees them.
_TREE = """
import sys, click
from pgsched.cli.root import main

def walk(group, path):
    ctx = click.Context(group, info_name=path[-1])
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        print(" ".join(path + [name]))
        if isinstance(cmd, click.Group):
            walk(cmd, path + [name])

top = main.get_command(click.Context(main), sys.argv[1])
print(sys.argv[1])
if isinstance(top, click.Group):
    walk(top, [sys.argv[1]])
"""


def test_each_command_loaded_alone_has_all_its_subcommands():
    # `execution cancel` (dlq.py) and `task next` (schedules.py) are added to groups that
    # other modules define: loading only the group's module lost them ("No such command")
    for info in pkgutil.iter_modules(pgsched.cli.__path__):
        importlib.import_module(f"pgsched.cli.{info.name}")
    for name in sorted(_Group.LAZY):
        alone = subprocess.run(
            [sys.executable, "-c", _TREE, name], capture_output=True, text=True, check=True
        ).stdout.split("\n")
        everything = [" ".join(p) for p in _paths(main.commands[name], [name])]
        assert [line for line in alone if line] == everything, name


def _paths(cmd, path):
    yield path
    if isinstance(cmd, click.Group):
        for sub in sorted(cmd.commands):
            yield from _paths(cmd.commands[sub], path + [sub])


def test_a_worker_start_does_not_import_the_dag_crontab_or_web_code():
    code = (
        "import sys; from pgsched.cli.root import main; main.get_command(None, 'worker'); "
        "print(sorted(m for m in sys.modules if m.startswith(('pgsched.cli.', 'pgsched.dag', 'yaml', "
        "'pgsched.web', 'pgsched.crontab'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    # its isolation options are a module of their own (pgsched.cli.isolation_options)
    assert eval(out) == [
        "pgsched.cli.isolation_options",
        "pgsched.cli.processes",
        "pgsched.cli.root",
    ]
