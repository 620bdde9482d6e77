/* A daemon's heap (c/common/hm_heap.c): free runs below live chunks, which
 * glibc keeps resident by itself, are given back by the trim, and the trim
 * keeps to its interval and its threshold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hm_heap.h"
#include "hm_test.h"

#define S_NS (INT64_C(1000000000))
#define CHUNK_BYTES 1024 /* above the fast bins and under the mmap threshold */
#define CHUNKS 65536     /* 64 MiB */
#define PIN_EVERY 256    /* one chunk kept per 256 KiB: the runs between cannot be */
                         /* given back from the top of the heap */

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifndef UNDER_ASAN
static long rss_anon_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}
#endif

static void check_interval_and_threshold(hm_test_counts *c)
{
    int64_t last = 0;
    /* the first call may trim; the next within the interval does not */
    hm_heap_trim_every(100 * S_NS, 60 * S_NS, 0, &last);
    CHECK(c, last == 100 * S_NS);
    CHECK(c, hm_heap_trim_every(130 * S_NS, 60 * S_NS, 0, &last) == 0);
    CHECK(c, last == 100 * S_NS);
    CHECK(c, hm_heap_trim_every(160 * S_NS, 60 * S_NS, 0, &last) == 1);
    CHECK(c, last == 160 * S_NS);
    /* less free than asked for: no trim, but the interval starts again */
    CHECK(c, hm_heap_trim_every(300 * S_NS, 60 * S_NS, SIZE_MAX, &last) == 0);
    CHECK(c, last == 300 * S_NS);
}

static void check_free_runs_given_back(hm_test_counts *c)
{
#ifdef UNDER_ASAN
    /* ASan's allocator is not glibc's: nothing of glibc's heap to give back */
    printf("test_heap: the resident-size check needs glibc's malloc (skipped under ASan)\n");
    (void)c;
#else
    char **chunks = malloc(CHUNKS * sizeof *chunks);
    CHECK(c, chunks != NULL);
    if (chunks == NULL)
        return;
    for (size_t i = 0; i < CHUNKS; i++) {
        chunks[i] = malloc(CHUNK_BYTES);
        if (chunks[i] != NULL)
            memset(chunks[i], (int)(i & 0x7f) + 1, CHUNK_BYTES);
    }
    double in_use_full = hm_heap_in_use_mib();
    for (size_t i = 0; i < CHUNKS; i++)
        if (i % PIN_EVERY != PIN_EVERY - 1) {
            free(chunks[i]);
            chunks[i] = NULL;
        }
    long before_kib = rss_anon_kib();
    double in_use = hm_heap_in_use_mib();
    CHECK(c, in_use_full > 60 && in_use < 4);
    CHECK(c, hm_heap_free_bytes() > ((size_t)60 << 20));
    /* freed, yet resident: what the reducers kept after each backlog */
    CHECK(c, before_kib > 60 * 1024);
    int64_t last = 0;
    CHECK(c, hm_heap_trim_every(1 * S_NS, 60 * S_NS, (size_t)1 << 20, &last) == 1);
    long after_kib = rss_anon_kib();
    printf("test_heap: RssAnon %ld -> %ld KiB, in use %.1f MiB\n", before_kib, after_kib, in_use);
    CHECK(c, after_kib >= 0 && before_kib - after_kib > 50 * 1024);
    /* the live chunks kept their bytes */
    int whole = 1;
    for (size_t i = PIN_EVERY - 1; i < CHUNKS; i += PIN_EVERY)
        whole &= chunks[i] != NULL && chunks[i][0] == (char)((i & 0x7f) + 1) &&
                 chunks[i][CHUNK_BYTES - 1] == (char)((i & 0x7f) + 1);
    CHECK(c, whole);
    for (size_t i = 0; i < CHUNKS; i++)
        free(chunks[i]);
    free(chunks);
#endif
}

int main(void)
{
    hm_test_counts c = {0, 0};
    check_interval_and_threshold(&c);
    check_free_runs_given_back(&c);
    return hm_test_finish("test_heap", &c);
}
