/* THREADS threads each record a few events, then all meet at a barrier,
 * then each records a few more. With fewer buffers than threads the probe
 * must neither starve nor (lossless) deadlock them.
 * Usage: barrier_threads THREADS */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t barrier;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 5; i++) write(-1, 0, 0);
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 5; i++) write(-1, 0, 0);
    return 0;
}

int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    pthread_t t[64];
    pthread_barrier_init(&barrier, 0, n);
    for (int i = 0; i < n; i++) pthread_create(&t[i], 0, worker, 0);
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    return 0;
}
