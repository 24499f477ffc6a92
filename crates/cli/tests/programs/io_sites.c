/* Two `write` and two `fwrite` call sites on different lines, and one
 * `fprintf` (a variadic entry point), each moving a known number of bytes,
 * for the I/O call sites
 * (io_call_sites_name_their_lines.rs reads the markers). Writes into the
 * directory given as its argument. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static char buf[8192];

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    char path[4096];
    snprintf(path, sizeof path, "%s/sites.bin", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (write(fd, buf, 1000) != 1000) return 1; /* WRITE_A */
    for (int i = 0; i < 5; i++)
        if (write(fd, buf, 4096) != 4096) return 1; /* WRITE_B */
    close(fd);
    snprintf(path, sizeof path, "%s/sites.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    for (int i = 0; i < 7; i++) fwrite(buf, 1, 300, f); /* FWRITE_A */
    for (int i = 0; i < 2; i++) fwrite(buf, 10, 50, f); /* FWRITE_B */
    for (int i = 0; i < 4; i++) fprintf(f, "%06d\n", i); /* FPRINTF */
    fclose(f);
    return 0;
}
