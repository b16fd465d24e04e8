/*
 * memaccess: streaming and random 8-byte reads over one buffer far larger than the TLB
 * reach, with small (4 KiB) or large (2 MiB transparent huge) pages, and the proof of which
 * pages the buffer got, read from the process's own /proc/self/smaps_rollup.
 *
 * Pages: "small" asks the kernel for no huge pages (madvise MADV_NOHUGEPAGE), "large" for
 * transparent huge pages (MADV_HUGEPAGE; needs THP enabled "madvise" or "always"). The
 * buffer is 2 MiB aligned and touched before the timing; AnonHugePages of the process is
 * printed after the touch, and the run fails (exit 1) when large pages were asked and less
 * than 90 % of the buffer is in huge pages, or small pages were asked and any part is.
 *
 * Streaming: a sequential sum over the buffer. Random: a dependent chain through a random
 * cyclic permutation of the buffer's 64-byte lines (every load waits on the one before,
 * so each is a TLB and cache miss where the buffer exceeds them).
 *
 * Usage: memaccess [-m MiB] [-p small|large] [-r random_loads] [-n stream_passes]
 * Exit status: 0 passed, 1 pages not as asked, 2 bad input or large pages unavailable.
 *
 * pagewatch (built from this file with -DPAGEWATCH): run a command and report, from the
 * kernel's own counters, how much of its anonymous memory was in transparent huge pages: /proc/<pid>/smaps_rollup of the child is
 * read every 20 ms while it runs and the peak AnonHugePages and Rss are printed to stderr
 * when it ends. The child's exit status is passed on.
 *
 * Usage: pagewatch command [args...]   (e.g. mpirun -np 2 pagewatch ./cg.A.x)
 */
#define _GNU_SOURCE
#ifndef PAGEWATCH
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define VERSION "1.0"
#define HUGE_PAGE (2UL << 20)
#define LINE 8 /* 8 x 8 bytes = one 64-byte cache line */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long smaps_kb(const char *field)
{
    FILE *fp = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    size_t len = strlen(field);
    if (!fp)
        return -1;
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, field, len) && line[len] == ':')
            kb = strtol(line + len + 1, NULL, 10);
    fclose(fp);
    return kb;
}

static uint64_t next_random(uint64_t *state)
{
    /* splitmix64 */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    long mib = 1024, loads = 20000000, passes = 5;
    const char *pages = "small";
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-m") && a + 1 < argc)
            mib = atol(argv[++a]);
        else if (!strcmp(argv[a], "-p") && a + 1 < argc)
            pages = argv[++a];
        else if (!strcmp(argv[a], "-r") && a + 1 < argc)
            loads = atol(argv[++a]);
        else if (!strcmp(argv[a], "-n") && a + 1 < argc)
            passes = atol(argv[++a]);
        else
            mib = -1;
    }
    int large = !strcmp(pages, "large");
    if (mib < 2 || mib % 2 || loads < 1 || passes < 1 || (!large && strcmp(pages, "small"))) {
        fprintf(stderr, "memaccess: error: usage: memaccess [-m MiB (even, at least 2)] "
                "[-p small|large] [-r random_loads] [-n stream_passes]\n");
        return 2;
    }
    size_t bytes = (size_t)mib << 20, words = bytes / sizeof(uint64_t), lines = words / LINE;
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, HUGE_PAGE, bytes)) {
        fprintf(stderr, "memaccess: error: cannot allocate %ld MiB\n", mib);
        return 2;
    }
    if (madvise(buf, bytes, large ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) {
        fprintf(stderr, "memaccess: error: madvise(%s) refused: %s (large pages unavailable: "
                "transparent huge pages need CONFIG_TRANSPARENT_HUGEPAGE and "
                "/sys/kernel/mm/transparent_hugepage/enabled 'madvise' or 'always')\n",
                large ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE", strerror(errno));
        return 2;
    }
    long before = smaps_kb("AnonHugePages");
    /* Touch every word: the random chain, a cyclic permutation of the lines (Sattolo). */
    uint64_t state = 12345;
    for (size_t i = 0; i < lines; i++)
        buf[i * LINE] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_random(&state) % i, t = buf[i * LINE];
        buf[i * LINE] = buf[j * LINE];
        buf[j * LINE] = t;
    }
    for (size_t i = 0; i < lines; i++)
        for (size_t w = 1; w < LINE; w++)
            buf[i * LINE + w] = w;
    long huge_kb = smaps_kb("AnonHugePages") - before, rss_kb = smaps_kb("Rss");
    double huge_share = (double)huge_kb * 1024 / bytes;

    double t0 = now();
    uint64_t sum = 0;
    for (long p = 0; p < passes; p++)
        for (size_t i = 0; i < words; i++)
            sum += buf[i];
    double stream_s = now() - t0;
    uint64_t expect = (uint64_t)passes * (lines * (uint64_t)(lines - 1) / 2 +
                                          lines * (uint64_t)(LINE * (LINE - 1) / 2));

    t0 = now();
    size_t at = 0;
    for (long r = 0; r < loads; r++)
        at = buf[at * LINE];
    double random_s = now() - t0;

    int wrong_pages = large ? huge_share < 0.9 : huge_kb > 0;
    printf("memaccess %s\n", VERSION);
    printf("pages asked: %s\n", pages);
    printf("buffer: %ld MiB\n", mib);
    printf("AnonHugePages: %ld kB of the buffer (%.1f %%), Rss %ld kB (/proc/self/smaps_rollup)\n",
           huge_kb, 100 * huge_share, rss_kb);
    printf("streaming: %ld passes, %.6f s, %.1f MB/s\n", passes, stream_s,
           passes * (double)bytes / stream_s / 1e6);
    printf("random: %ld dependent loads, %.6f s, %.3f ns per load\n", loads, random_s,
           random_s / loads * 1e9);
    printf("check: streaming sum %s, chain ended at line %zu\n",
           sum == expect ? "correct" : "WRONG", at);
    if (wrong_pages)
        printf("pages: NOT AS ASKED: %s pages asked, %.1f %% of the buffer in huge pages\n",
               pages, 100 * huge_share);
    else
        printf("pages: as asked (%s)\n", pages);
    free(buf);
    return wrong_pages || sum != expect;
}
#else /* PAGEWATCH */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long field_kb(const char *path, const char *field)
{
    FILE *fp = fopen(path, "r");
    char line[256];
    long kb = -1;
    size_t len = strlen(field);
    if (!fp)
        return -1;
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, field, len) && line[len] == ':')
            kb = strtol(line + len + 1, NULL, 10);
    fclose(fp);
    return kb;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "pagewatch: error: usage: pagewatch command [args...]\n");
        return 2;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("pagewatch: fork");
        return 2;
    }
    if (child == 0) {
        execvp(argv[1], argv + 1);
        fprintf(stderr, "pagewatch: error: cannot run %s\n", argv[1]);
        _exit(127);
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)child);
    long huge = 0, rss = 0, samples = 0;
    int status = 0;
    struct timespec pause = {0, 20000000};
    for (;;) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child)
            break;
        long h = field_kb(path, "AnonHugePages"), r = field_kb(path, "Rss");
        if (h >= 0 && r >= 0) {
            samples++;
            if (h > huge)
                huge = h;
            if (r > rss)
                rss = r;
        }
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "pagewatch: pid %d peak AnonHugePages %ld kB, peak Rss %ld kB, %ld samples\n",
            (int)child, huge, rss, samples);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
#endif
