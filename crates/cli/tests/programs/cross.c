/* Messages that cross between analysers many more times than a matcher
 * holds unmatched operations, then wait states of known length.
 *
 * usage: cross MESSAGES [LATE_MS] [REPS]
 *
 * 1. Every rank sends MESSAGES empty messages to the next rank (in a ring)
 *    and receives as many from the previous one, WINDOW at a time, with
 *    MPI_Isend and MPI_Irecv completed by polling MPI_Testall: no call
 *    blocks, so this phase has no wait state at all, only messages to match.
 *    With analysers over MPI, round-robin, every ring neighbour streams to
 *    another analyser than its sender.
 * 2. REPS Late Senders of LATE_MS (default 100) ms: pairs (2i, 2i+1), the
 *    waiter alternating; the sender sleeps, then MPI_Send; the waiter is in
 *    MPI_Recv.
 * 3. REPS barriers, rank k % size late by LATE_MS ms.
 *
 * Before each repetition the ranks meet without a blocking MPI call (tokens
 * over a duplicate of MPI_COMM_WORLD, completed by polling), so nothing but
 * the phases above is a wait state. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

enum { WINDOW = 1000, TAG = 3 };

static int rank, size;
static MPI_Comm meet_comm;

static void nap(long ns) {
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

static void poll_all(int n, MPI_Request *reqs) {
    for (;;) {
        int done = 0;
        MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (done) return;
        nap(20000);
    }
}

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

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &meet_comm);
    long messages = argc > 1 ? atol(argv[1]) : 200000;
    int late = argc > 2 ? atoi(argv[2]) : 100;
    int reps = argc > 3 ? atoi(argv[3]) : 4;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * WINDOW);
    char in = 0, out = 0;
    for (long done = 0; done < messages;) {
        int n = messages - done < WINDOW ? (int)(messages - done) : WINDOW;
        for (int i = 0; i < n; i++) {
            MPI_Irecv(&in, 0, MPI_BYTE, prev, TAG, MPI_COMM_WORLD, &reqs[i]);
            MPI_Isend(&out, 0, MPI_BYTE, next, TAG, MPI_COMM_WORLD, &reqs[n + i]);
        }
        poll_all(2 * n, reqs);
        done += n;
    }
    free(reqs);

    for (int k = 0; k < reps; k++) {
        meet();
        int partner = rank ^ 1;
        if (partner >= size) continue;
        int waiter = (rank % 2) == (k % 2);
        int v = k;
        if (waiter) {
            MPI_Recv(&v, 1, MPI_INT, partner, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            nap(late * 1000000L);
            MPI_Send(&v, 1, MPI_INT, partner, TAG, MPI_COMM_WORLD);
        }
    }
    for (int k = 0; k < reps; k++) {
        meet();
        if (rank == k % size) nap(late * 1000000L);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    meet();
    MPI_Comm_free(&meet_comm);
    MPI_Finalize();
    return 0;
}
