#include "CCRC32C.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <nmmintrin.h>
#include <pthread.h>

int ccrc32c_has_hardware(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

// Three CRC32 instructions on independent streams at once (Mark Adler's crc32c.c): the
// instruction has a latency of three cycles but a throughput of one per cycle, so one stream
// used a third of it (about 7 GB/s here; verify of a 16 MB journal spent 2.3 ms in it). A
// buffer is cut into three blocks of LONG (then SHORT) bytes whose CRCs are combined by
// "shifting" the first over the length of the next: the CRC register after that many zero
// bytes, a linear map over GF(2) applied through four 256-entry tables.

#if defined(__x86_64__)

#define CCRC32C_POLY 0x82f63b78u
#define CCRC32C_LONG 8192
#define CCRC32C_SHORT 256

static uint32_t ccrc32c_long[4][256];
static uint32_t ccrc32c_short[4][256];
static pthread_once_t ccrc32c_once = PTHREAD_ONCE_INIT;

// The product of a 32x32 matrix over GF(2) (one column per word) and a vector.
static uint32_t gf2_matrix_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void gf2_matrix_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2_matrix_times(mat, mat[n]);
}

// The operator that appends `length` zero bytes (a power of two) to a CRC register.
static void ccrc32c_zeros_op(uint32_t *even, size_t length) {
    uint32_t odd[32];
    uint32_t row = 1;
    odd[0] = CCRC32C_POLY;  // one zero bit
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_matrix_square(even, odd);  // two zero bits
    gf2_matrix_square(odd, even);  // four zero bits
    // Each squaring doubles the zeros: the first in the loop gives one byte.
    do {
        gf2_matrix_square(even, odd);
        length >>= 1;
        if (length == 0) return;
        gf2_matrix_square(odd, even);
        length >>= 1;
    } while (length);
    for (int n = 0; n < 32; n++) even[n] = odd[n];
}

// Four tables that apply the operator for `length` zero bytes a byte of the register at a time.
static void ccrc32c_zeros(uint32_t zeros[][256], size_t length) {
    uint32_t op[32];
    ccrc32c_zeros_op(op, length);
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_matrix_times(op, n);
        zeros[1][n] = gf2_matrix_times(op, n << 8);
        zeros[2][n] = gf2_matrix_times(op, n << 16);
        zeros[3][n] = gf2_matrix_times(op, n << 24);
    }
}

static void ccrc32c_init_tables(void) {
    ccrc32c_zeros(ccrc32c_long, CCRC32C_LONG);
    ccrc32c_zeros(ccrc32c_short, CCRC32C_SHORT);
}

static inline uint32_t ccrc32c_shift(uint32_t zeros[][256], uint32_t crc) {
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

static inline uint64_t ccrc32c_load64(const uint8_t *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

#endif

#if defined(__x86_64__)
// While at least three blocks of `block` bytes remain: CRCs of the three blocks computed at once
// (the crc32 instruction's latency is three times its throughput), then combined by shifting
// the first two over the bytes after them with the `zeros` tables for `block` bytes. Advances
// `*data` and `*length` past the blocks.
__attribute__((target("sse4.2")))
static inline uint64_t ccrc32c_three_streams(uint64_t c0, const uint8_t **data, size_t *length, size_t block,
                                             uint32_t zeros[][256]) {
    const uint8_t *p = *data;
    size_t left = *length;
    while (left >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + block;
        do {
            c0 = _mm_crc32_u64(c0, ccrc32c_load64(p));
            c1 = _mm_crc32_u64(c1, ccrc32c_load64(p + block));
            c2 = _mm_crc32_u64(c2, ccrc32c_load64(p + 2 * block));
            p += 8;
        } while (p < end);
        c0 = ccrc32c_shift(zeros, (uint32_t)c0) ^ c1;
        c0 = ccrc32c_shift(zeros, (uint32_t)c0) ^ c2;
        p += 2 * block;
        left -= 3 * block;
    }
    *data = p;
    *length = left;
    return c0;
}
#endif

// Compiled for SSE4.2 whatever the target's baseline, so that callers must check first.
__attribute__((target("sse4.2")))
uint32_t ccrc32c_extend(uint32_t crc, const void *bytes, size_t length) {
    const uint8_t *data = bytes;
    uint32_t c = ~crc;
    // Byte steps up to an 8-byte boundary, so the word loads below are aligned.
    while (length > 0 && ((uintptr_t)data & 7) != 0) {
        c = _mm_crc32_u8(c, *data++);
        length--;
    }
#if defined(__x86_64__)
    uint64_t c0 = c;
    if (length >= 3 * CCRC32C_SHORT) pthread_once(&ccrc32c_once, ccrc32c_init_tables);
    c0 = ccrc32c_three_streams(c0, &data, &length, CCRC32C_LONG, ccrc32c_long);
    c0 = ccrc32c_three_streams(c0, &data, &length, CCRC32C_SHORT, ccrc32c_short);
    while (length >= 8) {
        c0 = _mm_crc32_u64(c0, ccrc32c_load64(data));
        data += 8;
        length -= 8;
    }
    c = (uint32_t)c0;
#endif
    while (length >= 4) {
        uint32_t word;
        memcpy(&word, data, 4);
        c = _mm_crc32_u32(c, word);
        data += 4;
        length -= 4;
    }
    while (length > 0) {
        c = _mm_crc32_u8(c, *data++);
        length--;
    }
    return ~c;
}

#else

int ccrc32c_has_hardware(void) { return 0; }

uint32_t ccrc32c_extend(uint32_t crc, const void *bytes, size_t length) {
    const uint8_t *data = bytes;
    uint32_t c = ~crc;
    for (size_t i = 0; i < length; i++) {
        c ^= data[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

#endif
