/* Preloaded into a program nobody here wrote: what the kernel says of its
 * main thread over its life. The constructor reads
 * /proc/thread-self/schedstat (time on a CPU, time runnable but waiting
 * for one), the destructor reads it again at exit and writes the
 * differences, "<on_cpu_ns> <waited_ns>", to $SCHEDSTAT_DIR/<pid>. A rank
 * of Open MPI spends its life on its main thread (the runtime's own
 * threads sleep), so this is the rank's waiting share as /proc gives it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long long run0 = -1, wait0 = -1;

static int schedstat(long long *run, long long *wait) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f)
        return 0;
    int ok = fscanf(f, "%lld %lld", run, wait) == 2;
    fclose(f);
    return ok;
}

__attribute__((constructor)) static void started(void) {
    if (!schedstat(&run0, &wait0))
        run0 = -1;
}

__attribute__((destructor)) static void ended(void) {
    const char *dir = getenv("SCHEDSTAT_DIR");
    long long run, wait;
    if (!dir || run0 < 0 || !schedstat(&run, &wait))
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "%lld %lld\n", run - run0, wait - wait0);
    fclose(f);
}
