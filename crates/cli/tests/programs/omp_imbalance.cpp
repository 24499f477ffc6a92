// omp_imbalance.c in C++: a hybrid program with known per-thread imbalance
// that times itself, its parallel region a lambda's body inside a class
// template's member function (the outlined function's symbol is a mangled
// C++ name).
//
// Rounds of: (from the second round on) serial work on the master for half
// a unit; then a parallel region in which thread t works (t + 1) units,
// waits at an explicit barrier, works (n - t) / 2 units more and meets the
// others at the region's end; then (with MPI) an MPI_Allreduce on the
// master. Each thread times its own work and both barrier waits with
// std::chrono::steady_clock and prints, once the program is done:
//   thread <rank> <t> <work_ns> <barrier_ns>
// Built with -DWITH_MPI for the MPI version (MPI_THREAD_FUNNELED).
// Usage: omp_imbalance <unit_ms> <rounds>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#ifdef WITH_MPI
#include <mpi.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

long long since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

// Spins for `ns` of wall time; returns the time it took.
long long spin(long long ns) {
    auto t0 = Clock::now();
    volatile double x = 1.0;
    long long took;
    do {
        for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1e-9;
        took = since(t0);
    } while (took < ns);
    return took;
}

template <typename Work>
class Team {
  public:
    explicit Team(Work work) : work_(work) {}

    struct Times {
        long long work = 0, barrier = 0;
    };

    // One round; the master's serial time since `mark` goes to `serial`
    // right before the fork, and `mark` is set again at the join, so that
    // none of its time outside the region goes untimed.
    void round(long long unit, int threads, long long &serial, Clock::time_point &mark) {
        times_.resize(threads);
        std::vector<Clock::time_point> done(threads);
        auto body = [&](int t, int n) {
            times_[t].work += work_((t + 1) * unit);
            auto b0 = Clock::now();
#pragma omp barrier
            times_[t].barrier += since(b0);
            times_[t].work += work_((n - t) * unit / 2);
            done[t] = Clock::now();
        };
        serial += since(mark);
#pragma omp parallel num_threads(threads)
        body(omp_get_thread_num(), omp_get_num_threads());
        auto joined = Clock::now();
        mark = joined;
        for (int t = 0; t < threads; t++)
            times_[t].barrier +=
                std::chrono::duration_cast<std::chrono::nanoseconds>(joined - done[t]).count();
    }

    std::vector<Times> &times() { return times_; }

  private:
    Work work_;
    std::vector<Times> times_;
};

}  // namespace

int main(int argc, char **argv) {
    long long unit = (argc > 1 ? std::atoll(argv[1]) : 20) * 1000000LL;
    int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
    int rank = 0;
#ifdef WITH_MPI
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    // The master's serial time counts whole, glue included, as in the C
    // program: from here, since LLVM's libomp starts at its first call
    // (omp_get_max_threads), which gcc's libgomp does as it loads.
    long long master = 0;
    auto mark = Clock::now();
    int threads = omp_get_max_threads();
    Team<long long (*)(long long)> team(spin);
    for (int r = 0; r < rounds; r++) {
        if (r > 0) spin(unit / 2);
        team.round(unit, threads, master, mark);
#ifdef WITH_MPI
        double v = r, sum;
        master += since(mark);
        MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        mark = Clock::now();
#endif
    }
    master += since(mark);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    auto &times = team.times();
    times[0].work += master;
    for (int t = 0; t < threads; t++)
        std::printf("thread %d %d %lld %lld\n", rank, t, times[t].work, times[t].barrier);
    // Written now, not behind the OpenMP runtime's shutdown at exit.
    std::fflush(stdout);
    return 0;
}
