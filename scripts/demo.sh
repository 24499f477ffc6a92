#!/usr/bin/env bash
# Installs what Hark needs, builds it, and measures a real MPI application:
# LAMMPS's Lennard-Jones melt on 4 ranks, with its report left in ./hark-lmp-*/.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
"$top/scripts/deps.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release --manifest-path "$top/Cargo.toml" -p hark-cli -p hark-probe --features hark-cli/otf2
work="$(mktemp -d)"
cp /usr/share/lammps/examples/melt/in.melt "$work/"
cd "$work"
"$top/target/release/hark" run --trace --out-dir "$top" -- \
    mpirun --oversubscribe -np 4 lmp -in in.melt
