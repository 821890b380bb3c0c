// The memory floor of one upsert of a random existing object among 1M, with the store's
// layout and nothing else: three loads that each need the one before.
//
//   1. the index bucket of a random key (8 MB of 4-byte buckets);
//   2. what the bucket's row names, all at once: its cells (48 MB, 6 cells a row), and with
//      WIDTH 2 its null word (8 MB), with WIDTH 3 also its before-image number (4 MB) and flags
//      (1 MB); its instance slot (8 MB) always;
//   3. the instance the slot points to (64 MB of 64-byte objects).
//
// Each lookup's key depends on the last one's result, so lookups do not overlap, as single
// `upsert` calls do not. HUGE 1 marks the arrays for transparent huge pages, 0 forbids them.
// STEPS 2 (the third argument; 3 when absent) stops after step 2: the index and the row, two
// dependent loads, the bound the single upsert is measured against.
//
//     cc -O2 -o /tmp/lookup-chain Tools/Benchmarks/Latency/lookup-chain.c
//     for h in 0 1; do for w in 1 2 3; do /tmp/lookup-chain $h $w; done; done
//     /tmp/lookup-chain 0 1 2
//
// Used for the single-upsert bound in Tools/Benchmarks/README.md.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/// `bytes` of private memory aligned to 2 MiB, marked or not for huge pages, every word written.
static void *region(size_t bytes, int huge) {
    size_t align = 2u << 20;
    char *p = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    p = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < bytes; i += 8) *(uint64_t *)(p + i) = i * 0x9E3779B97F4A7C15ull;
    return p;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s HUGE(0|1) WIDTH(1-3) [STEPS(2|3)]\n", argv[0]);
        return 64;
    }
    int huge = atoi(argv[1]), width = atoi(argv[2]), steps = argc > 3 ? atoi(argv[3]) : 3;
    size_t n = 1u << 20;  // rows
    uint32_t *buckets = region(2 * n * 4, huge);
    for (size_t i = 0; i < 2 * n; i++) buckets[i] = (uint32_t)((i * 2654435761u) % n);
    uint64_t *cells = region(n * 48, huge), *nulls = region(n * 8, huge);
    uint32_t *before = region(n * 4, huge);
    uint8_t *flags = region(n, huge);
    uint64_t *slots = region(n * 8, huge);
    char *objects = region(n * 64, huge);
    for (size_t i = 0; i < n; i++) slots[i] = (uint64_t)(uintptr_t)(objects + ((i * 2654435761u) % n) * 64);

    size_t lookups = 1000000;
    uint64_t s = 12345, sum = 0;
    double start = now();
    for (size_t i = 0; i < lookups; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t row = buckets[(s + (sum & 1)) % (2 * n)];
        uint64_t x = cells[row * 6];
        if (width > 1) x += nulls[row];
        if (width > 2) x += before[row] + flags[row];
        if (steps > 2) x += *(uint64_t *)(uintptr_t)slots[row];
        sum += x;
    }
    double seconds = now() - start;
    int lines = width == 1 ? 2 : width == 2 ? 3 : 5;  // the row's lines loaded at step 2
    printf("huge pages %d, row lines %d, %d dependent steps: %.0f ns per lookup (checksum %llu)\n", huge, lines,
           steps, seconds / lookups * 1e9, (unsigned long long)sum);
    return 0;
}
