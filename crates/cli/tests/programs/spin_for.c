/* A program without MPI that spins for argv[1] ms of wall time and exits:
 * a process whose end the test places in time.                          */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    long long until = now_ns() + (argc > 1 ? atoll(argv[1]) : 1000) * 1000000LL;
    volatile double x = 1.0;
    while (now_ns() < until)
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
    return 0;
}
