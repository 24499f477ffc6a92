/* What one read() of a group of software performance counters costs, the
 * reading the probe takes at each region begin and end (docs/probe.md,
 * "Counters"): a group like the probe's (page-faults leading
 * context-switches, cpu-migrations, minor-faults, major-faults, with
 * inherit and PERF_FORMAT_GROUP|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING),
 * read N times, 5 rounds; prints ns per read of each round.
 *
 *   cc -O2 -o /tmp/bench-counter-read scripts/bench-counter-read.c
 *   /tmp/bench-counter-read 100000 */
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int open_sw(int config, int group) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = config;
    a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    a.inherit = 1;
    a.exclude_hv = 1;
    int fd = syscall(SYS_perf_event_open, &a, 0, -1, group, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        perror("perf_event_open");
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int leader = open_sw(PERF_COUNT_SW_PAGE_FAULTS, -1);
    open_sw(PERF_COUNT_SW_CONTEXT_SWITCHES, leader);
    open_sw(PERF_COUNT_SW_CPU_MIGRATIONS, leader);
    open_sw(PERF_COUNT_SW_PAGE_FAULTS_MIN, leader);
    open_sw(PERF_COUNT_SW_PAGE_FAULTS_MAJ, leader);
    uint64_t buf[16];
    for (int round = 0; round < 5; round++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < n; i++) {
            if (read(leader, buf, sizeof buf) <= 0) {
                perror("read");
                return 1;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("%.0f ns per read\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    }
    return 0;
}
