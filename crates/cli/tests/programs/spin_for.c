/* A program without MPI that spins for argv[1] ms of wall time and exits:
 * a process whose end the test places in time. With `fork CHILD_MS`
 * after it, it then forks a child that writes a line to `child.out` (its
 * first recorded call) and spins CHILD_MS more, and the parent exits at
 * once, leaving the child behind.                                        */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void spin(long long ms) {
    long long until = now_ns() + ms * 1000000LL;
    volatile double x = 1.0;
    while (now_ns() < until)
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
}

int main(int argc, char **argv) {
    spin(argc > 1 ? atoll(argv[1]) : 1000);
    if (argc > 3 && strcmp(argv[2], "fork") == 0 && fork() == 0) {
        int fd = open("child.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, "child\n", 6) != 6)
            _exit(3);
        close(fd);
        spin(atoll(argv[3]));
        _exit(0);
    }
    return 0;
}
