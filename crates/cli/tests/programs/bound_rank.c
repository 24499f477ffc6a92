/* Writes the CPUs it is bound to into <dir>/ready, then waits (at most a
 * minute) for <dir>/done before finishing: the test looks at the server
 * meanwhile. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    char ready[4096], tmp[4096], done[4096];
    snprintf(ready, sizeof ready, "%s/ready", argv[1]);
    snprintf(tmp, sizeof tmp, "%s/ready.tmp", argv[1]);
    snprintf(done, sizeof done, "%s/done", argv[1]);
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    FILE *f = fopen(tmp, "w");
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            fprintf(f, "%d\n", c);
    fclose(f);
    rename(tmp, ready);
    for (int i = 0; i < 600 && access(done, F_OK) != 0; i++)
        usleep(100000);
    MPI_Finalize();
    return 0;
}
