/* STDIO with known byte counts. Usage: stdio_io FILE */
#include <stdio.h>
#include <string.h>

static char buf[4096];

int main(int argc, char **argv) {
    const char *path = argv[1];
    memset(buf, 'y', sizeof buf);
    FILE *f = fopen(path, "w");
    if (fwrite(buf, 10, 7, f) != 7) return 1;                 /* 70 */
    if (fprintf(f, "%d %s %.2f\n", 42, "abc", 3.14159) != 12) return 2;
    if (fputs("hello world\n", f) < 0) return 3;               /* 12 */
    fflush(f);
    fseek(f, 0, SEEK_END);
    if (ftell(f) != 94) return 4;
    fclose(f);

    f = fopen(path, "r");
    if (fread(buf, 1, 1000, f) != 94) return 5;
    fclose(f);
    f = fopen(path, "r");
    if (!fgets(buf, sizeof buf, f) || strlen(buf) != 82) return 6;
    int a; char s[8]; double d;
    if (fscanf(f, "%s", s) != 1) return 7;                     /* "hello" */
    (void)a; (void)d;
    fclose(f);

    /* More arguments than registers, integer and floating point: the
     * variadic trampolines must pass the stack ones too. */
    FILE *g = fopen("fmt.txt", "w");
    fprintf(g, "%d %d %d %d %d %d %d %d %d %d|%.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f|%s\n",
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
            1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, "end");
    fclose(g);

    printf("%s=%d\n", "n", 7);                                 /* 4 bytes */
    fflush(stdout);
    return 0;
}
