/* Writes argv[3] for argv[2] ms of wall time in chunks of argv[1] MiB,
 * each followed by fsync, going back to the file's start every 256 MiB:
 * with 1 MiB chunks a job doing modest synchronous I/O, with 64 MiB
 * chunks one flooding the file system. Prints its span on the wall clock,
 * `span FROM_NS TO_NS` (CLOCK_REALTIME), then per second of the wall clock
 * it wrote in, the bytes it wrote then and the time it spent in write and
 * fsync: `io SECOND BYTES NS`.                                          */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SECONDS 1000

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: fsync_writes MIB MS FILE\n");
        return 2;
    }
    size_t chunk = (size_t)atoll(argv[1]) << 20;
    long long until = now_ns() + atoll(argv[2]) * 1000000LL;
    char *buf = malloc(chunk);
    int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!buf || fd < 0) {
        perror(argv[3]);
        return 1;
    }
    memset(buf, 'x', chunk);
    static long long second[MAX_SECONDS], bytes[MAX_SECONDS], spent[MAX_SECONDS];
    int n = 0;
    long long from = now_ns(), t = from, written = 0;
    while (t < until) {
        if (written >= 256LL << 20) {
            lseek(fd, 0, SEEK_SET);
            written = 0;
        }
        long long start = now_ns();
        if (write(fd, buf, chunk) != (ssize_t)chunk || fsync(fd) != 0) {
            perror("write");
            return 1;
        }
        written += chunk;
        t = now_ns();
        long long s = start / 1000000000LL;
        if (n == 0 || second[n - 1] != s) {
            if (n == MAX_SECONDS)
                continue;
            second[n++] = s;
        }
        bytes[n - 1] += chunk;
        spent[n - 1] += t - start;
    }
    close(fd);
    printf("span %lld %lld\n", from, t);
    for (int i = 0; i < n; i++)
        printf("io %lld %lld %lld\n", second[i], bytes[i], spent[i]);
    return 0;
}
