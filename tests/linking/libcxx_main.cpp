// Case libcxx-mix: a shared library built with clang++ -stdlib=libc++ (libc++ and libc++abi; lib.cpp
// as LIB=libcxx, with control code) linked into an executable built against libstdc++ with control
// code of its own (probe.cpp): a vendor's library built with another standard library. Two ABIs,
// two recorders side by side (core/abi.hpp): each counts its own scopes, notes the throws made
// under its own scopes and no others, sees its throws (recorder_info().throw_hook), and lists the
// other in recorder_info().others. Only C types cross between the two.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <cstring>
#include <stdexcept>

extern "C" {
void libcxx_work(int throw_once);
long long libcxx_count(const char* name);
long long libcxx_throws(const char* scope);
int libcxx_throw_hook();
void libcxx_others(char* out, unsigned long size);
void libcxx_dump();
}

int main() {
    probe_work(3);
    libcxx_work(1);
    libcxx_work(0);
    try {
        TRACETREE_SCOPE("main throw");
        throw std::runtime_error("thrown by the libstdc++ executable");
    } catch (const std::runtime_error&) {
    }
    char mine_others[256], libcxx_others_text[256];
    probe_others(mine_others, sizeof mine_others);
    libcxx_others(libcxx_others_text, sizeof libcxx_others_text);
    int failures = 0;
    const auto check = [&](bool ok, const char* what) {
        if (!ok) std::printf("FAIL: %s\n", what), ++failures;
    };
    check(probe_count("probe work") == 3, "the libstdc++ copy counts its 3 calls");
    check(libcxx_count("libcxx work") == 2, "the libc++ copy counts its 2 calls");
    check(probe_count("libcxx work") == 0 && libcxx_count("probe work") == 0, "neither copy records the other's scopes");
    check(probe_throws("main throw") == 1 && probe_throws(nullptr) == 1, "the libstdc++ copy notes its throw, only that one");
    check(libcxx_throws("libcxx throw") == 1 && libcxx_throws(nullptr) == 1, "the libc++ copy notes its throw, only that one");
    check(probe_throw_hook() == 1 && libcxx_throw_hook() == 1, "both copies see their throws (throw_hook)");
    check(std::strstr(mine_others, "libcxx") != nullptr, "the libstdc++ copy's others list the libc++ recorder");
    check(libcxx_others_text[0] != '\0' && std::strstr(libcxx_others_text, "libcxx") == nullptr,
          "the libc++ copy's others list the libstdc++ recorder");
    if (failures != 0) {
        std::printf("others: libstdc++ copy '%s', libc++ copy '%s'\n", mine_others, libcxx_others_text);
        probe_dump();
        libcxx_dump();
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
