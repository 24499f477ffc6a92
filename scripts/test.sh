#!/usr/bin/env bash
# Runs Hark's whole test suite: installs what the tests need, then every
# crate's unit, integration and doc tests (real mpirun jobs included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# Open MPI refuses root without these; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The house rules, checked where every change passes: formatted, no clippy
# warning, rustdoc clean.
cargo fmt --all -- --check
# OTF2 traces, and the hooks only Hark's own tests use (a skewed clock,
# emulated nodes, a lowered matching bound), which release builds lack.
features=hark-cli/otf2,hark-cli/test-hooks,hark-probe/test-hooks
cargo clippy --workspace --all-targets --features "$features" -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet --features "$features"
# The probe and the example plugin are cdylibs that tests load; build them first.
cargo build --workspace --all-targets --features "$features"
# Every command an end-to-end test runs is bounded (HARK_TEST_LIMIT seconds,
# 300 unless set): a hang fails its test with a snapshot of its processes
# instead of stalling the suite. Passing tests remove their scratch
# directories; failing ones keep them (/tmp/hark-e2e-*).
# The output is long and CI may show only its end: a failing run ends by
# printing each failing test's output again, its last lines (where the
# panic is), so that the reason is in the end that is shown.
log=$(mktemp -t hark-test-XXXXXX.log)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --no-fail-fast --features "$features" -- --test-threads=2 2>&1 |
    tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
    echo
    echo "=== scripts/test.sh: the failing tests' output again (last 40 lines each) ==="
    awk '
        /^---- .* stdout ----$/ { flush(); name = $2; n = 0; next }
        /^failures:$/ || /^test result:/ { flush(); next }
        name != "" { line[n++] = $0 }
        function flush(  i) {
            if (name == "") return
            print "--- " name " (" n " lines) ---"
            for (i = (n > 40 ? n - 40 : 0); i < n; i++) print line[i]
            name = ""
        }
        END { flush() }
    ' "$log"
    grep -E "^error: [0-9]+ targets? failed|^    \`-p " "$log" || true
fi
exit "$status"
