// A program that execv()s itself: tracetree leaves nothing in the environment for the next image to
// inherit (no variable, no address), and each image starts and reads a recorder of its own.
//   exec-self            records, then execs itself as `exec-self --generation 1`, up to 3
//   exec-self --generation N   checks, records, and execs the next; exits 0 when all is well
#include <tracetree/all.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <unistd.h>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    std::cout << (ok ? "ok: " : "FAILED: ") << what << "\n";
    failures += ok ? 0 : 1;
}

void recorded_work() { TRACETREE_FUNCTION(); }

std::uint64_t calls_of_recorded_work() {
    std::uint64_t calls = 0;
    for (const auto& thread : tracetree::profile().threads)
        for (const auto& root : thread.roots)
            if (root.name == "(anonymous namespace)::recorded_work()") calls += root.count;
    return calls;
}

std::string tracetree_variables() {
    std::string found;
    for (char** entry = environ; *entry != nullptr; ++entry)
        if (std::strncmp(*entry, "TRACETREE", 9) == 0) found += std::string(" ") + *entry;
    return found;
}

}  // namespace

int main(int argc, char** argv) {
    const int generation = argc == 3 && std::strcmp(argv[1], "--generation") == 0 ? std::atoi(argv[2]) : 0;
    check(tracetree_variables().empty(), "generation " + std::to_string(generation) + " inherited no variable:" +
                                             tracetree_variables());
    recorded_work();
    recorded_work();
    check(calls_of_recorded_work() == 2, "generation " + std::to_string(generation) + " records and reads its own profile");
    check(tracetree_variables().empty(), "and set no variable:" + tracetree_variables());
    if (failures != 0 || generation == 3) return failures == 0 ? 0 : 1;
    std::cout.flush();
    const std::string next = std::to_string(generation + 1);
    char* next_argv[] = {argv[0], const_cast<char*>("--generation"), const_cast<char*>(next.c_str()), nullptr};
    execv("/proc/self/exe", next_argv);
    std::perror("execv");
    return 1;
}
