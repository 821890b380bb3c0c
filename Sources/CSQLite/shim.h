#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
// SQLite's C API (Debian: libsqlite3-dev); only graph-journal's `export --format sqlite` uses it.
#include <sqlite3.h>
#endif
