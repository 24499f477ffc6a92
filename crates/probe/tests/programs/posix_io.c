/* POSIX I/O with known byte counts; the test checks the probe saw exactly
 * these. Usage: posix_io FILE */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static char buf[8192];

int main(int argc, char **argv) {
    const char *path = argv[1];
    memset(buf, 'x', sizeof buf);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 10; i++)
        if (write(fd, buf, 100 * (i + 1)) != 100 * (i + 1)) return 1; /* 5500 */
    if (pwrite(fd, buf, 333, 10000) != 333) return 2;
    struct iovec v[3] = {{buf, 10}, {buf, 20}, {buf, 30}};
    if (writev(fd, v, 3) != 60) return 3;
    fsync(fd);
    fdatasync(fd);
    close(fd);

    fd = openat(AT_FDCWD, path, O_RDONLY);
    ssize_t n, total = 0;
    while ((n = read(fd, buf, 4096)) > 0) total += n; /* 4096+4096+2141, then 0 */
    if (total != 10333) return 4;
    if (lseek(fd, 0, SEEK_SET) != 0) return 5;
    if (pread(fd, buf, 100, 10000) != 100) return 6;
    struct iovec r[2] = {{buf, 50}, {buf + 50, 50}};
    if (readv(fd, r, 2) != 100) return 7;
    close(fd);

    /* Failures are recorded with their errno, and errno reaches the program. */
    if (open("/nonexistent/hark/x", O_RDONLY) != -1 || errno != ENOENT) return 8;
    errno = 0;
    if (read(-1, buf, 1) != -1 || errno != EBADF) return 9;

    if (write(1, "hello\n", 6) != 6) return 10;
    return 0;
}
