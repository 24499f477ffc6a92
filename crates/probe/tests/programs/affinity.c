/* Prints each of its threads' name and allowed cores, one line each:
 * "NAME CPU_LIST". Usage: affinity */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    usleep(100000); /* the probe's shipper has started and placed itself */
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], name[64] = "", line[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
        fclose(f);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0)
                printf("%s %s", name, line + 19);
        fclose(f);
    }
    if (d) closedir(d);
    return 0;
}
