#!/usr/bin/env bash
# Makes the Python environment the trace tests read traces with: .venv/,
# built on Debian's python3 so that it sees python3-otf2 (OTF2's own
# reader), with Perfetto's `perfetto` package from PyPI (its protobuf
# schema, and trace_processor where its binary can be downloaded).
# Idempotent: does nothing when the environment already has them.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
venv="$top/.venv"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import otf2, perfetto" 2>/dev/null; then
    exit 0
fi
echo "pyenv.sh: making $venv" >&2
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "perfetto==0.59.1"
"$venv/bin/python" -c "import otf2, perfetto"
