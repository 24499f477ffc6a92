/* Closes every descriptor from 3 up, and dup2s a file onto every number
 * from 3 to 1023, the way some daemons and shells do, then writes.
 * Usage: fd_churn FILE */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    closefrom(3);
    close_range(3, ~0U, 0);
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int n = 3; n < 1024; n++)
        if (n != fd) dup2(fd, n);
    for (int n = 3; n < 1024; n++)
        if (n != fd) close(n);
    write(fd, "still here\n", 11);
    close(fd);
    return 0;
}
