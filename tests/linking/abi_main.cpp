// Case abi: a copy of tracetree built with OTHER's flags (-D_GLIBCXX_DEBUG: OTHER=dbg;
// -D_GLIBCXX_USE_CXX11_ABI=0: OTHER=abi0) beside a normal one (probe) in one executable, linked in
// both orders. Each copy has control code and an annotated scope in one translation unit. They share
// mangled names but not layouts: today a malloc assertion and abort, or a silently empty profile.
// Expected: no crash, each copy's profile() sees its own translation unit's scope.
// This file includes no tracetree header and passes only C types between the copies.
#include "probe.hpp"

#include <cstdio>
#include <stdexcept>

#define OTHER_FN(name) PROBE_CAT(OTHER, name)
PROBE_API void OTHER_FN(work)(int n);
PROBE_API long long OTHER_FN(count)(const char* name);
PROBE_API void OTHER_FN(dump)();

int main() {
    probe_work(3);
    OTHER_FN(work)(4);
    try {  // a throw, with two throw hooks of two ABIs in the program: no crash, whoever records it
        throw std::runtime_error("one throw");
    } catch (const std::runtime_error&) {
    }
    const long long mine = probe_count("probe work");
    const long long other = OTHER_FN(count)(PROBE_STR(OTHER) " work");
    if (mine != 3 || other != 4) {
        std::printf("FAIL: the normal copy sees %lld calls of its scope (wanted 3), the " PROBE_STR(OTHER)
                    " copy %lld (wanted 4)\n", mine, other);
        probe_dump();
        OTHER_FN(dump)();
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
