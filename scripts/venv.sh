#!/usr/bin/env bash
# Creates .venv/ in the checkout with the Python readers the export tests
# use: Hatchet, Thicket and pyarrow from PyPI (about a minute on 2 cores).
# Idempotent: does nothing when they already import. The tests look for
# .venv/bin/python (or $HARK_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
if [ -x "$py" ] && "$py" -c "import hatchet, thicket, pyarrow" >/dev/null 2>&1; then
    exit 0
fi
echo "venv.sh: installing llnl-hatchet, llnl-thicket and pyarrow into .venv/" >&2
python3 -m venv .venv
"$py" -m pip install -q --disable-pip-version-check \
    llnl-hatchet==2026.2.0 llnl-thicket==2026.1.1 pyarrow==26.0.1
