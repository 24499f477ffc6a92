/* Wait states of known length, one phase per pattern of Scalasca's catalogue.
 *
 * usage: waits [reps=N] [stamps=PREFIX] [PATTERN=MS ...]
 *
 * PATTERN is late_sender, late_sender_wrong_order, late_receiver, wait_nxn,
 * wait_barrier, late_broadcast or early_reduce; only the patterns named run,
 * in that order, each REPS times (default 4). In every repetition k one side
 * sleeps MS milliseconds (nanosleep: no MPI) before its call while the other
 * side is already in its call, so the other side waits MS:
 *
 * - point-to-point patterns pair rank 2i with 2i+1 (an odd last rank sits
 *   out). The rank of the pair whose rank parity equals k's is the one that
 *   waits; its partner sleeps.
 *   - late_sender: the partner sleeps, then MPI_Send; the waiter receives
 *     with MPI_Recv (k % 4 == 0), MPI_Recv from MPI_ANY_SOURCE (1),
 *     MPI_Irecv + MPI_Wait (2) or MPI_Irecv + MPI_Waitany (3).
 *   - late_sender_wrong_order: the partner sends tag 1 at once, sleeps, then
 *     sends tag 2; the waiter polls MPI_Iprobe until tag 1 is there, then
 *     receives tag 2 (waiting while tag 1, sent earlier, is already waiting)
 *     and then tag 1.
 *   - late_receiver: the waiter sends with MPI_Ssend (k % 4 < 2) or with
 *     MPI_Send of 4 MiB, too large to go eagerly (k % 4 >= 2); the partner
 *     sleeps, then MPI_Recv.
 * - collectives: the late rank (or root) is k % size.
 *   - wait_nxn: the late rank sleeps; every other rank waits. The call is
 *     MPI_Allreduce, MPI_Allgather, MPI_Alltoallv, MPI_Reduce_scatter_block
 *     (k % 4).
 *   - wait_barrier: the late rank sleeps, then MPI_Barrier; the others wait.
 *   - late_broadcast: the root sleeps; every non-root waits. MPI_Bcast,
 *     MPI_Scatter, MPI_Scatterv, MPI_Bcast (k % 4).
 *   - early_reduce: every non-root sleeps; the root waits. MPI_Reduce,
 *     MPI_Gather, MPI_Gatherv, MPI_Reduce (k % 4).
 *
 * Before each repetition the ranks meet without any blocking MPI call (tokens
 * to rank 0 and back over a private duplicate of MPI_COMM_WORLD, completed by
 * polling MPI_Testall), so the meeting is no wait state and the phases do not
 * leak into one another. Nothing else blocks, so every other pattern has no
 * instance at all.
 *
 * A machine with fewer cores than ranks, or a busy one, may wake a sleeper
 * late or switch a rank out just before its call, so the lateness that
 * happens is not exactly MS. With stamps=PREFIX each rank writes to
 * PREFIX.RANK, for each call of a pattern it makes, the line
 * `PATTERN K RANK NS`: CLOCK_MONOTONIC (one clock for all processes of a
 * node) just before the call, so a test can compute the waits that really
 * happened. Hark's probe does not see it. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PATTERNS = 7, BIG = 4 << 20, TAG = 7 };
static const char *NAMES[PATTERNS] = {
    "late_sender",  "late_sender_wrong_order", "late_receiver", "wait_nxn",
    "wait_barrier", "late_broadcast",          "early_reduce",
};

static int rank, size;
static MPI_Comm meet_comm;
static char *big;
static FILE *stamps;
static int pattern_now, k_now;

static void nap(long ns) {
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

static void sleep_ms(int ms) { nap(ms * 1000000L); }

/* Notes the moment just before this rank's call of the current pattern. */
static void stamp(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (stamps)
        fprintf(stamps, "%s %d %d %lld\n", NAMES[pattern_now], k_now, rank,
                t.tv_sec * 1000000000LL + t.tv_nsec);
}

/* Completes requests by polling, never blocking in MPI. */
static void poll_all(int n, MPI_Request *reqs) {
    for (;;) {
        int done = 0;
        MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (done) return;
        nap(50000);
    }
}

/* Brings all ranks to the same moment without a wait state. */
static void meet(void) {
    int token = 0, *tokens = calloc(size, sizeof(int));
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * size);
    if (rank == 0) {
        for (int r = 1; r < size; r++)
            MPI_Irecv(&tokens[r], 1, MPI_INT, r, 0, meet_comm, &reqs[r - 1]);
        poll_all(size - 1, reqs);
        for (int r = 1; r < size; r++)
            MPI_Isend(&token, 1, MPI_INT, r, 0, meet_comm, &reqs[r - 1]);
        poll_all(size - 1, reqs);
    } else {
        MPI_Isend(&token, 1, MPI_INT, 0, 0, meet_comm, &reqs[0]);
        MPI_Irecv(&tokens[0], 1, MPI_INT, 0, 0, meet_comm, &reqs[1]);
        poll_all(2, reqs);
    }
    free(tokens);
    free(reqs);
}

/* One repetition of a point-to-point pattern between this rank and its
 * partner; `waiter` says whether this rank is the side that waits. */
