/* Signals and the probe. Writes 10 x 100 bytes to FILE, then:
 *   signals FILE segv     writes through a null pointer (no handler)
 *   signals FILE term     raises SIGTERM (no handler); int, bus, fpe: SIGINT,
 *                         SIGBUS, SIGFPE likewise
 *   signals FILE abort    calls abort()
 *   signals FILE handler  installs SIGTERM and SIGSEGV handlers with
 *                         sigaction and SIGINT's with signal, checks that a
 *                         query reports them, raises SIGTERM and SIGINT
 *                         (the handlers count), then exits normally
 *   signals FILE exits    installs a SIGTERM handler that calls _exit(7)
 *                         and raises SIGTERM */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

static volatile sig_atomic_t handled;

static void count(int sig) { handled += sig == SIGTERM ? 1 : 10; }
static void info(int sig, siginfo_t *si, void *ctx) { (void)sig; (void)si; (void)ctx; }
static void leave(int sig) { (void)sig; _exit(7); }

int main(int argc, char **argv) {
    char buf[100];
    memset(buf, 'z', sizeof buf);
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 10; i++)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) return 1;
    const char *mode = argv[2];
    if (strcmp(mode, "segv") == 0) *(volatile int *)0 = 1;
    if (strcmp(mode, "term") == 0) raise(SIGTERM);
    if (strcmp(mode, "int") == 0) raise(SIGINT);
    if (strcmp(mode, "bus") == 0) raise(SIGBUS);
    if (strcmp(mode, "fpe") == 0) raise(SIGFPE);
    if (strcmp(mode, "abort") == 0) abort();
    if (strcmp(mode, "handler") == 0) {
        struct sigaction a, q;
        memset(&a, 0, sizeof a);
        a.sa_handler = count;
        sigaction(SIGTERM, &a, NULL);
        memset(&a, 0, sizeof a);
        a.sa_sigaction = info;
        a.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &a, NULL);
        if (signal(SIGINT, count) != SIG_DFL) return 20;
        if (sigaction(SIGTERM, NULL, &q) != 0 || q.sa_handler != count) return 21;
        if (sigaction(SIGSEGV, NULL, &q) != 0 || q.sa_sigaction != info || !(q.sa_flags & SA_SIGINFO)) return 22;
        if (signal(SIGINT, count) != count) return 23;
        raise(SIGTERM);
        raise(SIGINT);
        if (handled != 11) return 24;
        if (write(fd, buf, 7) != 7) return 25;
        printf("handled\n");
        return 0;
    }
    if (strcmp(mode, "exits") == 0) {
        signal(SIGTERM, leave);
        raise(SIGTERM);
    }
    return 30;
}
