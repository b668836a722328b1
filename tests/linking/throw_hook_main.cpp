// Case throw-hook: where tracetree's __cxa_throw cannot be the one a throw goes through, it says so.
//   throw_hook_main 1   a normal dynamic build: recorder_info().throw_hook is true, the throw is counted
//   throw_hook_main 0   -static, -static-libstdc++, or linked with own_cxa_throw.cpp (the program's
//                       own strong __cxa_throw): throw_hook is false and throw_hook_note says why
// Today RecorderInfo has neither field: the case fails with "no field" (and the throw nodes vanish
// without a word).
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

int main(int argc, char** argv) {
    const int wanted = argc == 2 ? std::atoi(argv[1]) : 1;
    try {
        TRACETREE_SCOPE("hook throw");
        throw std::runtime_error("one throw");
    } catch (const std::runtime_error&) {
    }
    const int hook = probe_throw_hook();
    char note[512];
    probe_throw_hook_note(note, sizeof note);
    if (hook == -1) {
        std::printf("FAIL: RecorderInfo has no field throw_hook / throw_hook_note\n");
        return 1;
    }
    if (hook != wanted) {
        std::printf("FAIL: recorder_info().throw_hook is %d, wanted %d (note: \"%s\")\n", hook, wanted, note);
        return 1;
    }
    if (wanted == 0 && note[0] == '\0') {
        std::printf("FAIL: throw_hook is false and throw_hook_note is empty\n");
        return 1;
    }
    if (wanted == 1 && probe_throws("hook throw") != 1) {
        std::printf("FAIL: throw_hook is true, and %lld throws under the throwing scope, wanted 1\n", probe_throws("hook throw"));
        probe_dump();
        return 1;
    }
    std::printf("ok (throw_hook=%d note=\"%s\")\n", hook, note);
    return 0;
}
