// admin-env-control: a program whose only tracetree code is a control file's include and one annotated
// function, for check_environment.py: TRACETREE_ADMIN starts the listener in any program with a control
// file, header-only or with the runtime compiled once (meson builds it both ways). Records "env_work"
// once; with the argument `fork`, forks a child that exits through exit() (static destructors run) and
// reports its status; then prints "ready" and waits for its standard input to close.
#include <tracetree/control.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

void env_work() { TRACETREE_FUNCTION(); }

int main(int argc, char** argv) {
    env_work();
    if (argc > 1 && std::string(argv[1]) == "fork") {
        std::fflush(nullptr);
        const pid_t child = ::fork();
        if (child == 0) std::exit(0);  // the parent's listener must be neither served nor destroyed here
        int status = 0;
        if (child < 0 || ::waitpid(child, &status, 0) != child) return 2;
        std::printf("child %s %d\n", WIFEXITED(status) ? "exited" : "killed", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    std::puts("ready");
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    return 0;
}
