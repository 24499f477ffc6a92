/* A library a user preloads: when a process loads it, it leaves a file
 * named after the process's pid in $MARKER_DIR, so a test can tell that it
 * was loaded beside the probe. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void mark(void) {
    const char *dir = getenv("MARKER_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/loaded-%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}
