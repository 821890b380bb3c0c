// Memory latency on this machine: a dependent pointer chase over one random cycle through
// SIZE bytes, so that every load depends on the previous one and prefetchers cannot help.
//
//     cc -O2 -o /tmp/chase Tools/Benchmarks/Latency/chase.c && /tmp/chase 268435456
//
// Used for the per-upsert scaling bound in Tools/Benchmarks/README.md.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SIZE_IN_BYTES\n", argv[0]);
        return 64;
    }
    size_t n = (size_t)atol(argv[1]) / 8;
    if (n < 2) return 64;
    uint64_t *order = malloc(n * 8), *next = malloc(n * 8);
    if (!order || !next) return 1;
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {  // Fisher-Yates shuffle
        size_t j = ((uint64_t)rand() * RAND_MAX + rand()) % (i + 1);
        uint64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++) next[order[i]] = order[(i + 1) % n];  // one cycle through all
    struct timespec start, end;
    size_t p = 0, loads = 20000000;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (size_t i = 0; i < loads; i++) p = next[p];
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
    printf("%zu MB: %.1f ns per dependent load (%zu)\n", n * 8 >> 20, ns / loads, p);
    return 0;
}
