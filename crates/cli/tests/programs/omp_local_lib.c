/* A library with an OpenMP region, for omp_local_main.c to open with
 * dlopen(RTLD_LOCAL), as Python opens an extension module: its OpenMP
 * runtime is then outside the global scope. */
#include <omp.h>

long omp_local_sum(long n, int *team) {
    long sum = 0;
#pragma omp parallel reduction(+ : sum)
    {
#pragma omp single
        *team = omp_get_num_threads();
#pragma omp for
        for (long i = 0; i < n; i++)
            sum += i;
    }
    return sum;
}
