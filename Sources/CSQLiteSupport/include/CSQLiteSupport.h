#ifndef OBJECTGRAPH_CSQLITESUPPORT_H
#define OBJECTGRAPH_CSQLITESUPPORT_H

/// Turns off SQLite's memory statistics, process-wide, before its first connection; it runs
/// when the program loads, and again (doing nothing more) at each call. With them on, every
/// allocation of every connection takes one global mutex, which two connections on two threads
/// (a list read while the store is checked) wait on for a tenth of their time. Returns whether
/// they are off: false when SQLite had started before the first call.
int og_sqlite_memory_statistics_off(void);

#endif
