/* Leaves its output in stdio's buffer for exit to write: 3000 bytes
 * through printf, 10000 through the inline putchar_unlocked (no call, but
 * __overflow when the buffer fills), then 4 more through printf, with no
 * newline and no flush. Its stdout is a file or a pipe: fully buffered. */
#include <stdio.h>
#include <string.h>

int main(void) {
    static char a[3001];
    memset(a, 'a', 3000);
    printf("%s", a);
    for (int i = 0; i < 10000; i++) putchar_unlocked('b');
    printf("%s", "tail");
    return 0;
}
