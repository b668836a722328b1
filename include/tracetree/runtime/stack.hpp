// tracetree runtime: the machine stack at the start of a scope a `stack` session watches, and its
// frames named as XRay names functions. SPDX-License-Identifier: MIT
//
// Arthas's `stack` shows every caller of a method. The open scopes of a thread show only the
// annotated (or patched) ones, so a stack session also walks the machine stack when its scope starts:
// _Unwind_Backtrace, which reads the unwind tables every C++ program has (frame pointers are not
// trusted: most builds omit them), about 150 ns per frame on the machine docs/xray.md measures. Only
// scopes a stack session matches pay it. The frames are named at delivery, from the executable's
// symbol table (read once) or, in a shared library, from its exported symbols (dladdr).
#ifndef TRACETREE_RUNTIME_STACK_HPP
#define TRACETREE_RUNTIME_STACK_HPP

#include "instrumentation.hpp"       // t_scope_entry_sp: where an XRay function's frame is
#include "sites.hpp"                 // function_name
#include "../values.hpp"             // StackFrame
#include "symbols.hpp"                 // the executable's function table (ELF)

#include <algorithm>  // std::min
#include <atomic>
#include <cstdint>
#include <cstdio>   // std::snprintf: a frame without a name
#include <memory>
#include <mutex>
#include <new>           // placement new: a lock made anew in a forked child
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include <dlfcn.h>   // dladdr: frames in shared libraries
#include <unwind.h>  // _Unwind_Backtrace

TRACETREE_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t kMaxStackFrames = 64;

// fork() copies only the calling thread. A thread of the parent inside the unwinder (which takes the
// loader's and libgcc's locks) or naming frames would leave the child locks nobody releases, and the
// child's first stack session would wait forever: the runtime's fork handlers take both of these
// first (RuntimeImpl::lock_for_fork), so no walk and no naming is under way when fork() copies.
struct StackLocks {
    std::shared_mutex walking;  // shared by each walk, exclusive around fork()
    std::mutex naming;          // the names of return addresses, and the executable's table
};
inline StackLocks& stack_locks() {
    static auto* locks = new StackLocks;  // kept for the process: a thread may walk during exit
    return *locks;
}


struct StackWalk {
    std::uintptr_t boundary;
    std::vector<std::uintptr_t>* pcs;
    std::uintptr_t inner_pc = 0;  // the frame before, until the boundary is passed
    bool passed = false;
};

// The return addresses of the frames whose part of the stack lies above `boundary`, innermost first:
// the function holding the scope, then its callers. For an annotated scope the boundary is the
// scope's address, inside that function's frame; for an XRay function, the stack pointer before its
// call, the lowest address of its caller's frame.
//
// The unwinder's CFA for a frame, as _Unwind_Backtrace hands it over, is the stack pointer inside that
// frame at its call (the frame's lowest address, as measured with libgcc), so a
// frame holds the boundary when the next frame's CFA is above it: the frame before the first such one
// is the first kept.
inline void unwind_stack(std::uintptr_t boundary, std::vector<std::uintptr_t>& pcs) {
    pcs.clear();
    std::shared_lock<std::shared_mutex> not_forking(stack_locks().walking);
    StackWalk walk{boundary, &pcs};
    _Unwind_Backtrace(
        [](_Unwind_Context* context, void* data) -> _Unwind_Reason_Code {
            auto& w = *static_cast<StackWalk*>(data);
            const std::uintptr_t pc = _Unwind_GetIP(context);
            if (!w.passed) {
                if (_Unwind_GetCFA(context) <= w.boundary) {
                    w.inner_pc = pc;
                    return _URC_NO_REASON;
                }
                w.passed = true;
                if (w.inner_pc != 0) w.pcs->push_back(w.inner_pc);
            }
            if (w.pcs->size() == kMaxStackFrames) return _URC_END_OF_STACK;
            if (pc == 0) return _URC_END_OF_STACK;
            w.pcs->push_back(pc);
            return _URC_NO_REASON;
        },
        &walk);
}

