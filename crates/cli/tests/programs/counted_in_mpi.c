/* Counts inside MPI_Recv that the receiver measures of itself:
 *
 *   counted_in_mpi RECVS PAGES
 *
 * Run on 2 ranks. Rank 0 sleeps 2 ms before each of RECVS sends of PAGES
 * pages, so that rank 1 waits in each MPI_Recv; rank 1 receives each into
 * PAGES fresh pages (mapped for it, never touched before: the copy into
 * them faults). Around each MPI_Recv, rank 1 reads its own thread's counts
 * (getrusage(RUSAGE_THREAD)) and prints their sums:
 *
 *   recv RECVS PAGES MINFLT SWITCHES
 *
 * SWITCHES is voluntary plus involuntary, as the kernel's context-switches
 * counter counts them.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static struct rusage now(void) {
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long recvs = argc > 1 ? atol(argv[1]) : 20;
    long pages = argc > 2 ? atol(argv[2]) : 16;
    long page = sysconf(_SC_PAGESIZE);
    long len = pages * page;
    if (rank == 0) {
        char *b = malloc(len);
        memset(b, 1, len);
        for (long i = 0; i < recvs; i++) {
            usleep(2000);
            MPI_Send(b, (int)len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        }
        free(b);
    } else if (rank == 1) {
        long minflt = 0, switches = 0;
        for (long i = 0; i < recvs; i++) {
            char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) {
                perror("mmap");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            madvise(m, len, MADV_NOHUGEPAGE);
            struct rusage a = now();
            MPI_Recv(m, (int)len, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            struct rusage b = now();
            minflt += b.ru_minflt - a.ru_minflt;
            switches += (b.ru_nvcsw - a.ru_nvcsw) + (b.ru_nivcsw - a.ru_nivcsw);
            munmap(m, len);
        }
        printf("recv %ld %ld %ld %ld\n", recvs, pages, minflt, switches);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
