// Cases two-libs and ld-preload: one throw per throw, whatever the number of copies of the throw hook.
//   EXE_CONTROL=1  the executable links a probe (control code); 0: it is annotated only and asks liba
//   WITH_LIBS=1    linked with liba and libb (each a library with control code), which throw once each
// The executable throws once inside "main throw" and catches it. Expected: exactly one throw node
// count under each throwing scope, and no other (today: infinite recursion in __cxa_throw, SIGSEGV;
// or, with a control library in LD_PRELOAD, each throw counted twice).
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <stdexcept>

#if WITH_LIBS
extern "C" void liba_work(int throw_once);
extern "C" void libb_work(int throw_once);
#endif
#if !EXE_CONTROL
extern "C" long long liba_throws(const char* scope);
extern "C" void liba_dump();
#endif

static long long throws(const char* scope) {
#if EXE_CONTROL
    return probe_throws(scope);
#else
    return liba_throws(scope);
#endif
}

static int fail(const char* what, long long got, long long wanted) {
    std::printf("FAIL: %s: %lld, wanted %lld\n", what, got, wanted);
#if EXE_CONTROL
    probe_dump();
#else
    liba_dump();
#endif
    return 1;
}

int main() {
    try {
        TRACETREE_SCOPE("main throw");
        throw std::runtime_error("thrown once by the executable");
    } catch (const std::runtime_error&) {
    }
    long long wanted_total = 1;
#if WITH_LIBS
    liba_work(1);
    libb_work(1);
    wanted_total += 2;
    if (long long n = throws("liba throw"); n != 1) return fail("throws under liba's scope", n, 1);
    if (long long n = throws("libb throw"); n != 1) return fail("throws under libb's scope", n, 1);
#endif
    if (long long n = throws("main throw"); n != 1) return fail("throws under the executable's scope", n, 1);
    if (long long n = throws(nullptr); n != wanted_total) return fail("throws in the whole profile", n, wanted_total);
    std::printf("ok\n");
    return 0;
}
