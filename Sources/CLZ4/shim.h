#ifndef CLZ4_SHIM_H
#define CLZ4_SHIM_H
// liblz4's block and frame APIs (Debian: liblz4-dev).
#include <lz4.h>
#include <lz4hc.h>
#include <lz4frame.h>
#endif
