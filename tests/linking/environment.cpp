// Case environment: tracetree neither reads nor writes the environment, so a child process of a
// tracing process inherits nothing from it (today: TRACETREE_RECORDER_v0_2_..._<AT_RANDOM hex>=<heap
// address>, one more per exec generation).
//   environment spawn      records (scopes, a throw), then runs `env` through popen and reads its output
//   environment reexec N   records, then execs itself N times; the last image checks its environ
// Linked with a probe: this process has control code, so the recorder runs.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unistd.h>

extern char** environ;

static void record() {
    TRACETREE_SCOPE("environment record");
    probe_work(3);
    try {
        throw std::runtime_error("recorded");
    } catch (const std::runtime_error&) {
    }
    (void)probe_count("probe work");  // a profile taken too: every control path has run
}

// Variables of this process's own environment that start with TRACETREE_.
static int own_tracetree_variables() {
    int found = 0;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry)
        if (std::strncmp(*entry, "TRACETREE_", 10) == 0) {
            std::printf("FAIL: in this process's environment: %.60s\n", *entry);
            ++found;
        }
    return found;
}

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "spawn") == 0) {
        record();
        FILE* child = popen("env", "r");
        if (child == nullptr) {
            std::printf("FAIL: popen(env)\n");
            return 1;
        }
        int inherited = 0;
        char line[4096];
        while (std::fgets(line, sizeof line, child) != nullptr)
            if (std::strncmp(line, "TRACETREE_", 10) == 0) {
                std::printf("FAIL: the child inherited %.60s\n", line);
                ++inherited;
            }
        if (pclose(child) != 0) {
            std::printf("FAIL: env did not exit 0\n");
            return 1;
        }
        if (inherited + own_tracetree_variables() != 0) return 1;
        std::printf("ok\n");
        return 0;
    }
    if (argc == 3 && std::strcmp(argv[1], "reexec") == 0) {
        const int left = std::atoi(argv[2]);
        record();
        if (left > 0) {
            const std::string next = std::to_string(left - 1);
            char* const args[] = {argv[0], argv[1], const_cast<char*>(next.c_str()), nullptr};
            execv("/proc/self/exe", args);
            std::printf("FAIL: execv\n");
            return 1;
        }
        if (own_tracetree_variables() != 0) return 1;
        std::printf("ok\n");
        return 0;
    }
    std::printf("FAIL: usage: environment spawn | environment reexec N\n");
    return 2;
}
