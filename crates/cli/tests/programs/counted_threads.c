/* Threads whose software counts the program measures of itself:
 *
 *   counted_threads THREADS PAGES SLEEPS
 *
 * The main thread records first (region "main"), then starts THREADS
 * threads. Thread t (1..THREADS) records (region "thread": its first
 * event, where the probe opens its counters), then maps t*PAGES fresh
 * pages and writes one byte to each (one minor page fault per page), and
 * sleeps 1 ms t*SLEEPS times (one voluntary context switch each). Around
 * that work it reads its own counts (getrusage(RUSAGE_THREAD)): its
 * faults while touching, its voluntary switches while sleeping, and its
 * switches of both kinds over the whole work (a loaded machine preempts
 * it, and the kernel's context-switches counter counts those too). The main
 * thread touches PAGES pages of its own while they work, and reads the
 * whole process's counts (RUSAGE_SELF) from before it started them to
 * after it joined them. It prints
 *
 *   thread T PAGES MINFLT SLEEPS NVCSW SWITCHES     (one line per thread)
 *   main PAGES MINFLT
 *   self MINFLT NVCSW
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "hark.h"

#define MAX_THREADS 16

static long pages, sleeps, page;

struct result {
    long touched, minflt, slept, nvcsw, switches;
};
static struct result results[MAX_THREADS + 1];

static struct rusage now(int who) {
    struct rusage u;
    getrusage(who, &u);
    return u;
}

/* Maps n fresh pages (no huge pages) and writes one byte to each. */
static void touch(long n) {
    char *m = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(m, n * page, MADV_NOHUGEPAGE);
    for (long i = 0; i < n; i++) {
        ((volatile char *)m)[i * page] = 1;
    }
    munmap(m, n * page);
}

static void *work(void *arg) {
    long t = (long)arg;
    HARK_REGION_BEGIN("thread");
    struct rusage a = now(RUSAGE_THREAD);
    touch(t * pages);
    struct rusage b = now(RUSAGE_THREAD);
    for (long i = 0; i < t * sleeps; i++) {
        struct timespec d = {0, 1000000L};
        while (nanosleep(&d, &d) != 0) {
        }
    }
    struct rusage c = now(RUSAGE_THREAD);
    HARK_REGION_END("thread");
    long switches = (c.ru_nvcsw - a.ru_nvcsw) + (c.ru_nivcsw - a.ru_nivcsw);
    results[t] = (struct result){t * pages, b.ru_minflt - a.ru_minflt, t * sleeps,
                                 c.ru_nvcsw - b.ru_nvcsw, switches};
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 3;
    pages = argc > 2 ? atol(argv[2]) : 1000;
    sleeps = argc > 3 ? atol(argv[3]) : 10;
    page = sysconf(_SC_PAGESIZE);
    if (threads < 1 || threads > MAX_THREADS) return 2;
    HARK_REGION_BEGIN("main");
    struct rusage s0 = now(RUSAGE_SELF);
    pthread_t ids[MAX_THREADS + 1];
    for (long t = 1; t <= threads; t++) {
        if (pthread_create(&ids[t], NULL, work, (void *)t) != 0) return 3;
    }
    struct rusage a = now(RUSAGE_THREAD);
    touch(pages);
    struct rusage b = now(RUSAGE_THREAD);
    for (int t = 1; t <= threads; t++) {
        pthread_join(ids[t], NULL);
    }
    struct rusage s1 = now(RUSAGE_SELF);
    HARK_REGION_END("main");
    for (int t = 1; t <= threads; t++) {
        struct result *r = &results[t];
        printf("thread %d %ld %ld %ld %ld %ld\n", t, r->touched, r->minflt, r->slept, r->nvcsw,
               r->switches);
    }
    printf("main %ld %ld\n", pages, b.ru_minflt - a.ru_minflt);
    printf("self %ld %ld\n", s1.ru_minflt - s0.ru_minflt, s1.ru_nvcsw - s0.ru_nvcsw);
    return 0;
}
