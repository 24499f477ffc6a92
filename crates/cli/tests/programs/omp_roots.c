/* Two threads of the program's own each fork three OpenMP regions of two
 * threads and exit; then main forks one more. Each root thread has its own
 * team (and, under the probe, its own stacks of regions and tasks, dropped
 * when it exits). Prints "done". */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
static void *root(void *a) {
    (void)a;
    for (int r = 0; r < 3; r++) {
#pragma omp parallel num_threads(2)
        { volatile double x = 0; for (int i = 0; i < 100000; i++) x += i; }
    }
    return 0;
}
int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, root, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    /* after the two root threads are gone, one region more from main */
#pragma omp parallel num_threads(2)
    { volatile double x = 0; for (int i = 0; i < 100000; i++) x += i; }
    puts("done");
    return 0;
}
