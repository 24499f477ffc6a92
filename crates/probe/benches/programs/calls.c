/* Per-call costs through the preloaded libhark.so (as a program sees them).
 * Prints "key ns_per_call" lines. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "../../../../include/hark.h"

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int fd = open("/dev/null", O_WRONLY);
    char c = 0;
    /* Warm up: every buffer of the pool allocated, then drained. */
    for (long i = 0; i < 400000; i++) HARK_COUNTER("warm", i);
    usleep(300000);

    double t0 = now_ns();
    for (long i = 0; i < n; i++) write(fd, &c, 1);
    double t1 = now_ns();
    printf("write_devnull %.1f\n", (t1 - t0) / n);

    /* ftell on a memory stream: a wrapped call with no system call, so the
     * probed-minus-passive difference is the wrapper's own cost. */
    static char mem[64];
    FILE *m = fmemopen(mem, sizeof mem, "r");
    t0 = now_ns();
    for (long i = 0; i < n; i++) ftell(m);
    t1 = now_ns();
    printf("ftell_memstream %.1f\n", (t1 - t0) / n);

    if (hark_counter) {
        t0 = now_ns();
        for (long i = 0; i < n; i++) hark_counter("c", i);
        t1 = now_ns();
        printf("hark_counter %.1f\n", (t1 - t0) / n);
    }
    return 0;
}
