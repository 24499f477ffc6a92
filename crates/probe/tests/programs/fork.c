/* A parent and a forked child write to different files; the child leaves
 * with exit, or with _exit if a third argument says "_exit".
 * Usage: fork PARENT_FILE CHILD_FILE [exit|_exit] */
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[1024];

int main(int argc, char **argv) {
    memset(buf, 'p', sizeof buf);
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, buf, 100);
    pid_t pid = fork();
    if (pid == 0) {
        int c = open(argv[2], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        write(c, buf, 200);
        write(fd, buf, 7); /* the inherited descriptor, from the child */
        close(c);
        if (argc > 3 && argv[3][0] == '_') _exit(0);
        return 0;
    }
    int st;
    waitpid(pid, &st, 0);
    write(fd, buf, 300);
    close(fd);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
