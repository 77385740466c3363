#ifndef MYSTASH_CLINUXSUPPORT_H
#define MYSTASH_CLINUXSUPPORT_H
#include <stddef.h>
#include <stdint.h>

/// Makes the process non-dumpable and sets RLIMIT_CORE to 0. Returns 0 or -errno.
int ms_disable_core_dumps(void);

/// Kernel keyring (keyrings(7)) through raw syscalls, so no libkeyutils is needed.
/// Each returns a key serial (>0) / byte count, or -errno.
int32_t ms_keyring_add_user_key(const char *description, const void *payload, size_t length);
int32_t ms_keyring_search_user_key(const char *description);
long ms_keyring_read(int32_t key, void *buffer, size_t length);
long ms_keyring_set_timeout(int32_t key, unsigned int seconds);
long ms_keyring_revoke(int32_t key);
#endif
