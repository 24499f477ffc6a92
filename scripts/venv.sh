#!/usr/bin/env bash
# Makes .venv/ in the checkout with the Python readers the export and trace
# tests use: Hatchet, Thicket, pyarrow and Perfetto's `perfetto` package
# from PyPI, on Debian's python3 with its site packages visible so that
# python3-otf2 (OTF2's own reader) imports too. About a minute on 2 cores.
# Idempotent: does nothing when everything already imports. The tests look
# for .venv/bin/python (or $HARK_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
if [ -x "$py" ] && "$py" -c "import hatchet, thicket, pyarrow, otf2, perfetto" >/dev/null 2>&1; then
    exit 0
fi
echo "venv.sh: installing llnl-hatchet, llnl-thicket, pyarrow and perfetto into .venv/" >&2
/usr/bin/python3 -m venv --system-site-packages .venv
"$py" -m pip install -q --disable-pip-version-check \
    llnl-hatchet==2026.2.0 llnl-thicket==2026.1.1 pyarrow==26.0.1 perfetto==0.59.1
"$py" -c "import hatchet, thicket, pyarrow, otf2, perfetto"
