// tracetree process: what the recorder asks of the process around it. SPDX-License-Identifier: MIT
//
// The modules (which one runs the recorder, pinned; the anchors of other recorders) and the C++ ABI
// (a thread's count of exceptions in flight; a thrown object's type and what()), read through the
// Itanium ABI rather than typeid, so that a file with control code may be built without RTTI.
#ifndef TRACETREE_RUNTIME_PROCESS_HPP
#define TRACETREE_RUNTIME_PROCESS_HPP

#include "exception_types.hpp"  // catches(): what a thrown object is, libstdc++ or libc++abi
#include "../core/recorder.hpp"  // the namespace; the anchors (anchor.hpp)
#include "../values.hpp"  // RecorderInfo

#include <algorithm>  // std::sort, std::unique
#include <atomic>
#include <exception>  // std::exception: a throw's what()
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>
#include <cxxabi.h>   // __cxa_get_globals (exceptions in flight), __cxa_demangle
#include <dlfcn.h>    // dladdr, dlopen: the recorder's module
#include <stdlib.h>   // free
#include <sched.h>     // sched_yield: StartLock
#include <sys/auxv.h>  // getauxval: the executable's program headers
#include <time.h>      // nanosleep: StartLock
#include <unistd.h>    // getpid: StartLock

TRACETREE_BEGIN_NAMESPACE
namespace detail {

inline const unsigned int* uncaught_counter() noexcept {
    // The Itanium C++ ABI (2.2.2) lays the per-thread exception globals out as the caught-exception
    // stack followed by the uncaught count: a pointer taken once per thread makes the check two loads.
    struct EhGlobals {
        void* caught_exceptions;
        unsigned int uncaught_exceptions;
    };
    return &reinterpret_cast<const EhGlobals*>(abi::__cxa_get_globals())->uncaught_exceptions;
}

inline std::string type_name(const std::type_info* type) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
    std::string name = status == 0 && demangled != nullptr ? demangled : type->name();
    free(demangled);
    return name;
}
// Out of memory gets no throw node: making one needs memory, and the runtime's own allocations
// throw it while holding locks (the site table's, a thread's, the chunk pool's) that recording it
// would take again. The scopes it leaves still count their calls as left by an exception.
inline bool out_of_memory(void* object, const std::type_info* type) noexcept {
    return type != nullptr && catches(bad_alloc_type_info, type, object);
}
// what() when the thrown type derives from std::exception: the check a `catch (std::exception&)` makes.
inline std::optional<std::string> what(void* object, const std::type_info* type) {
    if (type != nullptr && catches(exception_type_info, type, object))
        return std::string(static_cast<const std::exception*>(object)->what());
    return std::nullopt;
}

// Recorders of other versions or standard-library ABIs (anchors of another ABI) into `result`, and
// whether an anchor that copies loaded later can reach holds `mine`.
inline void find_anchors(const void* mine, RecorderInfo& result) {
    std::vector<std::pair<std::string, const void*>> seen;
    walk_modules([&](const ModuleSymbols& module) {
        module.each_anchor([&](const char* abi, std::atomic<void*>* anchor) {
            const void* recorder = anchor->load(std::memory_order_acquire);
            if (recorder == mine) result.exported = true;
            else if (recorder != nullptr) seen.emplace_back(abi, recorder);
            return false;
        });
        return false;
    });
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (const auto& other : seen) result.others.push_back(other.first);
}

// The path of the executable or library that holds `code`.
inline std::string module_of(void* code) {
    Dl_info where{};
    return dladdr(code, &where) != 0 && where.dli_fname != nullptr ? where.dli_fname : "";
}
// Why this copy must not run a recorder, or empty. A copy loaded by dlmopen() into a link-map namespace
// of its own, or by dlopen() in a statically linked executable, has a C library of its own: the
// program's fork() never runs the fork handlers it installs (a child could wait for ever on a lock
// another thread held), and its loader lists neither the program nor its other modules, so it cannot
// reach their anchors or listener (it would start a second recorder beside theirs).
inline std::string foreign_namespace() {
    Dl_info where{};
    void* module = nullptr;  // its link_map, which glibc's dlinfo() takes as a handle
    Lmid_t space = LM_ID_BASE;
    const bool found = dladdr1(&g_anchor_walked, &where, &module, RTLD_DL_LINKMAP) != 0;
    const std::string name = found && where.dli_fname != nullptr ? where.dli_fname : "a module";
    if (found && module != nullptr && dlinfo(module, RTLD_DI_LMID, &space) == 0 && space != LM_ID_BASE)
        return "tracetree: " + name + " was loaded by dlmopen() into link-map namespace " + std::to_string(space) +
               ", whose fork handlers the program's fork() does not run: its copy of tracetree records nothing and "
               "starts no listener (load it with dlopen() to record its scopes)";
    // The executable's program headers, as the kernel gave them, are among the modules every copy of
    // the program's own loader lists.
    const auto* program = reinterpret_cast<const ElfW(Phdr)*>(getauxval(AT_PHDR));
    bool listed = false;
    walk_modules([&](const ModuleSymbols& listed_module) { return listed = listed_module.program_headers() == program; });
    if (listed || program == nullptr) return "";
    return "tracetree: " + name +
           " was loaded by dlopen() into a statically linked executable, whose fork handlers and modules its "
           "copy of tracetree cannot reach: it records nothing and starts no listener (link the executable "
           "dynamically to record its scopes)";
}

// The recorder's start, one thread at a time, through a word that holds the starting process's id
// (0: free). A child forked while a thread of its parent was starting (a plugin loaded on one thread
// while another forks) finds its parent's id there and takes the word over, since that thread is not
// in the child; a mutex would keep the child waiting for ever. A thread of the same process waits:
// yields, then sleeps (a start may open the admin listener). It only saves starting twice:
// settle_recorder() keeps one recorder whatever starts meanwhile (a clone() sharing memory, a
// descendant given a stale holder's id).
class StartLock {
public:
    explicit StartLock(std::atomic<pid_t>& word) noexcept : word_(word) {
        const pid_t self = ::getpid();
        pid_t holder = 0;
        for (unsigned tries = 0; !word_.compare_exchange_weak(holder, self, std::memory_order_acquire); ++tries) {
            if (holder != self && holder != 0) continue;  // a parent's: the next try replaces it
            holder = 0;
            if (tries < 64) {
                ::sched_yield();
            } else {
                const timespec pause{0, 1000000};
                ::nanosleep(&pause, nullptr);
            }
        }
    }
    ~StartLock() { word_.store(0, std::memory_order_release); }
    StartLock(const StartLock&) = delete;
    StartLock& operator=(const StartLock&) = delete;

private:
    std::atomic<pid_t>& word_;
};

// Keeps the module of `code` loaded for ever.
inline void pin_module(void* code) {
    const std::string module = module_of(code);
    if (!module.empty()) dlopen(module.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_PROCESS_HPP
