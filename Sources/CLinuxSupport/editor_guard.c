#define _GNU_SOURCE
#include "CLinuxSupport.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// Everything here may run inside a signal handler, so it uses only async-signal-safe calls:
// no malloc, no stdio, no readdir (getdents64 into a stack buffer instead).

static void wipe_descriptor(int fd) {
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return;
    char zeros[4096];
    memset(zeros, 0, sizeof zeros);
    off_t left = info.st_size;
    while (left > 0) {
        size_t chunk = left < (off_t)sizeof zeros ? (size_t)left : sizeof zeros;
        ssize_t written = write(fd, zeros, chunk);
        if (written <= 0) break;
        left -= written;
    }
    fsync(fd);
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int ms_wipe_directory(const char *directory) {
    int dir = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) return -errno;
    char buffer[4096];
    for (;;) {
        long count = syscall(SYS_getdents64, dir, buffer, sizeof buffer);
        if (count <= 0) break;
        int removed = 0;
        for (long offset = 0; offset < count;) {
            struct linux_dirent64 *entry = (struct linux_dirent64 *)(buffer + offset);
            offset += entry->d_reclen;
            const char *name = entry->d_name;
            if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
            int fd = openat(dir, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0) {
                wipe_descriptor(fd);
                close(fd);
            }
            if (unlinkat(dir, name, 0) == 0 || unlinkat(dir, name, AT_REMOVEDIR) == 0) removed = 1;
        }
        // Entries were removed while listing: start the listing again from the top.
        if (removed) lseek(dir, 0, SEEK_SET);
        else break;
    }
    close(dir);
    return rmdir(directory) == 0 ? 0 : -errno;
}

static char guarded_directory[4096];
static volatile sig_atomic_t guard_armed;
// Every signal another process can end mystash with (those whose default is to terminate),
// then the real-time ones. Not the faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT,
// SIGSYS): mystash only waits for the editor meanwhile, and the runtime reports its own crashes.
static const int guarded_signals[] = {SIGINT,  SIGHUP,  SIGTERM, SIGQUIT,   SIGUSR1, SIGUSR2,   SIGALRM,
                                      SIGPIPE, SIGPOLL, SIGPROF, SIGVTALRM, SIGXCPU, SIGXFSZ,   SIGPWR,
                                      SIGSTKFLT};
#define GUARDED_COUNT (sizeof guarded_signals / sizeof guarded_signals[0])
#define REALTIME_MAX 64
static struct sigaction previous_actions[GUARDED_COUNT + REALTIME_MAX];
static int guarded[GUARDED_COUNT + REALTIME_MAX];
static size_t guarded_total;

static void guard_handler(int signal_number) {
    if (guard_armed) {
        guard_armed = 0;
        ms_wipe_directory(guarded_directory);
    }
    // Die of the same signal, so the parent sees how we ended.
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigaction(signal_number, &fallback, NULL);
    raise(signal_number);
}

int ms_editor_guard_begin(const char *directory) {
    size_t length = strlen(directory);
    if (length >= sizeof guarded_directory) return -ENAMETOOLONG;
    memcpy(guarded_directory, directory, length + 1);
    guard_armed = 1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = guard_handler;
    sigfillset(&action.sa_mask);
    guarded_total = 0;
    for (size_t index = 0; index < GUARDED_COUNT; index++) guarded[guarded_total++] = guarded_signals[index];
    for (int number = SIGRTMIN; number <= SIGRTMAX && guarded_total < GUARDED_COUNT + REALTIME_MAX; number++) {
        guarded[guarded_total++] = number;
    }
    for (size_t index = 0; index < guarded_total; index++) {
        struct sigaction current;
        if (sigaction(guarded[index], NULL, &current) != 0) return -errno;
        previous_actions[index] = current;
        // A signal the process ignores (SIGPIPE, say) cannot end it: left as it is.
        if (current.sa_handler == SIG_IGN) continue;
        if (sigaction(guarded[index], &action, NULL) != 0) return -errno;
    }
    return 0;
}

int ms_editor_guard_end(void) {
    sigset_t all, saved;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &saved);
    int result = 0;
    if (guard_armed) {
        guard_armed = 0;
        result = ms_wipe_directory(guarded_directory);
    }
    for (size_t index = 0; index < guarded_total; index++) sigaction(guarded[index], &previous_actions[index], NULL);
    sigprocmask(SIG_SETMASK, &saved, NULL);
    return result;
}
