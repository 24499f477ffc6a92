/* Writes through duplicated descriptors. Usage: dup_io FILE */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int a = dup(fd);
    write(a, "abc", 3);
    dup2(fd, 20);
    write(20, "defg", 4);
    dup3(fd, 21, O_CLOEXEC);
    write(21, "hi", 2);
    close(fd); close(a); close(20); close(21);
    return 0;
}
