#!/usr/bin/env bash
# Install Switchboard into a virtualenv and run it. With no arguments: `switchboard demo`
# (embedded Postgres, a demo user and endpoint, simulated agents, the Board live).
# Any arguments are passed to the switchboard command instead, e.g. `scripts/run.sh serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# pip runs only when pyproject.toml changed since the last install here (or none finished):
# the stamp holds the hash of the pyproject.toml installed, written after pip succeeds.
STAMP=.venv/.switchboard-run-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/switchboard ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
  echo "$want" > "$STAMP"
fi
if [ $# -eq 0 ]; then
  set -- demo
fi
exec .venv/bin/switchboard "$@"
