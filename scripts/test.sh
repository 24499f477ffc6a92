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
cargo test --workspace --no-fail-fast --features "$features" -- --test-threads=2
