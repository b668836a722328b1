// admin-env-control: a program whose only tracetree code is a control file's include and one annotated
// function, for check_environment.py: TRACETREE_ADMIN starts the listener in a program linked with
// tracetree-runtime, and a header-only one, with no listener compiled in, says so (meson builds it both
// ways). Records "env_work"
// once, prints "ready", then reads its standard input until it closes; at each line `fork` it forks a
// child that exits through exit() (static destructors run), and says "forked PID", then how it ended.
#include <tracetree/control.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

void env_work() { TRACETREE_FUNCTION(); }

// LeakSanitizer's switch, asked at exit: off in a forked child, which leaks by design what only the
// parent's other threads reached (their stacks are not copied) and the thread states the recorder
// orphans at fork (runtime/threads.hpp). The parent is checked.
static const pid_t g_parent = ::getpid();
extern "C" int __lsan_is_turned_off() { return ::getpid() != g_parent ? 1 : 0; }

int main() {
    env_work();
    std::puts("ready");
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line != "fork") continue;
        const pid_t child = ::fork();
        if (child == 0) std::exit(0);  // the parent's listener must be neither served nor destroyed here
        if (child < 0) return 2;
        std::printf("forked %d\n", static_cast<int>(child));
        std::fflush(stdout);
        int status = 0;
        if (::waitpid(child, &status, 0) != child) return 2;
        std::printf("child %s %d\n", WIFEXITED(status) ? "exited" : "killed", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        std::fflush(stdout);
    }
    return 0;
}
