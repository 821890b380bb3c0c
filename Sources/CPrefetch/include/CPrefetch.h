// A software prefetch, for ObjectGraph's bulk loops over hash tables and rows that do not fit
// in the CPU caches.
//
// Swift has no prefetch intrinsic. This header's static inline function is compiled into the
// Swift module that imports it, where LLVM inlines it: a call costs one PREFETCHT0 instruction
// (on x86-64; the equivalent elsewhere, nothing where the compiler has none).

#ifndef CPREFETCH_H
#define CPREFETCH_H

/// Asks the CPU to bring the cache line holding `address` into its caches for reading soon.
/// Never faults, whatever `address` is.
static inline __attribute__((always_inline)) void cprefetch_read(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

/// As cprefetch_read, for a line that is about to be written.
static inline __attribute__((always_inline)) void cprefetch_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

#endif
