// A shared library (or LD_PRELOAD'ed library) built as LIB=<name>: an annotated scope that throws and
// catches, and, when linked with a probe (LIB_CONTROL=1), that copy's answers exported under its own
// names (<name>_throws, ...), so that an executable with no control code can ask its recorder.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <stdexcept>

#define LIB_CAT2(a, b) a##_##b
#define LIB_CAT(a, b) LIB_CAT2(a, b)
#define LIB_FN(name) LIB_CAT(LIB, name)
#define LIB_API extern "C" __attribute__((visibility("default")))

// "<name> work" with, when `throw_once`, one throw caught inside "<name> throw".
LIB_API void LIB_FN(work)(int throw_once) {
    TRACETREE_SCOPE(PROBE_STR(LIB) " work");
    if (throw_once) {
        try {
            TRACETREE_SCOPE(PROBE_STR(LIB) " throw");
            throw std::runtime_error("thrown once by " PROBE_STR(LIB));
        } catch (const std::runtime_error&) {
        }
    }
}

#if LIB_CONTROL
LIB_API long long LIB_FN(throws)(const char* scope) { return probe_throws(scope); }
LIB_API long long LIB_FN(count)(const char* name) { return probe_count(name); }
LIB_API void LIB_FN(dump)() { probe_dump(); }
LIB_API int LIB_FN(throw_hook)() { return probe_throw_hook(); }
LIB_API void LIB_FN(others)(char* out, unsigned long size) { probe_others(out, size); }
#endif
