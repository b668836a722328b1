// `admin-hosts env-server` (host_life.cpp's main() runs it), for check_environment.py: a case that
// runs no admin code of its own; TRACETREE_ADMIN starts the listener, which the program's include of
// admin/server.hpp declares and tracetree-runtime holds. Records "env_work" once, then waits for its
// standard input to close.
#include <tracetree/admin/server.hpp>

#include <cstdio>
#include <iostream>
#include <string>

void env_work() { TRACETREE_FUNCTION(); }

int env_server_main() {
    env_work();
    std::puts("ready");
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    return 0;
}
