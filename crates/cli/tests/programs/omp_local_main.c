/* Opens the library argv[1] with dlopen(RTLD_LOCAL) and sums 0..n-1 in
 * its OpenMP region, rounds times; prints "local ok" when every sum is
 * right, as a program whose OpenMP lives in a Python extension would.
 *
 *   omp_local_main LIB [ROUNDS] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    long (*sum)(long, int *) = (long (*)(long, int *))dlsym(lib, "omp_local_sum");
    if (!sum) return 2;
    const long n = 100000;
    int ok = 1, team = 0;
    for (int r = 0; r < rounds; r++)
        ok &= sum(n, &team) == n * (n - 1) / 2;
    printf("local %s: team %d\n", ok ? "ok" : "WRONG", team);
    return ok ? 0 : 1;
}
