/* Two threads each write to their own file.
 * Usage: threads FILE_A FILE_B COUNT */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char buf[256];
static int count;

static void *worker(void *path) {
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < count; i++) write(fd, buf, 1 + i % 200);
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    memset(buf, 't', sizeof buf);
    count = atoi(argv[3]);
    pthread_t a, b;
    pthread_create(&a, 0, worker, argv[1]);
    pthread_create(&b, 0, worker, argv[2]);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
