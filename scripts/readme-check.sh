#!/usr/bin/env bash
# A newcomer's pass over README.md: clones the committed tree afresh, builds
# it with the README's own build line, and runs every command of the
# README's code blocks as written, in a directory of its own, with the
# built `hark` on PATH. Fails on a command that fails, and on a command the
# README gained that this script does not know yet (so that a new command
# is run, or its reason not to be run is written down here).
#
# Only what a reader cannot copy as it is gets replaced: the run directory
# names and the live-view address of the README's examples by the ones this
# pass made, `./app`/`./ocean`/`./atmos` (your program) by Hark's test ring
# (crates/cli/tests/programs/ring.c), and /tmp and /var/lib paths by paths
# under the scratch directory. Commands that cannot run here are listed
# with why, at the end and in SKIPPED below.
#
#   scripts/readme-check.sh            # as the README says: a release build (long on 2 cores)
#   HARK_README_PROFILE=debug scripts/readme-check.sh   # a debug build (what the test runs)
#
# HARK_README_SCRATCH: where the clone and the runs go (default target/readme-check,
# removed first); HARK_README_TARGET: a cargo target directory to build into (default the
# clone's own); HARK_README_SEED: a target directory whose third-party builds are copied in
# first, so that only Hark's own crates are compiled (the test passes the checkout's). Never
# build into a target directory other tests use: this build, without the tests' features,
# would replace their `hark` and `libhark.so`.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${HARK_README_SCRATCH:-$repo/target/readme-check}"
profile="${HARK_README_PROFILE:-release}"
case "$profile" in release | debug) ;; *)
    echo "readme-check: HARK_README_PROFILE must be release or debug, not $profile" >&2
    exit 2
    ;;
esac
rm -rf "$scratch"
mkdir -p "$scratch/work" "$scratch/out"
scratch="$(cd "$scratch" && pwd)"

say() { echo "readme-check: $*" >&2; }

# A fresh clone of what is committed: what a newcomer gets.
git clone -q --no-checkout "$repo" "$scratch/clone"
git -C "$scratch/clone" checkout -q "$(git -C "$repo" rev-parse HEAD)"
clone="$scratch/clone"
target="${HARK_README_TARGET:-$clone/target}"

