#!/usr/bin/env bash
# Install what the tests need (a virtualenv with the test extras, Debian's chromium for the
# browser tests, Debian's haproxy and pgbouncer, the pinned npm MCP clients) and run every
# test. The tests start their own embedded Postgres unless DATABASE_URL is set. Extra arguments go to pytest; the suite runs in two processes
# (pytest-xdist), each with its own template database on the one server; -n 0 runs it in one.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# As scripts/run.sh: pip runs only when pyproject.toml changed since the last install here
# (a clean checkout, as in CI, always installs).
STAMP=.venv/.switchboard-test-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  echo "$want" > "$STAMP"
fi
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq >/dev/null && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
# Debian's haproxy and pgbouncer, which the real-parts tests run (tests/realparts.py): installed
# with apt-get as root or through password-less sudo; where neither works, those tests skip
# with one line naming the package.
missing=()
for program in haproxy pgbouncer; do
  command -v "$program" >/dev/null 2>&1 || [ -x "/usr/sbin/$program" ] || missing+=("$program")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    as_root=()
  elif sudo -n true 2>/dev/null; then
    as_root=(sudo)
  else
    as_root=(none)
  fi
  if [ "${as_root[*]}" != none ]; then
    "${as_root[@]}" apt-get update -qq >/dev/null
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "scripts/test.sh: cannot apt-get install ${missing[*]} here; the tests that need them skip" >&2
  fi
fi
# The third-party MCP clients the compatibility tests drive (the TypeScript SDK, the MCP
# Inspector), from the npm registry at the versions tests/clients/package-lock.json pins.
if ! command -v npm >/dev/null 2>&1; then
  echo "scripts/test.sh: node and npm are needed for the MCP client compatibility tests" >&2
  exit 1
fi
if ! cmp -s tests/clients/package-lock.json tests/clients/node_modules/.installed-package-lock.json; then
  # npm ci refuses this lock (a Windows-only optional dependency of the Inspector is absent
  # from it); npm install with --no-save installs exactly the locked versions.
  npm install --prefix tests/clients --no-save --no-audit --no-fund --loglevel=error >/dev/null
  cp tests/clients/package-lock.json tests/clients/node_modules/.installed-package-lock.json
fi
# A temporary directory of this run's own: pytest's shared numbered ones are pruned by
# whichever run starts next on the machine, even under a running fault test's database.
exec .venv/bin/python -m pytest -n 2 --basetemp="$(mktemp -d -t switchboard-tests.XXXXXX)" "$@"
