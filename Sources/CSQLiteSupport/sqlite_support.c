#include <sqlite3.h>
#include "CSQLiteSupport.h"

static int configured = -1;

int og_sqlite_memory_statistics_off(void) {
    // sqlite3_config is variadic, which Swift cannot call; it fails once SQLite has started.
    if (configured < 0) configured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
    return configured;
}

__attribute__((constructor)) static void configure_at_load(void) { og_sqlite_memory_statistics_off(); }
