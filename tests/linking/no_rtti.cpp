// Case no-rtti: built with -fno-rtti and linked with a control copy built with -fno-rtti too
// (probe as PROBE=nortti; today it does not compile: typeid in runtime.hpp). A throw from this file
// still yields a throw node, named from the thrown type (__cxa_throw receives its type_info whatever
// -fno-rtti says).
#define PROBE nortti
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <stdexcept>

int main() {
    try {
        TRACETREE_SCOPE("no rtti throw");
        throw std::runtime_error("one throw");
    } catch (const std::runtime_error&) {
    }
    const long long under = nortti_throws("no rtti throw"), named = nortti_throws_of("runtime_error");
    if (under != 1 || named != 1) {
        std::printf("FAIL: %lld throws under the throwing scope, %lld named like runtime_error; wanted 1 and 1\n", under, named);
        nortti_dump();
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
