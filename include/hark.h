/* hark.h — Hark's user API for C and C++.
 *
 * Mark regions, iterations and counters in a program measured by Hark. The
 * functions live in the probe (libhark.so, preloaded by `hark run`); they
 * are declared weak here, so a program built with this header also links and
 * runs without the probe. Use the HARK_* macros below: they skip the call when
 * the probe is absent, so they are then no-ops (a direct call to an absent
 * weak function would crash; test `if (hark_mark)` first).
 *
 *   #include "hark.h"
 *   for (int it = 0; it < steps; it++) {
 *       HARK_MARK("step", it);
 *       HARK_REGION_BEGIN("solve");
 *       solve();
 *       HARK_REGION_END("solve");
 *       HARK_COUNTER("residual_e9", (int64_t)(residual * 1e9));
 *   }
 *
 * Regions nest and must end in the reverse order they began, on the same
 * thread. Names are any strings; the same name is the same region (or
 * counter, or mark) everywhere in the program. MPI_Pcontrol(0) and
 * hark_pause() pause recording of the whole process; MPI_Pcontrol(1) and
 * hark_resume() resume it. Thread-safe.
 */
#ifndef HARK_H
#define HARK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define HARK_WEAK __attribute__((weak))
#else
#define HARK_WEAK
#endif

/* Enters the region `name`. */
HARK_WEAK void hark_region_begin(const char *name);
/* Leaves the region `name`. */
HARK_WEAK void hark_region_end(const char *name);
/* Marks iteration (or phase number) `iteration` of `name`. */
HARK_WEAK void hark_mark(const char *name, int64_t iteration);
/* Records `value` for the counter `name` (a time series per counter). */
HARK_WEAK void hark_counter(const char *name, int64_t value);
/* Counted-string forms (no NUL needed; trailing blanks ignored). */
HARK_WEAK void hark_region_begin_n(const char *name, size_t len);
HARK_WEAK void hark_region_end_n(const char *name, size_t len);
HARK_WEAK void hark_mark_n(const char *name, size_t len, int64_t iteration);
HARK_WEAK void hark_counter_n(const char *name, size_t len, int64_t value);
/* Pauses / resumes recording of this process. */
HARK_WEAK void hark_pause(void);
HARK_WEAK void hark_resume(void);
/* 1 while this process is being recorded, else 0. */
HARK_WEAK int hark_active(void);

/* Calls that do nothing when the probe is not loaded. */
#define HARK_CALL_(f, ...) do { if (f) f(__VA_ARGS__); } while (0)
#define HARK_REGION_BEGIN(name) HARK_CALL_(hark_region_begin, name)
#define HARK_REGION_END(name) HARK_CALL_(hark_region_end, name)
#define HARK_MARK(name, it) HARK_CALL_(hark_mark, name, it)
#define HARK_COUNTER(name, v) HARK_CALL_(hark_counter, name, v)
#define HARK_PAUSE() do { if (hark_pause) hark_pause(); } while (0)
#define HARK_RESUME() do { if (hark_resume) hark_resume(); } while (0)

#ifdef __cplusplus
}

/* C++: a region that ends when its scope does.
 *   { hark::Region r("assemble"); ... } */
namespace hark {
class Region {
  public:
    explicit Region(const char *name) : name_(name) { HARK_REGION_BEGIN(name_); }
    ~Region() { HARK_REGION_END(name_); }
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;

  private:
    const char *name_;
};
} // namespace hark
#endif

#endif /* HARK_H */
