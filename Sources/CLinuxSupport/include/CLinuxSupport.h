#ifndef MYSTASH_CLINUXSUPPORT_H
#define MYSTASH_CLINUXSUPPORT_H
#include <stddef.h>
#include <stdint.h>

/// Makes the process non-dumpable and sets RLIMIT_CORE to 0. Returns 0 or -errno.
int ms_disable_core_dumps(void);

/// The user ID of the process at the other end of a Unix socket (SO_PEERCRED), which Swift's
/// Glibc module leaves out (struct ucred needs _GNU_SOURCE). Returns 0 or -errno.
int ms_socket_peer_uid(int descriptor, uint32_t *uid);

/// Kernel keyring (keyrings(7)) through raw syscalls, so no libkeyutils is needed.
/// Each returns a key serial (>0) / byte count, or -errno.
int32_t ms_keyring_add_user_key(const char *description, const void *payload, size_t length);
int32_t ms_keyring_search_user_key(const char *description);
long ms_keyring_read(int32_t key, void *buffer, size_t length);
long ms_keyring_set_timeout(int32_t key, unsigned int seconds);
long ms_keyring_revoke(int32_t key);

/// Overwrites every file in `directory` with zeros, removes them and the directory.
/// Async-signal-safe. Returns 0 or -errno.
int ms_wipe_directory(const char *directory);
/// Until ms_editor_guard_end, SIGINT, SIGHUP, SIGTERM and SIGQUIT wipe `directory` (as
/// ms_wipe_directory) before the process dies of the signal. Returns 0 or -errno.
int ms_editor_guard_begin(const char *directory);
/// Wipes the guarded directory and restores the previous signal actions. Returns 0 or -errno.
int ms_editor_guard_end(void);

struct termios;
/// Until ms_prompt_guard_end, a hidden prompt on `descriptor` gives the terminal back as `shown`
/// when SIGINT, SIGTERM, SIGHUP or SIGQUIT ends the process (which dies of the signal) and
/// when SIGTSTP stops it, and hides it again (`hidden`) when it continues, writing `prompt`
/// (its first 256 bytes) again; only while the process is in the terminal's foreground.
/// Signals the process ignores stay ignored.
/// Returns 0 or -1.
int ms_prompt_guard_begin(int descriptor, const struct termios *shown, const struct termios *hidden,
                          const char *prompt);
/// Puts back the signal actions from before ms_prompt_guard_begin.
void ms_prompt_guard_end(void);
#endif
