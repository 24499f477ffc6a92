/* Writes COUNT small records to FILE, sleeping PAUSE_US microseconds after
 * every 100 (0: no pause). Usage: spin_io FILE COUNT PAUSE_US */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    long count = atol(argv[2]);
    long pause = atol(argv[3]);
    char c = 'z';
    for (long i = 0; i < count; i++) {
        if (write(fd, &c, 1) != 1) return 1;
        if (pause && i % 100 == 99) usleep(pause);
    }
    close(fd);
    return 0;
}
