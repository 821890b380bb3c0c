#include "CCRC32C.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <nmmintrin.h>

int ccrc32c_has_hardware(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

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
    uint64_t c64 = c;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, data, 8);
        c64 = _mm_crc32_u64(c64, word);
        data += 8;
        length -= 8;
    }
    c = (uint32_t)c64;
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
