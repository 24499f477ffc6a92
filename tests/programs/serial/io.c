/* A serial program (no MPI) doing file I/O with known totals, for checking
 * Hark's I/O profile by construction. Run in an empty directory:
 *
 *   data.bin   10 write() calls of 4096 bytes, then read back with
 *              read() in 8192-byte chunks: 5 full reads and one at EOF
 *              (40960 bytes written, 40960 read);
 *   data.txt   5 fwrite() calls of 1000 bytes, then 5 fread() calls of
 *              1000 bytes (5000 bytes each way).
 *
 * It prints one line and exits 0 (or 1 with a message if I/O fails). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what) {
    perror(what);
    return 1;
}

int main(void) {
    char block[8192];
    memset(block, 'h', sizeof block);

    int fd = open("data.bin", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) return fail("open data.bin");
    for (int i = 0; i < 10; i++)
        if (write(fd, block, 4096) != 4096) return fail("write");
    close(fd);

    FILE *f = fopen("data.txt", "w");
    if (!f) return fail("fopen data.txt");
    for (int i = 0; i < 5; i++)
        if (fwrite(block, 1, 1000, f) != 1000) return fail("fwrite");
    fclose(f);

    long got = 0;
    fd = open("data.bin", O_RDONLY);
    if (fd < 0) return fail("open data.bin for reading");
    ssize_t n;
    while ((n = read(fd, block, sizeof block)) > 0) got += n;
    close(fd);

    f = fopen("data.txt", "r");
    if (!f) return fail("fopen data.txt for reading");
    for (int i = 0; i < 5; i++) got += (long)fread(block, 1, 1000, f);
    fclose(f);

    printf("serial io: wrote 45960 bytes, read %ld bytes\n", got);
    return got == 45960 ? 0 : 1;
}