# The README's commands, one a line: `$ ` lines of console blocks and every
# line of sh blocks, continuation lines joined, trailing comments cut.
extract() {
    awk '
        /^```/ { if (inblock) { inblock = 0 } else { inblock = 1; kind = substr($0, 4) } next }
        !inblock || (kind != "sh" && kind != "console") { next }
        kind == "console" && !cont && !/^\$ / { next }
        {
            line = $0
            if (!cont && kind == "console") line = substr(line, 3)
            sub(/[ \t]+# .*$/, "", line)
            if (line ~ /\\$/) { sub(/[ \t]*\\$/, " ", line); acc = acc line; cont = 1; next }
            acc = acc line; cont = 0
            gsub(/[ \t]+/, " ", acc); sub(/^ /, "", acc); sub(/ $/, "", acc)
            if (acc != "") print acc
            acc = ""
        }
    ' "$clone/README.md"
}

# Why a command is not run here, by the start of the command.
SKIPPED=(
    "scripts/demo.sh|installs Debian packages as root and builds in release mode: the build line below is the same build, and its LAMMPS run is the next command"
    "scripts/test.sh|it runs this check: the whole suite is what CI runs (.ci/run), about half an hour on 2 cores"
    "hark top |a full-screen terminal program: needs a terminal (tested in tmux by hark_top_shows_a_live_job_in_a_terminal)"
    "hark run -- ./serial_tool|./serial_tool stands for your own program"
    "hark run --trace=ranks=0-3,window=10-12 -- mpirun -np 64|64 ranks on this machine's cores are out of reach (the SPEC is tested by trace_auto_keeps_the_windows_that_waited_most_within_its_cap and the trace tests)"
    "hark run --trace=auto --trace-cap 4G -- mpirun -np 64|64 ranks (tested on 4 by trace_auto_keeps_the_windows_that_waited_most_within_its_cap)"
    "hark ctl --server unix:/tmp/hark/hark.sock 3 |needs job 3 running at that moment (tested by dump_now_reports_a_job_stuck_in_mpi_recv_and_its_killed_run_is_partial, pause_and_resume_reach_every_rank_of_a_served_job)"
    "hark ctl --server unix:/tmp/hark/hark.sock sample|needs job 3 running at that moment (tested by sampling_one_rank_in_two_keeps_every_rank_s_counts_exact)"
    "hark serve --listen tls:|needs a certificate, a key and a token file of a site (tested by two_users_stream_over_tls_and_each_sees_only_their_own_job)"
    "HARK_TLS_CA=|needs a site's TLS service, CA and token (tested by two_users_stream_over_tls_and_each_sees_only_their_own_job)"
    "hark run --analysers 2 -- mpirun -np 64|64 ranks and 2 analysers (tested on 4 by analysers_merge_by_tree_or_by_gather_into_the_same_profile)"
    "hark run --analysers 1 -- mpiexec.mpich -n 8 ./app : -n 4 ./other|./other stands for a second program of yours, and 13 processes are out of reach here (MPMD under analysers is tested by no_virtualise_keeps_one_world_for_mpmd_programs_with_analysers)"
    "hark scaling run-np1 run-np2 run-np4|run-np1, run-np2 and run-np4 stand for three runs of your program at 1, 2 and 4 ranks (tested on runs at 1 and 2 ranks by hark_scaling_prints_the_pop_table_of_a_series)"
    "hark run --analysers 2 -- srun|needs a Slurm cluster (tested on emulated nodes by emulated_nodes_run_mpi_under_every_launcher)"
)

skip_reason() {
    local cmd="$1" entry
    for entry in "${SKIPPED[@]}"; do
        if [[ "$cmd" == "${entry%%|*}"* ]]; then
            echo "${entry#*|}"
            return 0
        fi
    done
    return 1
}

export PATH="$target/$profile:$PATH"
export HARK_INDEX="$scratch/runs.sqlite"
# What the README's note after the first example says a 2-core machine
# (--oversubscribe, here through Open MPI's environment) and root need.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HYDRA_LAUNCHER=fork

# The build line, from the README's prose, as written.
build="$(grep -o 'cargo build --release -p hark-cli -p hark-probe' "$clone/README.md" | head -1)"
[ -n "$build" ] || { say "the README no longer says how to build: update this script"; exit 1; }
[ "$profile" = debug ] && build="${build/ --release/}"
say "build: $build"
if [ -n "${HARK_README_SEED:-}" ] && [ -d "$HARK_README_SEED/$profile/deps" ]; then
    mkdir -p "$target/$profile/deps"
    find "$HARK_README_SEED/$profile/deps" -maxdepth 1 -type f ! -name '*hark*' \
        -exec cp --reflink=auto -t "$target/$profile/deps" {} +
    for d in build .fingerprint; do
        [ -d "$HARK_README_SEED/$profile/$d" ] && cp -r --reflink=auto "$HARK_README_SEED/$profile/$d" "$target/$profile/"
    done
fi
(cd "$clone" && CARGO_TARGET_DIR="$target" $build)
command -v hark >/dev/null || { say "no hark in $target/$profile after the build"; exit 1; }
[ -e "$target/$profile/libhark.so" ] || { say "no libhark.so next to hark"; exit 1; }

cd "$scratch/work"
mpicc.openmpi -O1 -o app "$clone/crates/cli/tests/programs/ring.c"
cp app ocean
cp app atmos
# MPICH's mpiexec needs the ring built for MPICH.
mkdir -p mpich
mpicc.mpich -O1 -o mpich/app "$clone/crates/cli/tests/programs/ring.c"

ran=() skipped=() failed=()
lmp_run="" app_run="" url="" open_pid="" serve_pid=""
cleanup() {
    for pid in $open_pid $serve_pid; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# The newest run directory named `hark-NAME-*` here.
newest() { ls -dt hark-"$1"-* 2>/dev/null | head -1; }

# Serves the LAMMPS run with `hark open`, for the commands that want a live
# view's address.
serve_lmp() {
    [ -n "$url" ] && return 0
    hark open --http 127.0.0.1:0 "$lmp_run" </dev/null >"$scratch/open.out" 2>"$scratch/open.err" &
    open_pid=$!
    for _ in $(seq 100); do
        url="$(grep -o 'http://[^ ]*' "$scratch/open.err" | head -1 || true)"
        [ -n "$url" ] && return 0
        sleep 0.1
    done
    say "hark open printed no address: $(cat "$scratch/open.err")"
    return 1
}

# The command as it runs here: the README's example names replaced.
concrete() {
    local c="$1"
    c="${c//hark-lmp-20261122-074031/$lmp_run}"
    c="${c//hark-app-20260101-120000/$app_run}"
    c="${c//run-before run-after/$lmp_run $app_run}"
    c="${c//a1 a2 a3 -- b1 b2 b3/$lmp_run $lmp_run $lmp_run -- $app_run $app_run $app_run}"
    [[ "$c" == *mpiexec.mpich* ]] && c="${c//.\/app/mpich/app}"
    c="${c//http:\/\/127.0.0.1:40123\/3f9c…\//$url}"
    c="${c//\/tmp\/hark/$scratch/hark}"
    c="${c//\/var\/lib\/hark\/runs/$scratch/served}"
    c="${c// -o \/tmp/ -o $scratch/out}"
    c="${c//--http 127.0.0.1:8080/--http 127.0.0.1:0}"
    echo "$c"
}

while IFS= read -r cmd; do
    if reason="$(skip_reason "$cmd")"; then
        skipped+=("$cmd — $reason")
        continue
    fi
    case "$cmd" in
        "cp "* | "hark run"* | "hark report"* | "hark export"* | "hark runs"* | "hark diff"* | "hark query"* | "hark open"* | "hark serve"* | "hark ctl"*) ;;
        *)
            failed+=("$cmd — a README command this script does not know: run it here or say why not in SKIPPED")
            continue
            ;;
    esac
    [[ "$cmd" == *"127.0.0.1:40123"* ]] && serve_lmp
    real="$(concrete "$cmd")"
    say "\$ $real"
    status=0
    case "$cmd" in
        "hark open "*)
            # A server: it must print its address, then it is stopped.
            # `exec`, so that the pid is hark's own and the kill below reaches it.
            eval "exec $real" </dev/null >"$scratch/open2.out" 2>"$scratch/open2.err" &
            pid=$!
            for _ in $(seq 100); do grep -q 'http://' "$scratch/open2.err" && break; sleep 0.1; done
            grep -q 'http://' "$scratch/open2.err" || status=1
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            ;;
        "hark serve "*)
            mkdir -p "$scratch/hark"
            real="${real% &}"
            eval "exec $real" </dev/null >"$scratch/serve.out" 2>"$scratch/serve.err" &
            serve_pid=$!
            for _ in $(seq 100); do [ -S "$scratch/hark/hark.sock" ] && break; sleep 0.1; done
            [ -S "$scratch/hark/hark.sock" ] || status=1
            ;;
        *)
            # Not from the loop's input, which holds the next commands.
            (eval "$real") </dev/null >"$scratch/out/last.out" 2>"$scratch/out/last.err" || status=$?
            ;;
    esac
    if [ "$status" -ne 0 ]; then
        failed+=("$real — status $status: $(tail -3 "$scratch/out/last.err" 2>/dev/null | tr '\n' ' ')")
    else
        ran+=("$real")
    fi
    case "$cmd" in
        *"lmp -in in.melt") [ -z "$lmp_run" ] && lmp_run="$(newest lmp)" ;;
        "hark run --trace=region=solve"*) app_run="$(newest app)" ;;
        "hark run -- mpiexec.mpich -n 4 ./app") app_run="$(newest app)" ;;
    esac
done < <(extract)

echo
echo "readme-check: ran ${#ran[@]} commands of README.md:"
printf '  ok    %s\n' "${ran[@]}"
echo "readme-check: did not run ${#skipped[@]}, and why:"
printf '  skip  %s\n' "${skipped[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "readme-check: ${#failed[@]} failed:"
    printf '  FAIL  %s\n' "${failed[@]}"
    exit 1
fi
echo "readme-check: every command that can run here ran as written."
