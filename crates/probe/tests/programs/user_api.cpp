// The user API from C++: a scoped region.
#include "../../../../include/hark.h"

static int work(int n) {
    hark::Region r("work");
    int s = 0;
    for (int i = 0; i < n; i++) s += i;
    return s;
}

int main() {
    int s = 0;
    for (int i = 0; i < 3; i++) s += work(10);
    return s == 135 ? 0 : 1;
}
