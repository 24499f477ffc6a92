/* Every OpenMP construct Hark records, each a known number of times, with
 * results the program checks itself (exit 1 if any is wrong): a region with
 * ten shared variables (more than the registers carry), explicit barriers,
 * critical, locks, single, master, static and dynamic loops, sections,
 * reductions, tasks with taskwait and taskgroup, ordered, a nested region
 * and an if(0) region. Prints "constructs ok" and the counts it made.
 *
 *   omp_constructs ROUNDS */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static int fib(int n) {
    if (n < 2)
        return n;
    int a, b;
#pragma omp task shared(a)
    a = fib(n - 1);
#pragma omp task shared(b)
    b = fib(n - 2);
#pragma omp taskwait
    return a + b;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    long v0 = 0, v1 = 1, v2 = 2, v3 = 3, v4 = 4, v5 = 5, v6 = 6, v7 = 7, v8 = 8, v9 = 9;
    long crit = 0, locked = 0, singles = 0, masters = 0, sum = 0, dyn = 0;
    long sections = 0, ordered_last = -1, ordered_bad = 0, grouped = 0;
    int fibs = 0, nested = 0, serial = 0, team = 0;
    omp_lock_t lock;
    omp_init_lock(&lock);
    for (int r = 0; r < rounds; r++) {
#pragma omp parallel shared(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, crit, locked, singles, masters, sum, dyn, sections, ordered_last, ordered_bad, grouped, fibs, team)
        {
#pragma omp single
            team = omp_get_num_threads();
            /* ten shared variables read through the outlined function's
             * arguments, the last ones from the stack */
            long mine = v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9;
#pragma omp critical
            crit += mine;
#pragma omp barrier
            omp_set_lock(&lock);
            locked++;
            omp_unset_lock(&lock);
#pragma omp single
            singles++;
#pragma omp master
            masters++;
#pragma omp barrier
#pragma omp for reduction(+ : sum)
            for (int i = 0; i < 1000; i++)
                sum += i;
#pragma omp for schedule(dynamic, 7) reduction(+ : dyn)
            for (int i = 0; i < 100; i++)
                dyn += 1;
#pragma omp sections
            {
#pragma omp section
                {
#pragma omp atomic
                    sections++;
                }
#pragma omp section
                {
#pragma omp atomic
                    sections++;
                }
            }
#pragma omp for ordered schedule(dynamic)
            for (int i = 0; i < 20; i++) {
#pragma omp ordered
                {
                    if (i != ordered_last + 1)
                        ordered_bad++;
                    ordered_last = i;
                }
            }
#pragma omp single
            {
                ordered_last = -1;
#pragma omp taskgroup
                {
                    for (int t = 0; t < 8; t++) {
#pragma omp task
                        {
#pragma omp atomic
                            grouped++;
                        }
                    }
                }
                fibs += fib(10) == 55;
            }
        }
#pragma omp parallel num_threads(2)
        {
#pragma omp parallel num_threads(2)
            {
#pragma omp atomic
                nested++;
            }
        }
        int off = 0;
#pragma omp parallel if (off)
        {
#pragma omp atomic
            serial++;
        }
    }
    omp_destroy_lock(&lock);
    long n = rounds, t = team;
    int ok = crit == n * t * 45 && locked == n * t && singles == n && masters == n &&
             sum == n * 499500 && dyn == n * 100 && sections == n * 2 && ordered_bad == 0 &&
             grouped == n * 8 && fibs == rounds && serial == rounds && nested >= 2 * rounds;
    printf("constructs %s: team %d crit %ld locked %ld singles %ld masters %ld sum %ld dyn %ld "
           "sections %ld ordered_bad %ld grouped %ld fibs %d nested %d serial %d\n",
           ok ? "ok" : "WRONG", team, crit, locked, singles, masters, sum, dyn, sections,
           ordered_bad, grouped, fibs, nested, serial);
    return ok ? 0 : 1;
}