// "ns::Class::method()" as TRACETREE_FUNCTION() and XRay name it, from a demangled symbol; a part the
// compiler split off or cloned ("f(int) [clone .cold]", "main.cold") is named as its function.
inline std::string frame_name(std::string symbol) {
    const std::size_t clone = symbol.find(" [clone ");
    if (clone != std::string::npos) symbol.erase(clone);
    const std::size_t dot = symbol.find('.');
    if (dot != std::string::npos && symbol.find_first_of("(<: ") > dot) symbol.erase(dot);  // an unmangled name's suffix
    std::string name = function_name(symbol.c_str());
    for (std::size_t at = name.find("[abi:"); at != std::string::npos; at = name.find("[abi:", at)) {
        const std::size_t end = name.find(']', at);
        if (end == std::string::npos) break;
        name.erase(at, end + 1 - at);
    }
    return name + "()";
}

// The executable's functions, read once and kept for the process; whether they have been read is for
// the tests (a child forked after a stack session started finds them read).
inline std::atomic<bool>& executable_functions_read() {
    static std::atomic<bool> read{false};
    return read;
}
inline const FunctionTable& executable_functions() {
    static const FunctionTable* table = [] {
        auto* read = new FunctionTable(function_table("/proc/self/exe", executable_bias()));
        executable_functions_read().store(true, std::memory_order_relaxed);
        return read;
    }();
    return *table;
}

// An address inside the first function on this thread's stack that is not tracetree's own (the one
// whose scope is being entered), by its name in the executable's table; 0 outside the executable.
inline std::uintptr_t code_outside_tracetree() {
    struct Walk {
        std::uintptr_t found = 0;
        std::size_t frames = 0;
    } walk;
    std::shared_lock<std::shared_mutex> not_forking(stack_locks().walking);
    _Unwind_Backtrace(
        [](_Unwind_Context* context, void* data) -> _Unwind_Reason_Code {
            auto& w = *static_cast<Walk*>(data);
            const std::uintptr_t pc = _Unwind_GetIP(context);
            if (pc == 0 || ++w.frames > kMaxStackFrames) return _URC_END_OF_STACK;
            const FunctionTable::Entry* function = executable_functions().find(pc - 1);  // a return address: the call is before it
            if (function != nullptr && function->name.rfind("tracetree::", 0) == 0) return _URC_NO_REASON;
            if (function != nullptr) w.found = pc - 1;
            return _URC_END_OF_STACK;
        },
        &walk);
    return walk.found;
}

// A stack session reads the table when it starts, so that the first call it catches does not: that
// call's thread would stall for milliseconds inside its callers' time, and every child forked after
// the start would read the table again. Under the walks' lock, which fork() waits for, shared: not the
// names' lock, which name_of() holds across dladdr(), which waits for the loader's lock, which a
// plugin's constructor that starts a session holds. Out of memory, the first stack reads it.
inline void read_executable_functions() noexcept {
    try {
        std::shared_lock<std::shared_mutex> not_forking(stack_locks().walking);
        static_cast<void>(executable_functions());
    } catch (...) {
    }
}

// The name of the function holding `pc` (or its address), remembered: a stack session's frames come
// back at every matching call, and naming one costs more than walking it. Under the names' lock, which
// fork() waits for, as it does for the walks' lock that read_executable_functions() reads the table
// under: a child never copies the names or the table half done.
inline std::string name_of(std::uintptr_t pc) {
    static auto* names = new std::unordered_map<std::uintptr_t, std::string>;  // kept for the process
    std::lock_guard<std::mutex> lock(stack_locks().naming);
    const auto known = names->find(pc);
    if (known != names->end()) return known->second;
    std::string name;
    if (const FunctionTable::Entry* function = executable_functions().find(pc)) {
        name = frame_name(function->name);
    } else {
        Dl_info where{};
        if (dladdr(reinterpret_cast<void*>(pc), &where) != 0 && where.dli_sname != nullptr) name = frame_name(demangled(where.dli_sname));
    }
    if (name.empty()) {
        char text[40];
        std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(pc));
        name = text;
    }
    if (names->size() < 65536) names->emplace(pc, name);
    return name;
}

