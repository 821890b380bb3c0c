// CRC32C (Castagnoli) with the SSE4.2 CRC32 instruction, for GraphJournal's checksums.
//
// GraphJournal's CRC32C.swift calls ccrc32c_extend only when ccrc32c_has_hardware() says the
// CPU has the instruction; otherwise (and on every non-x86 machine) it uses its own portable
// slicing-by-8 tables. Both compute the same checksum.

#ifndef CCRC32C_H
#define CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// 1 if this CPU has the SSE4.2 CRC32 instruction (checked once, at the first call), else 0.
/// Always 0 on non-x86 builds.
int ccrc32c_has_hardware(void);

/// The CRC32C of the bytes that gave `crc` followed by `length` bytes at `data` (LevelDB's
/// crc32c::Extend; `crc` 0 starts a new checksum). Only call it when ccrc32c_has_hardware()
/// returned 1: on other machines it is a slow bitwise loop, kept only so the symbol exists.
uint32_t ccrc32c_extend(uint32_t crc, const void *data, size_t length);

#endif
