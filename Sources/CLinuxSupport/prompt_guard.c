#define _GNU_SOURCE
#include "CLinuxSupport.h"
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

// A hidden prompt's terminal, for the handlers below (async-signal-safe calls only).
static int prompt_descriptor = -1;
static struct termios prompt_shown, prompt_hidden;
// The prompt, shown again after a continue: the typing is hidden again from then on.
static char prompt_text[256];
static size_t prompt_length;
// The signals that end the process, then those that stop and continue it.
static const int prompt_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT};
#define PROMPT_SIGNAL_COUNT (sizeof prompt_signals / sizeof prompt_signals[0])
static struct sigaction prompt_previous[PROMPT_SIGNAL_COUNT];
static int prompt_handled[PROMPT_SIGNAL_COUNT];

// Only the foreground may set the terminal: from the background tcsetattr stops the process
// (SIGTTOU) instead of letting the signal end it.
static void set_terminal(const struct termios *settings) {
    if (tcgetpgrp(prompt_descriptor) == getpgrp()) tcsetattr(prompt_descriptor, TCSANOW, settings);
}

static void set_action(int signal_number, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigfillset(&action.sa_mask);
    // A read of the prompt goes on after a stop and continue.
    action.sa_flags = SA_RESTART;
    sigaction(signal_number, &action, NULL);
}

static void end_handler(int signal_number) {
    set_terminal(&prompt_shown);
    // Die of the same signal, so the parent sees how we ended.
    set_action(signal_number, SIG_DFL);
    raise(signal_number);
}

static void stop_handler(int signal_number) {
    // Stopped, the shell's terminal echoes.
    set_terminal(&prompt_shown);
    set_action(signal_number, SIG_DFL);
    // The stop happens here, not after the handler: in an orphaned process group the kernel
    // drops it, and the prompt must be hidden again either way.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, signal_number);
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
    raise(signal_number);
    set_action(signal_number, stop_handler);
    set_terminal(&prompt_hidden);
}

// After a stop the handler above did not see (SIGSTOP, SIGTTIN), the shell gave the terminal
// its echo back.
static void continue_handler(int signal_number) {
    (void)signal_number;
    set_terminal(&prompt_hidden);
    if (prompt_length > 0 && tcgetpgrp(prompt_descriptor) == getpgrp()) {
        ssize_t written = write(prompt_descriptor, prompt_text, prompt_length);
        (void)written;
    }
}

int ms_prompt_guard_begin(int descriptor, const struct termios *shown, const struct termios *hidden,
                          const char *prompt) {
    prompt_descriptor = descriptor;
    prompt_length = 0;
    if (prompt != NULL) {
        prompt_length = strnlen(prompt, sizeof prompt_text);
        memcpy(prompt_text, prompt, prompt_length);
    }
    prompt_shown = *shown;
    prompt_hidden = *hidden;
    for (size_t index = 0; index < PROMPT_SIGNAL_COUNT; index++) {
        int number = prompt_signals[index];
        prompt_handled[index] = 0;
        if (sigaction(number, NULL, &prompt_previous[index]) != 0) return -1;
        // A signal the process was told to ignore (nohup, a background job) stays ignored.
        if (prompt_previous[index].sa_handler == SIG_IGN) continue;
        set_action(number, number == SIGTSTP ? stop_handler : number == SIGCONT ? continue_handler : end_handler);
        prompt_handled[index] = 1;
    }
    return 0;
}

void ms_prompt_guard_end(void) {
    for (size_t index = 0; index < PROMPT_SIGNAL_COUNT; index++) {
        if (prompt_handled[index]) sigaction(prompt_signals[index], &prompt_previous[index], NULL);
        prompt_handled[index] = 0;
    }
}