static void p2p(int pattern, int k, int ms, int partner, int waiter) {
    int one = k, two = k;
    MPI_Request req;
    int index;
    switch (pattern) {
    case 0: /* late_sender */
        if (!waiter) {
            sleep_ms(ms);
            stamp();
            MPI_Send(&one, 1, MPI_INT, partner, TAG, MPI_COMM_WORLD);
            break;
        }
        stamp();
        if (k % 4 < 2) {
            MPI_Recv(&one, 1, MPI_INT, k % 4 ? MPI_ANY_SOURCE : partner, TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Irecv(&one, 1, MPI_INT, partner, TAG, MPI_COMM_WORLD, &req);
            if (k % 4 == 2)
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            else
                MPI_Waitany(1, &req, &index, MPI_STATUS_IGNORE);
        }
        break;
    case 1: /* late_sender_wrong_order */
        if (!waiter) {
            MPI_Send(&one, 1, MPI_INT, partner, 1, MPI_COMM_WORLD);
            sleep_ms(ms);
            stamp();
            MPI_Send(&two, 1, MPI_INT, partner, 2, MPI_COMM_WORLD);
        } else {
            for (int there = 0; !there; nap(50000))
                MPI_Iprobe(partner, 1, MPI_COMM_WORLD, &there, MPI_STATUS_IGNORE);
            stamp();
            MPI_Recv(&two, 1, MPI_INT, partner, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(&one, 1, MPI_INT, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        break;
    case 2: /* late_receiver */
        if (!waiter) {
            sleep_ms(ms);
            stamp();
            MPI_Recv(big, BIG, MPI_CHAR, partner, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            break;
        }
        stamp();
        if (k % 4 < 2) {
            MPI_Ssend(big, BIG, MPI_CHAR, partner, TAG, MPI_COMM_WORLD);
        } else {
            MPI_Send(big, BIG, MPI_CHAR, partner, TAG, MPI_COMM_WORLD);
        }
        break;
    }
}

/* One repetition of a collective pattern; `late` is the late rank or root. */
static void collective(int pattern, int k, int ms, int late) {
    double x = rank, *xs = malloc(sizeof(double) * size), *ys = malloc(sizeof(double) * size);
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    for (int r = 0; r < size; r++) {
        xs[r] = r;
        counts[r] = 1;
        displs[r] = r;
    }
    /* Who sleeps: the late rank, the root, or everyone but the root. */
    int sleeps = pattern == 6 ? rank != late : rank == late;
    if (sleeps) sleep_ms(ms);
    stamp();
    switch (pattern * 4 + k % 4) {
    case 12: MPI_Allreduce(&x, ys, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case 13: MPI_Allgather(&x, 1, MPI_DOUBLE, ys, 1, MPI_DOUBLE, MPI_COMM_WORLD); break;
    case 14:
        MPI_Alltoallv(xs, counts, displs, MPI_DOUBLE, ys, counts, displs, MPI_DOUBLE,
                      MPI_COMM_WORLD);
        break;
    case 15: MPI_Reduce_scatter_block(xs, ys, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case 16: case 17: case 18: case 19: MPI_Barrier(MPI_COMM_WORLD); break;
    case 20: case 23: MPI_Bcast(xs, size, MPI_DOUBLE, late, MPI_COMM_WORLD); break;
    case 21: MPI_Scatter(xs, 1, MPI_DOUBLE, ys, 1, MPI_DOUBLE, late, MPI_COMM_WORLD); break;
    case 22:
        MPI_Scatterv(xs, counts, displs, MPI_DOUBLE, ys, 1, MPI_DOUBLE, late, MPI_COMM_WORLD);
        break;
    case 24: case 27: MPI_Reduce(&x, ys, 1, MPI_DOUBLE, MPI_SUM, late, MPI_COMM_WORLD); break;
    case 25: MPI_Gather(&x, 1, MPI_DOUBLE, ys, 1, MPI_DOUBLE, late, MPI_COMM_WORLD); break;
    case 26:
        MPI_Gatherv(&x, 1, MPI_DOUBLE, ys, counts, displs, MPI_DOUBLE, late, MPI_COMM_WORLD);
        break;
    }
    free(xs);
    free(ys);
    free(counts);
    free(displs);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &meet_comm);
    big = calloc(BIG, 1);

    int reps = 4, ms[PATTERNS] = {0};
    for (int a = 1; a < argc; a++) {
        char *eq = strchr(argv[a], '=');
        int known = 0;
        if (eq && eq - argv[a] == 4 && !strncmp(argv[a], "reps", 4)) {
            reps = atoi(eq + 1);
            known = 1;
        }
        if (eq && eq - argv[a] == 6 && !strncmp(argv[a], "stamps", 6)) {
            char path[4096];
            snprintf(path, sizeof path, "%s.%d", eq + 1, rank);
            if (!(stamps = fopen(path, "w"))) {
                perror(path);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            known = 1;
        }
        for (int p = 0; eq && p < PATTERNS; p++)
            if ((size_t)(eq - argv[a]) == strlen(NAMES[p]) &&
                !strncmp(argv[a], NAMES[p], eq - argv[a])) {
                ms[p] = atoi(eq + 1);
                known = 1;
            }
        if (!known) {
            if (rank == 0) fprintf(stderr, "waits: unknown argument %s\n", argv[a]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }

    for (int p = 0; p < PATTERNS; p++) {
        if (!ms[p]) continue;
        for (int k = 0; k < reps; k++) {
            meet();
            pattern_now = p;
            k_now = k;
            if (p < 3) {
                if (rank < size / 2 * 2) p2p(p, k, ms[p], rank ^ 1, rank % 2 == k % 2);
            } else {
                collective(p, k, ms[p], k % size);
            }
        }
    }
    meet();
    if (stamps) fclose(stamps);
    free(big);
    MPI_Comm_free(&meet_comm);
    MPI_Finalize();
    return 0;
}
