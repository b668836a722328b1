// Shared by the tests that fork while threads run (tests/stress/stress_faults.cpp, tests/otel): a
// bounded wait for a child, and whether the build's allocator survives such a fork at all.
#ifndef TRACETREE_TESTS_FORK_CHILD_HPP
#define TRACETREE_TESTS_FORK_CHILD_HPP

#include <doctest/doctest.h>

#include <csignal>
#include <poll.h>
#include <sys/syscall.h>  // pidfd_open
#include <sys/wait.h>
#include <unistd.h>

#include "sanitizers.hpp"

namespace fork_child {

// ASan's allocator (LLVM 14, GCC 12) takes no lock around fork(): a child forked while another thread
// is inside malloc can wait for ever on the allocator's own lock, whatever tracetree does. The fork
// tests with other threads running are skipped there; they run in plain, UBSan and TSan builds.
constexpr bool kWithThreadsUnsafe = sanitizers::kAddress;
// TSan ends a child that starts a thread after a fork with threads running ("not supported").
constexpr bool kThreadsInChild = !sanitizers::kThread;

// A forked child's exit status (128 + the signal if one ended it); a child still running after 20 s
// is killed with SIGALRM, which the tests report as a failure (a deadlock), not as a timing. The wait
// is the parent's: a child that hangs in a fork handler never reaches an alarm() of its own.
inline int exit_status(pid_t pid) {
    REQUIRE(pid > 0);
    const int watch = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    REQUIRE(watch >= 0);
    pollfd ended{watch, POLLIN, 0};
    if (poll(&ended, 1, 20000) == 0) kill(pid, SIGALRM);
    close(watch);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

}  // namespace fork_child

#endif  // TRACETREE_TESTS_FORK_CHILD_HPP
