// tracetree throw hook: every C++ throw noted under the innermost open scope. SPDX-License-Identifier: MIT
//
// Every throw goes through the Itanium C++ ABI's __cxa_throw. Each copy of the library with control
// code defines one (exported, weak: one per module); the dynamic linker calls the first of the
// program's global scope, which notes the throw in the recorder and passes it on to the next
// definition in load order that is not a tracetree copy of this ABI (that one would note it again):
// another program's hook, or the C++ runtime's own. What it found is this copy's alone (hidden), so
// N copies, LD_PRELOAD and static archives still note a throw once and never call themselves. It
// costs nothing where nothing is thrown.
//
// Whether the hook is called at all depends on the link, so the recorder checks once, when it starts,
// with a throw of its own (a probe; a second one, through the __cxa_throw the other modules call, when
// this module does not export its hook), and recorder_info() says why not.
#ifndef TRACETREE_RUNTIME_THROW_HOOK_HPP
#define TRACETREE_RUNTIME_THROW_HOOK_HPP

#include "runtime.hpp"

#include <cxxabi.h>  // __cxa_throw's parameter types
#include <dlfcn.h>   // dlsym, dladdr: why throws go unseen
#include <new>       // placement new: a probe thrown through another module's __cxa_throw
#include <unistd.h>  // write: the message before an abort

// What a recorder throws to see whether a hook of its ABI notes its throws; outside the versioned
// namespace, so that hooks of every version and ABI recognise it by name.
struct tracetree_throw_probe {
    const char* abi;  // the asking recorder's: "v0_2", ...
    bool seen;        // set by a hook of that ABI
};

// Present in every module whose __cxa_throw is a tracetree hook of this ABI.
#define TRACETREE_DETAIL_THROW_MARK TRACETREE_DETAIL_CAT(tracetree_throw_hook_, TRACETREE_ABI)
extern "C" {
__attribute__((weak, used, visibility("default"))) char TRACETREE_DETAIL_THROW_MARK = 1;
}

TRACETREE_BEGIN_NAMESPACE
namespace detail {

using ThrowFunction = void (*)(void*, std::type_info*, void (*)(void*));
TRACETREE_DETAIL_LOCAL inline std::atomic<ThrowFunction> g_next_throw{nullptr};

// The __cxa_throw after this copy's module in load order that is not a tracetree hook of this ABI;
// else the C++ runtime's own (never one that could call this hook again).
TRACETREE_DETAIL_COLD inline ThrowFunction next_throw() noexcept {
    if (ThrowFunction known = g_next_throw.load(std::memory_order_acquire)) return known;
    const char* const mark = TRACETREE_DETAIL_STRING(TRACETREE_DETAIL_THROW_MARK);
    const void* const self = &g_next_throw;  // hidden: in this copy's module
    void* after_self = nullptr;
    void* runtime = nullptr;
    bool past_self = false;
    walk_modules([&](const ModuleSymbols& module) {
        void* defined = module.find("__cxa_throw");
        if (defined != nullptr && module.find(mark) == nullptr) {
            if (runtime == nullptr && module.find("__cxa_allocate_exception") != nullptr) runtime = defined;
            if (past_self && after_self == nullptr) after_self = defined;
        }
        past_self = past_self || module.contains(self);
        return after_self != nullptr && runtime != nullptr;
    });
    void* next = after_self != nullptr ? after_self : runtime;
    if (next == nullptr) next = dlsym(RTLD_NEXT, "__cxa_throw");
    if (next == nullptr) {
        static const char message[] = "tracetree: no __cxa_throw to pass a throw on to\n";
        [[maybe_unused]] const auto written = write(2, message, sizeof message - 1);
        abort();
    }
    g_next_throw.store(reinterpret_cast<ThrowFunction>(next), std::memory_order_release);
    return reinterpret_cast<ThrowFunction>(next);
}

// Whether this copy's module exports its hook (has __cxa_throw in its dynamic symbol table).
inline bool exports_throw_hook() noexcept {
    bool exported = false;
    walk_modules([&](const ModuleSymbols& module) {
        if (!module.contains(&g_next_throw)) return false;
        exported = module.find("__cxa_throw") != nullptr;
        return true;
    });
    return exported;
}

inline void note_thrown(void* object, const std::type_info* type) noexcept {
    if (__builtin_strcmp(type->name(), "21tracetree_throw_probe") == 0) {
        auto& probe = *static_cast<tracetree_throw_probe*>(object);
        if (__builtin_strcmp(probe.abi, kAbiName) == 0) probe.seen = true;
        return;
    }
    if (Recorder* recorder = find_recorder()) static_cast<RuntimeImpl*>(recorder)->record_throw(object, type);
}

// Empty when a hook of this ABI notes the process's throws; else why not.
inline std::string check_throw_hook() {
    const std::type_info* probe_type = nullptr;
    bool seen = false;
    try {
        throw tracetree_throw_probe{kAbiName, false};
    } catch (const tracetree_throw_probe& probe) {
        seen = probe.seen;
        probe_type = abi::__cxa_current_exception_type();  // typeid would need RTTI
    }
    // A module whose hook is not in its dynamic symbol table (a version script's `local:`,
    // -Wl,--exclude-libs) calls it from inside, where no other module can: they, and the C++ runtime's
    // own throws, call the first __cxa_throw of the lookup scope. The probe is thrown again through that.
    if (seen && !exports_throw_hook()) {
        seen = false;
        if (const auto first = reinterpret_cast<ThrowFunction>(dlsym(RTLD_DEFAULT, "__cxa_throw"))) {
            try {
                void* object = abi::__cxa_allocate_exception(sizeof(tracetree_throw_probe));
                first(new (object) tracetree_throw_probe{kAbiName, false}, const_cast<std::type_info*>(probe_type), nullptr);
            } catch (const tracetree_throw_probe& probe) {
                seen = probe.seen;
            }
        }
        if (!seen)
            return "the __cxa_throw of " + module_of(reinterpret_cast<void*>(&g_next_throw)) +
                   " is not exported (a version script's local:, -Wl,--exclude-libs): only the throws of its own code "
                   "are recorded; export __cxa_throw and tracetree_* from it (a version script's global:; "
                   "--exclude-libs hides an archive's symbols for good: link the control code as an object)";
    }
    if (seen) return "";
    const auto found = [](const char* name) { return dlsym(RTLD_DEFAULT, name) != nullptr; };
    if (!found("__cxa_allocate_exception"))
        return "the C++ runtime is linked into the program (-static, -static-libstdc++): its __cxa_throw comes first";
    if (found("__asan_init") || found("__tsan_init") || found("__msan_init"))
        return "a sanitizer's __cxa_throw comes first and passes throws to the C++ runtime";
    Dl_info where{};
    const std::string module = dladdr(dlsym(RTLD_DEFAULT, "__cxa_throw"), &where) != 0 && where.dli_fname != nullptr
                                   ? where.dli_fname : "?";
    return "the __cxa_throw of " + module +
           " comes first: the program's own, or the C++ runtime's when control.hpp is only in plugins loaded RTLD_LOCAL";
}

}  // namespace detail
TRACETREE_END_NAMESPACE

namespace __cxxabiv1 {
extern "C" __attribute__((used, visibility("default"))) inline void __cxa_throw(void* object, std::type_info* type,
                                                                              void (*destroy)(void*)) {
    ::tracetree::detail::note_thrown(object, type);
    ::tracetree::detail::next_throw()(object, type, destroy);
    __builtin_unreachable();
}
}  // namespace __cxxabiv1

#endif  // TRACETREE_RUNTIME_THROW_HOOK_HPP
