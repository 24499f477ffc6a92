#!/usr/bin/env bash
# What the probe's start costs a process: the CPU time its main thread has
# used when the program's own first constructor runs (the loader, the
# libraries' constructors and, under Hark, the probe's start), read with
# CLOCK_THREAD_CPUTIME_ID. Run RUNS times each: without Hark, under
# `hark run --counters none` and under `hark run` with the default
# counters (BENCHMARKS.md, "Opening the counters"). Prints the median and
# the range of each, in ms.
#
#   scripts/bench-probe-start.sh [RUNS]      (default 21)
#
# Needs a built `hark` and `libhark.so` (`cargo build --release -p hark-cli
# -p hark-probe`; HARK=path/to/hark to choose one, with `libhark.so`
# beside it) and a C compiler.
set -euo pipefail
runs=${1:-21}
root=$(cd "$(dirname "$0")/.." && pwd)
hark=$(realpath "${HARK:-$root/target/release/hark}")
[ -x "$hark" ] || { echo "bench-probe-start.sh: no hark at $hark: build it (cargo build --release -p hark-cli -p hark-probe) or set HARK" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/start.c" <<'C'
#include <stdio.h>
#include <time.h>
static long long at_start;
__attribute__((constructor)) static void started(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    at_start = ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
int main(void) {
    printf("start_ns %lld\n", at_start);
    return 0;
}
C
cc -O2 -o "$work/start" "$work/start.c"

# One run's start CPU time, in ns: the program's line, wherever it went.
one() {
    "$@" 2>/dev/null | awk '/^start_ns/ {print $2}'
}

row() {
    local name=$1
    shift
    local values=()
    for _ in $(seq "$runs"); do
        values+=("$(one "$@")")
    done
    printf '%s\n' "${values[@]}" | python3 -c '
import statistics, sys
name = sys.argv[1]
v = sorted(int(x) / 1e6 for x in sys.stdin.read().split())
print(f"{name:<34} median {statistics.median(v):6.2f} ms   range {v[0]:.2f}-{v[-1]:.2f} ms   ({len(v)} runs)")
' "$name"
}

cd "$work"
row "without Hark" ./start
row "hark run --counters none" "$hark" run -o "$work/run" --counters none -- ./start
row "hark run (default counters)" "$hark" run -o "$work/run" -- ./start
