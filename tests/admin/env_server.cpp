// admin-env-server: a program whose only admin code is an include of admin/server.hpp, for
// check_environment.py: TRACETREE_ADMIN starts its listener. Records "env_work" once, then waits for
// its standard input to close.
#include <tracetree/admin/server.hpp>

#include <cstdio>
#include <iostream>
#include <string>

void env_work() { TRACETREE_FUNCTION(); }

int main() {
    env_work();
    std::puts("ready");
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    return 0;
}
