/* The user API from C. Usage: user_api probe|none */
#include <string.h>
#include <unistd.h>
#include "../../../../include/hark.h"

int main(int argc, char **argv) {
    int want = strcmp(argv[1], "probe") == 0;
    int active = hark_active && hark_active();
    if (active != want) return 1;
    for (int i = 0; i < 3; i++) {
        HARK_MARK("step", i);
        HARK_REGION_BEGIN("outer");
        HARK_REGION_BEGIN("inner");
        HARK_COUNTER("cells", 100 * i);
        HARK_REGION_END("inner");
        HARK_REGION_END("outer");
    }
    HARK_PAUSE();
    write(1, "paused\n", 7);
    HARK_RESUME();
    write(1, "resumed\n", 8);
    return 0;
}
