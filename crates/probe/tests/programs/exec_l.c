/* Writes to a file, then replaces itself with /bin/sh through execl,
 * execle or execlp, with enough arguments that some are passed on the
 * stack. The shell writes its arguments (and HARK_T, which only execle
 * sets) to out.txt.
 * Usage: exec_l FILE l|le|lp */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char script[] = "echo \"$0 $1 $2 $3 $4 [$HARK_T]\" > out.txt";

int main(int argc, char **argv) {
    char buf[100];
    memset(buf, 'x', sizeof buf);
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, buf, sizeof buf);
    close(fd);
    if (strcmp(argv[2], "l") == 0) {
        execl("/bin/sh", "sh", "-c", script, "a", "b", "c", "d", "e", (char *)NULL);
    } else if (strcmp(argv[2], "le") == 0) {
        char *env[] = {"HARK_T=from-execle", NULL};
        execle("/bin/sh", "sh", "-c", script, "a", "b", "c", "d", "e", (char *)NULL, env);
    } else {
        execlp("sh", "sh", "-c", script, "a", "b", "c", "d", "e", (char *)NULL);
    }
    perror("exec");
    return 1;
}
