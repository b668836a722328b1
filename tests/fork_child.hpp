// Shared by the tests that fork while threads run (tests/stress/stress_faults.cpp, tests/otel): a
// bounded wait for a child, and whether the build's allocator survives such a fork at all.
#ifndef TRACETREE_TESTS_FORK_CHILD_HPP
#define TRACETREE_TESTS_FORK_CHILD_HPP

#include <doctest/doctest.h>

#include <csignal>
#include <fstream>
#include <string>
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

// TSan's metadata allocator (LLVM 14) is not locked around fork() either: a child forked while another
// thread was inside it can spin for ever on its lock (seen with gdb: __tsan::DenseSlabAlloc<MBlock>::
// Refill under operator new, in about one run in 30 of the fork test with sessions and hand-offs),
// running and yielding, never asleep. A wait of tracetree's own sleeps on a futex or a timer; the
// plain build, which runs the same forks, would still catch a spin of tracetree's.
inline bool spins(pid_t pid) {
    for (int sample = 0; sample < 20; ++sample) {
        std::ifstream file("/proc/" + std::to_string(pid) + "/syscall");
        std::string call;
        if (!(file >> call) || (call != "running" && call != "24")) return false;  // 24: sched_yield on x86-64
        usleep(5000);
    }
    return true;
}

// A forked child's exit status (128 + the signal if one ended it); a child still running after 20 s
// is killed with SIGALRM, which the tests report as a failure (a deadlock), not as a timing. The wait
// is the parent's: a child that hangs in a fork handler never reaches an alarm() of its own. Under
// TSan, a child spinning on the sanitizer's own lock is killed and passes, with a message.
inline int exit_status(pid_t pid) {
    REQUIRE(pid > 0);
    const int watch = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    REQUIRE(watch >= 0);
    pollfd ended{watch, POLLIN, 0};
    bool in_sanitizer = false;
    if (poll(&ended, 1, 20000) == 0) {
        in_sanitizer = sanitizers::kThread && spins(pid);
        kill(pid, SIGALRM);
    }
    close(watch);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (in_sanitizer) {
        MESSAGE("child " << pid << " spun for 20 s (ThreadSanitizer's allocator lock after fork): not counted");
        return 0;
    }
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

}  // namespace fork_child

#endif  // TRACETREE_TESTS_FORK_CHILD_HPP
