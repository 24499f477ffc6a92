/* N calls of write(2) or fwrite(3) of one byte to /dev/null from one line:
 * the instructions I/O call sites add (BENCHMARKS.md, "Call sites"). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int fd = open("/dev/null", O_WRONLY);
    FILE *f = fopen("/dev/null", "w");
    char c = 0;
    if (argv[2][0] == 'w')
        for (long i = 0; i < n; i++) write(fd, &c, 1);
    else
        for (long i = 0; i < n; i++) fwrite(&c, 1, 1, f);
    return 0;
}
