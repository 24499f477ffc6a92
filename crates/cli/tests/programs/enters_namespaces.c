/* Does what nsenter and unshare do, which the kernel allows only in a
 * process of one thread: joins its own mount namespace with setns, makes
 * a mount namespace and a user namespace of its own with unshare. Between
 * them it writes a file, and after them "ok" on stdout, so that a run can
 * show it was measured throughout. Exits with the step that failed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fd = open("/proc/self/ns/mnt", O_RDONLY);
    if (fd < 0) { perror("open /proc/self/ns/mnt"); return 2; }
    if (setns(fd, CLONE_NEWNS) != 0) { perror("setns(CLONE_NEWNS)"); return 3; }
    close(fd);
    if (unshare(CLONE_NEWNS) != 0) { perror("unshare(CLONE_NEWNS)"); return 4; }
    FILE *f = fopen("between.txt", "w");
    if (!f) { perror("fopen between.txt"); return 5; }
    fwrite("in a mount namespace of its own\n", 1, 32, f);
    fclose(f);
    if (unshare(CLONE_NEWUSER) != 0) { perror("unshare(CLONE_NEWUSER)"); return 6; }
    if (write(1, "ok\n", 3) != 3) return 7;
    return 0;
}
