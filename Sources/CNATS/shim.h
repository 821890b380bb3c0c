#ifndef CNATS_SHIM_H
#define CNATS_SHIM_H
// The official NATS C client with JetStream (Debian: libnats-dev).
#include <nats/nats.h>
#endif
