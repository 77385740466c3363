#define _GNU_SOURCE
#include "CLinuxSupport.h"
#include <errno.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/keyctl.h>

int ms_disable_core_dumps(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -errno;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return -errno;
    return 0;
}

static long result(long r) { return r < 0 ? -errno : r; }

int32_t ms_keyring_add_user_key(const char *description, const void *payload, size_t length) {
    return (int32_t)result(syscall(SYS_add_key, "user", description, payload, length, KEY_SPEC_USER_KEYRING));
}

int32_t ms_keyring_search_user_key(const char *description) {
    return (int32_t)result(syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", description, 0));
}

long ms_keyring_read(int32_t key, void *buffer, size_t length) {
    return result(syscall(SYS_keyctl, KEYCTL_READ, key, buffer, length));
}

long ms_keyring_set_timeout(int32_t key, unsigned int seconds) {
    return result(syscall(SYS_keyctl, KEYCTL_SET_TIMEOUT, key, seconds));
}

long ms_keyring_revoke(int32_t key) {
    return result(syscall(SYS_keyctl, KEYCTL_REVOKE, key));
}

int ms_socket_peer_uid(int descriptor, uint32_t *uid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -errno;
    *uid = credentials.uid;
    return 0;
}
