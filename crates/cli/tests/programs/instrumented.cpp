// Built with -finstrument-functions: every function below calls the
// probe's __cyg_profile_func_enter/exit. It counts its own calls and
// prints them, for the test to compare with the profile. Argument: the
// number of outer iterations (the work scales with it).
#include <cstdio>
#include <cstdlib>

static volatile double sink;
static long tiny_calls, middle_calls, step_calls, outer_calls;

// The solver as if from a file of its own (`#line`), for the filter's
// source-file rules.
#line 1 "solver.cpp"
namespace ns {
struct Solver {
    double x = 1.0;
    __attribute__((noinline)) void step(double by) {
        ++step_calls;
        for (int i = 0; i < 2000; ++i) x = x * 0.999999 + by;
        sink = x;
    }
};
}  // namespace ns
#line 25 "instrumented.cpp"

__attribute__((noinline)) int tiny(int i) {
    ++tiny_calls;
    return i * 3 + 1;
}

__attribute__((noinline)) void middle(int n) {
    ++middle_calls;
    long s = 0;
    for (int i = 0; i < n; ++i) s += tiny(i);
    sink = (double)s;
}

__attribute__((noinline)) void outer(int iterations) {
    ++outer_calls;
    ns::Solver solver;
    for (int it = 0; it < iterations; ++it) {
        middle(1000);
        solver.step(it * 1e-9);
    }
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 200;
    outer(iterations);
    printf("calls: outer=%ld middle=%ld tiny=%ld step=%ld\n", outer_calls, middle_calls,
           tiny_calls, step_calls);
    return 0;
}