// The frames of `pcs`, named, down to the thread's entry (main, or what a thread library called),
// merged with `chain`, the open scopes (innermost first, the matching scope's own first), of which the
// first `on_thread` were opened on this thread and the rest are the path of a hand-off it continues;
// `of_function[i]`: chain[i] is a TRACETREE_FUNCTION's (or XRay's). A function that holds an open
// scope takes the scope's file and line. A named scope that no function holds by name comes before
// the next function that holds one, or after the last; a function's scope stands only where a frame
// has its name (an inlined function has none; a lambda's or a coroutine's frame is named otherwise).
// Across a hand-off, the path's scopes follow this thread's frames down to the last function that
// holds a scope, in place of the rest (the worker's loop: where the hand-off was continued is not
// known, only that it was outside those scopes). The function holding the matching scope is left out
// when it has the scope's name.
inline std::vector<StackFrame> name_stack(const std::vector<std::uintptr_t>& pcs, const std::vector<StackFrame>& chain,
                                          const std::vector<bool>& of_function, std::size_t on_thread) {
    std::vector<std::string> names;
    bool first = true;  // no frame but tracetree's seen yet
    for (std::size_t i = 0; i < pcs.size(); ++i) {
        // A return address may be past the end of its call's function: the call is the byte before.
        std::string name = name_of(i == 0 ? pcs[i] : pcs[i] - 1);
        if (name == "__libc_start_call_main()" || name == "__libc_start_main()" || name == "start_thread()" ||
            name == "clone3()" || name == "clone()")
            break;  // below the thread's entry
        // tracetree's own frames, when the scope is not on the stack (a coroutine's frame), and the
        // function holding the scope when the scope is that function's.
        if (first && name.rfind("tracetree::", 0) == 0) continue;
        const bool holder = first && !chain.empty() && name == chain[0].name;
        first = false;
        if (holder) continue;
        names.push_back(std::move(name));
        if (names.back() == "main()") break;
    }
    while (!names.empty() && names.back().rfind("0x", 0) == 0) names.pop_back();  // the C library's start
    if (names.empty()) return {};
    on_thread = std::min(on_thread, chain.size());
    // held[i]: the scope of this thread that machine frame i holds, in order (0: none).
    std::vector<std::size_t> held(names.size(), 0);
    std::size_t after_holders = 0;  // the first frame after the last that holds one
    for (std::size_t i = 0, next = 1; i < names.size() && next < on_thread; ++i)
        for (std::size_t j = next; j < on_thread; ++j)
            if (chain[j].name == names[i]) {
                held[i] = j;
                next = j + 1;
                after_holders = i + 1;
                break;
            }
    std::vector<StackFrame> frames;
    std::size_t next_scope = 1;
    const auto scopes_until = [&](std::size_t end) {
        for (; next_scope < end; ++next_scope)
            if (next_scope >= on_thread || !of_function[next_scope]) frames.push_back(chain[next_scope]);
    };
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i == after_holders) {
            scopes_until(on_thread);
            if (on_thread < chain.size()) {
                scopes_until(chain.size());
                return frames;
            }
        }
        if (held[i] != 0) {
            scopes_until(held[i]);
            frames.push_back(StackFrame{names[i], chain[held[i]].file, chain[held[i]].line});
            ++next_scope;
        } else {
            frames.push_back(StackFrame{names[i], "", 0});
        }
    }
    scopes_until(chain.size());
    return frames;
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_STACK_HPP
