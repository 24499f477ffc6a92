#!/usr/bin/env bash
# Installs the Debian packages Hark builds, tests and demonstrates against.
# Idempotent: does nothing when everything is already there.
set -euo pipefail

packages=(
    build-essential          # cc for the test programs
    openmpi-bin libopenmpi-dev
    mpich libmpich-dev
    gfortran
    clang libomp-dev         # LLVM's OpenMP runtime (OMPT) for the OpenMP tests
    graphviz                 # dot, for the topology graph in report.html
    lammps lammps-examples   # a real MPI application and its inputs
    hpcc                     # the HPC Challenge benchmark, another real one
    libopenblas0-openmp      # OpenBLAS's OpenMP build, for hpcc as a hybrid code (not the system BLAS, below)
    nwchem-openmpi           # NWChem: Global Arrays over MPI one-sided calls
    scalapack-mpi-test       # ScaLAPACK's test programs, built for MPICH too
    quantum-espresso quantum-espresso-data   # pw.x (Fortran through mpif.h) and its pseudopotentials
    python3-mpi4py
    chromium                 # headless, to check report.html renders
    libopen-trace-format2-dev otf2-tools python3-otf2   # OTF2 traces: write, print, read
    python3-venv             # .venv/ for the Python readers (scripts/venv.sh)
    tmux                     # a terminal for testing `hark top`
    strace                   # which thread of a probed process opens files
    procps                   # pgrep: tests find a launcher or a node's forwarder by it
    gdb                      # the stacks of a hung test's ranks, in its failure
    iproute2 util-linux      # ip netns, unshare, nsenter: emulated nodes (scripts/cluster.sh)
    slurm-wlm munge          # slurmctld, slurmd, srun and munged on emulated nodes
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    "$(dirname "$0")/venv.sh"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
fi
echo "deps.sh: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# OpenBLAS's OpenMP build makes itself the system BLAS and LAPACK: every
# program linked to them would then start OpenMP threads. It is for one
# test, which names it with LD_LIBRARY_PATH: the system keeps another.
for name in libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu; do
    now=$(update-alternatives --query "$name" 2>/dev/null | awk '/^Value:/ {print $2}')
    case "$now" in
    *openblas-openmp*)
        other=$(update-alternatives --list "$name" | grep -v openblas-openmp | head -1 || true)
        [ -n "$other" ] && $sudo update-alternatives --quiet --set "$name" "$other"
        ;;
    esac
done
"$(dirname "$0")/venv.sh"
