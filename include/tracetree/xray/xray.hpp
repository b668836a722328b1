// tracetree XRay: trace functions nobody annotated, patched only while a session asks for them.
// SPDX-License-Identifier: MIT
//
//   clang++ -fxray-instrument -fxray-instruction-threshold=1 -c tomcat.cpp   // no tracetree macros in it
//   // in one file of the executable, itself built with -fxray-instrument:
//   #include <tracetree/xray/xray.hpp>
//   tracetree::xray::install();  // optional: reads the names now and throws if something is missing
//   tracetree::TraceSession trace(tracetree::TraceRequest("Http11Processor::service"));  // patches ...
//   trace.next(30s);                                                                      // ... unpatches
//
// Clang's XRay leaves a few bytes of no-ops (a sled) at the entry and every exit of each function it
// instruments; they cost next to nothing until XRay patches them into calls of a handler. This header's
// handler turns each patched function into a `TRACETREE_FUNCTION()` scope of the same tree as the
// annotated ones, so traces, stacks, watches, monitors, the flight recorder, profiles and every view
// see it as they see an annotated function: `ns::Class::method()`, named from the executable's symbols.
//
// Nothing is patched at start. When the set of sessions changes (detail::listen_to_sessions), the
// functions whose names a running session's pattern matches are patched and the others unpatched;
// a trace or flight recorder also patches the functions they call directly, read from their code
// (calls.hpp), to the session's depth (TraceRequest::depth, 2 by default), narrowed by set_callees. Functions of the standard library, of
// tracetree itself and made by the compiler are never patched: the recorder calls them.
//
// How the handler keeps the tree right (reading order of detail, below):
// - Each thread keeps a shadow stack of the scopes it opened for XRay functions, each with the stack
//   pointer at the function's entry (the handler's own frame address plus an offset measured once
//   per process, see calibrate). XRay sends no exit event for a frame left by an exception, a longjmp,
//   or an exit sled unpatched while the function ran; an event whose stack pointer is at or above a
//   frame's shows that the frame has returned, and it is closed then. An exit never preceded by its
//   entry (patched while the function ran) is ignored.
// - An exception is seen sooner: this header wraps the C++ personality routine, which the unwinder
//   calls for each frame it passes, and closes the XRay frames below that frame there, before any
//   annotated scope around them ends, counted as throws as scopes are.
// - A function is unpatched only once no thread is inside it (its exit sled must stay to close its
//   scope): an unwanted function first drains, and the last thread to leave it unpatches it.
// - A tail call (XRayEntryType::TAIL) to a function the caller's code jumps to directly keeps the
//   caller's scope open: the target's scope opens under it ("[tail call]") and both end at its exit;
//   a target whose entry is taken back (its session ended since the jump) ends it at that entry.
//   A jump through a pointer ends the caller's scope there, as its frame ends on the machine.
//
// Limits (clang 14, x86-64 Linux): only the executable's own functions (XRay in clang 14 neither
// registers nor patches the sleds of a shared library); no sanitizer links with XRay; a patched
// function called from a signal handler on an alternate stack, or from a coroutine or fiber on a stack
// of its own, confuses the stack pointer comparisons. docs/xray.md has the measured costs.
#ifndef TRACETREE_XRAY_XRAY_HPP
#define TRACETREE_XRAY_XRAY_HPP

#if !defined(__clang__)
#error "tracetree/xray/xray.hpp needs clang++ with -fxray-instrument; g++ users: see docs/xray.md"
#elif !__has_feature(xray_instrument)
#error "build the file that includes tracetree/xray/xray.hpp with -fxray-instrument (its probe functions calibrate the handler)"
#endif

#include "../sessions.hpp"  // the sessions that decide what is patched
#include "../runtime/instrumentation.hpp"  // what the runtime lets instrumentation ask
#include "../runtime/sites.hpp"            // function_name: XRay functions named as TRACETREE_FUNCTION() names them
#include "calls.hpp"
#include "../runtime/symbols.hpp"
#include "../runtime/stack.hpp"  // executable_functions: where an annotated function's code is

#include <algorithm>  // std::any_of, std::fill, std::remove
#include <atomic>
#include <cstdint>
#include <cstdio>     // std::snprintf; stderr: an XRay that cannot install says so
#include <memory>
#include <mutex>
#include <new>        // placement new, std::launder
#include <stdexcept>  // std::runtime_error
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include <xray/xray_interface.h>  // clang's XRay runtime (Debian: libclang-common-14-dev, libclang-rt-14-dev)
#include <dlfcn.h>                // dlsym: the C++ runtime's personality routine
#include <linux/membarrier.h>     // a barrier on every thread, paid by the thread that unpatches
#include <pthread.h>              // pthread_atfork
#include <sched.h>                // sched_yield: another patcher is busy
#include <signal.h>               // sigaction: the signal return trampoline
#include <sys/syscall.h>          // SYS_membarrier
#include <unistd.h>               // syscall
#include <unwind.h>               // the personality routine's types, _Unwind_GetCFA

TRACETREE_BEGIN_NAMESPACE

namespace xray {

struct Function {
    std::int32_t id = 0;
    std::string name;           // as traces show it: "ns::Class::method()"
    std::uintptr_t address = 0;
    // false: annotated with TRACETREE_FUNCTION() already; the standard library, tracetree itself,
    // compiler-made functions (the recorder calls them)
    bool patchable = false;
    bool patched = false;       // now; one still running after its sessions ended stays patched until it returns
    std::string wanted_by;      // the running sessions that patch it: "trace 'db::DB::Write' (depth 2)", "; "
};

struct Status {
    bool installed = false;
    std::string error;          // why it is not installed, or the last patching that failed
    std::size_t functions = 0;  // XRay functions in the executable
    std::size_t patchable = 0;
    std::size_t patched = 0;    // patched now, draining ones included
    std::size_t draining = 0;   // wanted by no session, still running on some thread
};

// Reads the executable's XRay functions and their names, measures the handler's offsets and installs
// the handler; patches nothing. The first session change does it otherwise. Throws std::runtime_error
// saying what is missing (no XRay functions, no symbol table).
void install();
Status status() noexcept;
std::vector<Function> functions();  // every XRay function of the executable, by id
// The functions a trace or flight recorder patches besides those its pattern matches, so that they
// appear inside its captures; "*" (the default) is every patchable one. Throws PatternError.
void set_callees(std::string_view pattern, PatternSyntax syntax = PatternSyntax::glob);

}  // namespace xray

namespace detail {

// ---- the functions and what the handler reads -----------------------------------------------------

inline constexpr std::uint8_t kXRayIdle = 0;      // not patched
inline constexpr std::uint8_t kXRayWanted = 1;    // patched for a session
inline constexpr std::uint8_t kXRayDraining = 2;  // patched, wanted by none, still running somewhere
inline constexpr std::uint32_t kXRayMaxFrames = 512;  // nested XRay functions recorded per thread

// Names that are never patched: the recorder and the handler call them.
inline bool xray_patchable(const std::string& name) {
    for (const char* prefix : {"std::", "__gnu_cxx::", "__cxxabiv1::", "tracetree::", "__", "_GLOBAL__"})
        if (name.rfind(prefix, 0) == 0) return false;
    return true;
}

// A demangled name as __PRETTY_FUNCTION__ spells it: without ABI tags ("f[abi:cxx11]()" -> "f()").
inline std::string without_abi_tags(std::string name) {
    for (std::size_t at = name.find("[abi:"); at != std::string::npos; at = name.find("[abi:", at)) {
        const std::size_t end = name.find(']', at);
        if (end == std::string::npos) break;
        name.erase(at, end + 1 - at);
    }
    return name;
}

// One per XRay function id, made once and never freed: its Site is the call site of its scopes.
struct XRayFunction {
    XRayFunction(std::string signature_, std::uintptr_t address_, std::size_t size_, bool annotated)
        : signature(std::move(signature_)), name(function_name(signature.c_str())), address(address_), size(size_),
          patchable(!annotated && xray_patchable(name)), site(signature.c_str(), "", 0, SiteKind::function),
          tail_site(signature.c_str(), kTailCallFile, 0, SiteKind::function) {}
    const std::string signature;  // demangled: "ns::Class::method(int) const"
    const std::string name;       // what patterns match, as for TRACETREE_FUNCTION: "ns::Class::method"
    const std::uintptr_t address;
    const std::size_t size;       // bytes of code (the symbol's size)
    const bool patchable;
    DirectCalls direct;  // read from its code once, before the handler is installed
    Site site;
    Site tail_site;  // entered by a tail call: a node of its own, marked "[tail call]"
};

// Written once before the handler is installed, read by it without a lock afterwards.
struct XRayTable {
    std::int32_t max_id = 0;
    XRayFunction* const* functions = nullptr;  // [id]
    std::atomic<std::uint8_t>* states = nullptr;  // [id]: kXRayIdle, kXRayWanted, kXRayDraining
    // The stack pointer at a function's sled is the handler's CFA plus these (XRay's trampolines
    // save a fixed number of bytes, different at entry and exit).
    std::uintptr_t entry_offset = 0, exit_offset = 0, tail_offset = 0;
    bool fence = false;  // no expedited membarrier on this kernel: the handler fences itself
};
inline XRayTable g_xray_table;

// ---- a thread's shadow stack ----------------------------------------------------------------------

struct XRayFrame {
    std::uintptr_t sp;  // at the function's entry; its callees run below it
    bool tail;          // it jumped to a function of its own (a tail call), which runs in its frame
    alignas(Scope) unsigned char scope[sizeof(Scope)];
    Scope& get() noexcept { return *std::launder(reinterpret_cast<Scope*>(scope)); }
};

struct XRayThread {
    // Read by sweeps on other threads (which ids are open); the frames are the owner's alone.
    std::atomic<std::uint32_t> depth{0};
    std::atomic<std::int32_t> ids[kXRayMaxFrames];
    // A function that has just jumped to another (a tail call) whose entry has not come yet: its
    // targets are kept patched, so that the entry comes and closes its frame.
    std::atomic<std::int32_t> tail_from{0};
    XRayFrame frames[kXRayMaxFrames];
    // The handler, or code it calls, is running: their own XRay events are not recorded.
    bool inside = false;
};

// ---- process-wide state, made once and never freed (threads may record until the process ends) ----

struct XRayState {
    std::mutex mutex;  // installing, patching, sweeping; taken before threads_mutex
    bool installed = false;
    std::string error;
    std::vector<XRayFunction*> functions;  // [id], null at 0
    std::unique_ptr<std::atomic<std::uint8_t>[]> states;
    std::vector<std::int32_t> draining;
    std::vector<std::uint8_t> open;  // a sweep's scratch: [id] is open on some thread
    std::vector<std::uint8_t> wanted;  // an update's scratch: [id] is wanted by a running session
    std::vector<std::string> wanted_by;  // [id]: which running sessions want it, for the admin's view
    bool expedited = false;  // membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) works
    Pattern callees{"*", PatternSyntax::glob};
    // Where every function of the executable starts, sorted: (address, id), an XRay function by its
    // id, any other by functions.size() + its index in executable_functions(). Calls are read against
    // it, so that a call to an annotated function is seen as well as one to an XRay function.
    std::vector<std::pair<std::uintptr_t, std::int32_t>> starts;
    std::unordered_map<std::int32_t, DirectCalls> annotated;  // by id: an annotated function's calls

    std::mutex threads_mutex;
    std::vector<XRayThread*> threads;
};
inline XRayState& xray_state() {
    static XRayState* state = new XRayState;
    return *state;
}

inline XRayThread*& xray_thread() noexcept {
    static thread_local XRayThread* thread = nullptr;
    return thread;
}

inline void xray_leave_thread(XRayThread* thread) noexcept;
struct XRayThreadExit {
    XRayThread* thread = nullptr;
    ~XRayThreadExit() {
        if (thread != nullptr) xray_leave_thread(thread);
    }
};
inline XRayThreadExit& xray_thread_exit() noexcept {
    static thread_local XRayThreadExit exit;
    return exit;
}
inline bool& xray_thread_exited() noexcept {
    static thread_local bool exited = false;
    return exited;
}

[[clang::xray_never_instrument]] inline XRayThread* xray_join() noexcept {
    if (xray_thread_exited()) return nullptr;  // a patched function run by a thread_local's destructor
    auto* thread = new (std::nothrow) XRayThread;
    if (thread == nullptr) return nullptr;
    XRayState& state = xray_state();
    try {
        std::lock_guard<std::mutex> lock(state.threads_mutex);
        state.threads.push_back(thread);
    } catch (...) {  // out of memory: this thread's XRay functions are not recorded
        delete thread;
        return nullptr;
    }
    xray_thread() = thread;
    xray_thread_exit().thread = thread;
    return thread;
}

// ---- patching and draining --------------------------------------------------------------------------
// XRay patches one function at a time (two mprotect calls and a write of its code each), or all of
// them at once. Writing code is slow on some virtual machines (0.2 ms a function on the one
// docs/xray.md measures, against 0.3 ms for all 10,000 at once), so large sets go all at once, and
// the functions that must stay idle go back one by one.

[[clang::xray_never_instrument]] inline bool xray_patch(std::int32_t id, bool on) noexcept {
    for (int attempt = 0; attempt < 10000; ++attempt) {  // ONGOING: someone else calls XRay's patching
        const XRayPatchingStatus status = on ? __xray_patch_function(id) : __xray_unpatch_function(id);
        if (status == XRayPatchingStatus::SUCCESS) return true;
        if (status != XRayPatchingStatus::ONGOING) return false;
        sched_yield();
    }
    return false;
}
[[clang::xray_never_instrument]] inline bool xray_patch_all(bool on) noexcept {
    for (int attempt = 0; attempt < 10000; ++attempt) {
        const XRayPatchingStatus status = on ? __xray_patch() : __xray_unpatch();
        if (status == XRayPatchingStatus::SUCCESS) return true;
        if (status != XRayPatchingStatus::ONGOING) return false;
        sched_yield();
    }
    return false;
}

inline std::size_t xray_count(const XRayState& state, std::uint8_t which) noexcept {
    std::size_t count = 0;
    for (std::size_t id = 1; id < state.functions.size(); ++id) count += state.states[id].load() == which;
    return count;
}

// Patches the idle functions the sessions want (`ids`, ascending); `idle` functions stay unpatched.
// Each becomes kXRayWanted only once all its sleds are: XRay patches a function's entry before its
// exits, and an entry kept before them would open a frame that no exit closes, with the annotated
// scope around it ending off its node. Until then its events are dropped, as an idle function's.
inline void xray_patch_wanted(XRayState& state, const std::vector<std::int32_t>& ids, std::size_t idle) {
    if (ids.size() > idle + 1 && xray_patch_all(true)) {
        for (std::size_t id = 1; id < state.functions.size(); ++id)
            if (state.states[id].load() == kXRayIdle && !std::binary_search(ids.begin(), ids.end(), static_cast<std::int32_t>(id)) &&
                !xray_patch(static_cast<std::int32_t>(id), false))
                state.error = "XRay could not unpatch function " + state.functions[id]->signature;
        for (const std::int32_t id : ids) state.states[static_cast<std::size_t>(id)].store(kXRayWanted);
        return;
    }
    for (const std::int32_t id : ids) {
        if (xray_patch(id, true)) state.states[static_cast<std::size_t>(id)].store(kXRayWanted);
        else state.error = "XRay could not patch function " + state.functions[static_cast<std::size_t>(id)]->signature;
    }
}

// Unpatches the draining functions that no thread is inside any more. A function drains only after
// a barrier on every thread (xray_update): a thread that has not published its entry by then reads
// the function's new state after it, and takes its entry back.
[[clang::xray_never_instrument]] inline void xray_sweep_locked(XRayState& state) noexcept {
    if (state.draining.empty()) return;
    std::fill(state.open.begin(), state.open.end(), std::uint8_t{0});
    {
        std::lock_guard<std::mutex> lock(state.threads_mutex);
        for (XRayThread* thread : state.threads) {
            const std::uint32_t depth = thread->depth.load(std::memory_order_acquire);
            for (std::uint32_t i = 0; i < depth && i < kXRayMaxFrames; ++i) {
                const std::int32_t id = thread->ids[i].load(std::memory_order_relaxed);
                if (id > 0 && static_cast<std::size_t>(id) < state.open.size()) state.open[static_cast<std::size_t>(id)] = 1;
            }
            const std::int32_t from = thread->tail_from.load(std::memory_order_acquire);
            if (from > 0 && static_cast<std::size_t>(from) < state.functions.size())
                for (const std::int32_t target : state.functions[static_cast<std::size_t>(from)]->direct.tails)
                    if (target > 0 && static_cast<std::size_t>(target) < state.open.size()) state.open[static_cast<std::size_t>(target)] = 1;
        }
    }
    std::vector<std::int32_t> done;
    std::size_t kept = 0;
    try {
        for (const std::int32_t id : state.draining) {
            std::atomic<std::uint8_t>& function_state = state.states[static_cast<std::size_t>(id)];
            if (function_state.load() != kXRayDraining) continue;  // wanted again meanwhile
            if (state.open[static_cast<std::size_t>(id)] != 0) {
                state.draining[kept++] = id;
                continue;
            }
            function_state.store(kXRayIdle);
            done.push_back(id);
        }
    } catch (...) {  // out of memory: the rest stays patched until the next sweep
        return;
    }
    state.draining.resize(kept);
    // Nothing left patched: everything at once.
    if (done.size() > 1 && kept == 0 && xray_count(state, kXRayWanted) == 0 && xray_patch_all(false)) return;
    for (const std::int32_t id : done)
        if (!xray_patch(id, false)) state.error = "XRay could not unpatch function " + std::to_string(id);
}

// `wait`: a frame of a draining function has returned, so the sweep must run; else (an entry taken
// back) only when no other sweep or update holds the lock, which will see the same threads.
[[clang::xray_never_instrument]] inline void xray_sweep(bool wait) noexcept {
    XRayState& state = xray_state();
    std::unique_lock<std::mutex> lock(state.mutex, std::defer_lock);
    if (wait) lock.lock();
    else if (!lock.try_lock()) return;
    xray_sweep_locked(state);
}

// ---- the handler ----------------------------------------------------------------------------------

// The frame's scope ends. A frame whose node is no longer the innermost one cannot end in place:
// the tree has moved past it (an annotated scope around it ended first, after a longjmp, or after an
// exception left through a frame whose personality routine is not this header's). It is dropped then,
// uncounted, and the depth it held is given back.
[[clang::xray_never_instrument]] inline void xray_end_scope(Scope& scope) noexcept {
    forget_if_moved_past(scope);
    scope.~Scope();
}

// Whether `target` is one of the functions `id` jumps to directly.
[[clang::xray_never_instrument]] inline bool xray_tail_target(const XRayTable& table, std::int32_t id, std::int32_t target) noexcept {
    const auto& targets = table.functions[id]->direct.tails;
    return std::binary_search(targets.begin(), targets.end(), target);
}

// Pops the innermost frame and ends its scope; returns the new depth.
[[clang::xray_never_instrument]] inline std::uint32_t xray_pop(XRayThread& thread, const XRayTable& table) noexcept {
    const std::uint32_t top = thread.depth.load(std::memory_order_relaxed) - 1;
    const std::int32_t id = thread.ids[top].load(std::memory_order_relaxed);
    thread.depth.store(top, std::memory_order_release);  // gone before the scope ends: it may call a listener that sweeps
    xray_end_scope(thread.frames[top].get());
    if (table.states[id].load(std::memory_order_relaxed) == kXRayDraining) xray_sweep(true);
    return top;
}

// Between what a thread publishes for sweeps (a frame, a tail call) and its read of the functions'
// states: the unpatching thread's membarrier is the fence, or this thread fences itself.
[[clang::xray_never_instrument]] inline void xray_published(const XRayTable& table) noexcept {
    if (table.fence) std::atomic_thread_fence(std::memory_order_seq_cst);
    else std::atomic_signal_fence(std::memory_order_seq_cst);
}

[[clang::xray_never_instrument]] inline void xray_enter(XRayThread& thread, const XRayTable& table, std::int32_t id,
                                                       std::uintptr_t sp) noexcept {
    std::uint32_t depth = thread.depth.load(std::memory_order_relaxed);
    // A frame at this stack pointer or below it has returned without an exit event, unless it has
    // just jumped here (a tail call): then this function runs in its place, and under it.
    bool tail = false;
    while (depth > 0 && thread.frames[depth - 1].sp <= sp) {
        const XRayFrame& below = thread.frames[depth - 1];
        if (below.tail && below.sp == sp && xray_tail_target(table, thread.ids[depth - 1].load(std::memory_order_relaxed), id)) {
            tail = true;
            break;
        }
        depth = xray_pop(thread, table);
    }
    if (depth == kXRayMaxFrames) return;
    thread.ids[depth].store(id, std::memory_order_relaxed);
    thread.frames[depth].sp = sp;
    thread.frames[depth].tail = false;
    thread.depth.store(depth + 1, std::memory_order_release);  // published before the state is read
    thread.tail_from.store(0, std::memory_order_release);  // this function is on the stack now, if it was the target
    xray_published(table);
    const std::uint8_t state = table.states[id].load(std::memory_order_relaxed);
    if (state != kXRayWanted) {  // still patched, for sessions that have ended: taken back
        thread.depth.store(depth, std::memory_order_relaxed);
        // A tail call's target: with no frame of its own, nothing keeps it patched until its exit,
        // which would close the frame that jumped to it. That frame ends here, as at a jump to a
        // function not patched.
        if (tail) xray_pop(thread, table);
        if (state == kXRayDraining) xray_sweep(false);
        return;
    }
    t_scope_entry_sp = sp;  // a stack session's walk starts above the handler's frames
    new (thread.frames[depth].scope) Scope(tail ? table.functions[id]->tail_site : table.functions[id]->site);
    t_scope_entry_sp = 0;
}

[[clang::xray_never_instrument]] inline void xray_exit(XRayThread& thread, const XRayTable& table, std::int32_t id,
                                                      std::uintptr_t sp) noexcept {
    thread.tail_from.store(0, std::memory_order_relaxed);  // a tail call's target, if any, has returned
    std::uint32_t depth = thread.depth.load(std::memory_order_relaxed);
    // Frames below this one, or at its stack pointer for another function, have returned without exit events.
    const auto returned = [&](std::uint32_t d) {
        return thread.frames[d - 1].sp < sp ||
               (thread.frames[d - 1].sp == sp && thread.ids[d - 1].load(std::memory_order_relaxed) != id);
    };
    while (depth > 0 && returned(depth)) depth = xray_pop(thread, table);
    // Else an exit whose entry was never seen: patched while it ran.
    if (depth > 0 && thread.frames[depth - 1].sp == sp) depth = xray_pop(thread, table);
    // The functions that tail-called it return with it.
    while (depth > 0 && thread.frames[depth - 1].sp == sp && thread.frames[depth - 1].tail) depth = xray_pop(thread, table);
}

// The function jumps to another (XRayEntryType::TAIL). When that may be one of the functions it
// jumps to directly, patched with it, its frame stays open: the target's entry comes next at the same
// stack pointer and runs under it, and both end at the target's exit. Otherwise (a jump through a
// pointer, or to a function never patched) its scope ends here, as its frame does on the machine.
[[clang::xray_never_instrument]] inline void xray_tail(XRayThread& thread, const XRayTable& table, std::int32_t id,
                                                      std::uintptr_t sp) noexcept {
    std::uint32_t depth = thread.depth.load(std::memory_order_relaxed);
    while (depth > 0 && (thread.frames[depth - 1].sp < sp ||
                         (thread.frames[depth - 1].sp == sp && thread.ids[depth - 1].load(std::memory_order_relaxed) != id)))
        depth = xray_pop(thread, table);
    if (depth == 0 || thread.frames[depth - 1].sp != sp || thread.ids[depth - 1].load(std::memory_order_relaxed) != id) return;
    const auto& targets = table.functions[id]->direct.tails;
    // Published before the targets' states are read, as an entry is before its own: a sweep after
    // the unpatching thread's barrier sees it and keeps them patched, or this reads them draining.
    thread.tail_from.store(id, std::memory_order_release);
    xray_published(table);
    const bool stays = std::any_of(targets.begin(), targets.end(), [&](std::int32_t target) {
        // Wanted: all its sleds are patched (xray_patch_wanted). Others are not XRay functions.
        return target <= table.max_id && table.states[target].load(std::memory_order_relaxed) == kXRayWanted;
    });
    if (stays) {
        thread.frames[depth - 1].tail = true;
    } else {
        thread.tail_from.store(0, std::memory_order_relaxed);
        xray_pop(thread, table);
    }
}

// ---- signal handlers ---------------------------------------------------------------------------------
// Recording is not async-signal-safe: a thread's first event joins it (allocations), a capture
// allocates. A signal that lands while the interrupted code holds the allocator's lock would hang the
// process in a patched handler for ever (seen on ccache's SIGTERM handler). So a function the kernel
// called as a handler is not recorded: its return address is the C library's signal return
// trampoline, which sigaction() reports on x86-64 glibc (every handler gets the same one). Only its
// own events are left out, with no state kept, so that nothing can leave a thread unrecorded after a
// handler left by siglongjmp, an exception or an unpatching; what it calls is recorded as usual.

inline std::atomic<std::uintptr_t> g_xray_sigreturn{0};
inline void xray_find_sigreturn() noexcept {  // at each change of sessions: a handler set since is seen then
#if defined(__x86_64__)
    if (g_xray_sigreturn.load(std::memory_order_relaxed) != 0) return;
    for (int number = 1; number < NSIG; ++number) {
        struct sigaction action {};
        if (sigaction(number, nullptr, &action) != 0 || action.sa_restorer == nullptr) continue;
        g_xray_sigreturn.store(reinterpret_cast<std::uintptr_t>(action.sa_restorer), std::memory_order_relaxed);
        return;
    }
#endif
}
// `sp`: the function's stack pointer at its entry, where its return address is.
[[clang::xray_never_instrument]] inline bool xray_signal_handler(std::uintptr_t sp) noexcept {
    const std::uintptr_t sigreturn = g_xray_sigreturn.load(std::memory_order_relaxed);
    return sigreturn != 0 && *reinterpret_cast<const std::uintptr_t*>(sp) == sigreturn;
}

[[clang::xray_never_instrument]] inline void xray_event(std::int32_t id, XRayEntryType type) noexcept {
    const auto cfa = reinterpret_cast<std::uintptr_t>(__builtin_dwarf_cfa());
    const XRayTable& table = g_xray_table;
    // An idle function's events come while a large set is patched all at once (every function is,
    // until the idle ones go back): dropped before the thread joins or publishes anything.
    if (id <= 0 || id > table.max_id || table.states[id].load(std::memory_order_relaxed) == kXRayIdle) return;
    // The function's stack pointer at its entry (where its return address is), from the trampoline's.
    const std::uintptr_t sp = cfa + (type == XRayEntryType::EXIT   ? table.exit_offset
                                     : type == XRayEntryType::TAIL ? table.tail_offset
                                                                   : table.entry_offset);
    if (xray_signal_handler(sp)) return;
    XRayThread* thread = xray_thread();
    if (thread == nullptr && (thread = xray_join()) == nullptr) return;
    if (thread->inside) return;
    thread->inside = true;
    switch (type) {
    case XRayEntryType::ENTRY:
    case XRayEntryType::LOG_ARGS_ENTRY: xray_enter(*thread, table, id, sp); break;
    case XRayEntryType::EXIT: xray_exit(*thread, table, id, sp); break;
    case XRayEntryType::TAIL: xray_tail(*thread, table, id, sp); break;
    default: break;
    }
    thread->inside = false;
}

// The unwinder has reached a frame whose stack pointer at its call was `sp` (what _Unwind_GetCFA
// returns, in libgcc and LLVM's libunwind alike: the CFA of the frame it called): every XRay frame
// that entered below it is gone. Their scopes end now, while the exception is in flight, so they
// count as throws, and before the frame's landing pad ends any annotated scope around them.
[[clang::xray_never_instrument]] inline void xray_unwound(std::uintptr_t sp) noexcept {
    XRayThread* thread = xray_thread();
    if (thread == nullptr || thread->inside || g_xray_table.max_id == 0) return;
    thread->inside = true;
    std::uint32_t depth = thread->depth.load(std::memory_order_relaxed);
    while (depth > 0 && thread->frames[depth - 1].sp < sp) depth = xray_pop(*thread, g_xray_table);
    thread->inside = false;
}

inline void xray_leave_thread(XRayThread* thread) noexcept {
    thread->inside = true;
    while (thread->depth.load(std::memory_order_relaxed) > 0) xray_pop(*thread, g_xray_table);
    XRayState& state = xray_state();
    {
        std::lock_guard<std::mutex> lock(state.threads_mutex);
        state.threads.erase(std::remove(state.threads.begin(), state.threads.end(), thread), state.threads.end());
    }
    xray_thread() = nullptr;
    xray_thread_exited() = true;
    delete thread;
}

// ---- installing -------------------------------------------------------------------------------------

// The calibration: a function that tail-calls another, both always instrumented. The target returns
// the stack pointer at its entry, which is also the probe's (a tail call reuses the frame).
[[clang::xray_always_instrument]] __attribute__((noinline)) inline std::uintptr_t xray_probe_target() {
    return reinterpret_cast<std::uintptr_t>(__builtin_dwarf_cfa()) - 8;  // the CFA is the sp before the call
}
[[clang::xray_always_instrument]] __attribute__((noinline)) inline std::uintptr_t xray_probe() {
    [[clang::musttail]] return xray_probe_target();
}
struct XRayCalibration {
    std::int32_t probe = 0, target = 0;
    std::uintptr_t entry = 0, exit = 0, tail = 0;  // the handler's CFA at each event
};
inline XRayCalibration g_xray_calibration;
[[clang::xray_never_instrument]] inline void xray_calibration_event(std::int32_t id, XRayEntryType type) noexcept {
    XRayCalibration& c = g_xray_calibration;
    const auto cfa = reinterpret_cast<std::uintptr_t>(__builtin_dwarf_cfa());
    if (id == c.target && type == XRayEntryType::ENTRY) c.entry = cfa;
    if (id == c.target && type == XRayEntryType::EXIT) c.exit = cfa;
    if (id == c.probe && type == XRayEntryType::TAIL) c.tail = cfa;
}

inline void xray_calibrate(XRayState& state, XRayTable& table) {
    XRayCalibration& c = g_xray_calibration;
    for (std::size_t id = 1; id < state.functions.size(); ++id) {
        const std::uintptr_t address = state.functions[id]->address;
        if (address == reinterpret_cast<std::uintptr_t>(&xray_probe)) c.probe = static_cast<std::int32_t>(id);
        if (address == reinterpret_cast<std::uintptr_t>(&xray_probe_target)) c.target = static_cast<std::int32_t>(id);
    }
    if (c.probe == 0 || c.target == 0)
        throw std::runtime_error("tracetree: XRay: the probe functions of tracetree/xray/xray.hpp have no sleds");
    __xray_set_handler(&xray_calibration_event);
    const bool patched = xray_patch(c.probe, true) && xray_patch(c.target, true);
    const std::uintptr_t sp = xray_probe();
    xray_patch(c.probe, false);
    xray_patch(c.target, false);
    __xray_remove_handler();
    const auto offset = [sp](std::uintptr_t cfa) { return cfa != 0 && cfa < sp && sp - cfa < 4096 ? sp - cfa : 0; };
    table.entry_offset = offset(c.entry);
    table.exit_offset = offset(c.exit);
    table.tail_offset = offset(c.tail);
    if (!patched || table.entry_offset == 0 || table.exit_offset == 0 || table.tail_offset == 0)
        throw std::runtime_error("tracetree: XRay: the calibration saw no events (is XRay's handler in use elsewhere?)");
}

// A child process has only the thread that forked: the others' stacks would hold their functions
// patched for ever. Its locks are taken around fork(), so that the child finds them free.
inline void xray_before_fork() {
    xray_state().mutex.lock();
    xray_state().threads_mutex.lock();
}
inline void xray_after_fork_in_parent() {
    xray_state().threads_mutex.unlock();
    xray_state().mutex.unlock();
}
inline void xray_after_fork_in_child() {
    XRayState& state = xray_state();
    XRayThread* const self = xray_thread();
    state.threads.erase(std::remove_if(state.threads.begin(), state.threads.end(),
                                       [self](const XRayThread* thread) { return thread != self; }),
                        state.threads.end());
    xray_after_fork_in_parent();
}

inline void xray_install_locked(XRayState& state) {
    if (state.installed) return;
    if (!state.error.empty()) throw std::runtime_error(state.error);
    try {
        const std::size_t max_id = __xray_max_function_id();
        if (max_id == 0 || max_id > 0x7FFFFFFF)
            throw std::runtime_error("tracetree: XRay: no instrumented functions (build with clang++ -fxray-instrument)");
        std::vector<std::uintptr_t> addresses(max_id);
        for (std::size_t id = 1; id <= max_id; ++id) addresses[id - 1] = __xray_function_address(static_cast<std::int32_t>(id));
        const FunctionSymbols symbols = function_symbols("/proc/self/exe", executable_bias(), addresses);
        if (std::all_of(symbols.names.begin(), symbols.names.end(), [](const std::string& name) { return name.empty(); }))
            throw std::runtime_error("tracetree: XRay: no function names: " +
                                     (symbols.error.empty() ? std::string("no symbol at any XRay function") : symbols.error));
        state.functions.assign(max_id + 1, nullptr);
        state.states.reset(new std::atomic<std::uint8_t>[max_id + 1]);
        state.open.assign(max_id + 1, 0);
        for (std::size_t id = 1; id <= max_id; ++id) {
            state.states[id].store(kXRayIdle);
            std::string signature = without_abi_tags(symbols.names[id - 1]);
            if (signature.empty()) {  // no symbol: named by its address
                char text[48];
                std::snprintf(text, sizeof text, "xray_function_%#llx", static_cast<unsigned long long>(addresses[id - 1]));
                signature = text;
            }
            state.functions[id] = new XRayFunction(std::move(signature), addresses[id - 1], symbols.sizes[id - 1],
                                                   symbols.annotated[id - 1]);
        }
        // The direct calls of each function, from its code as loaded (no sled is patched yet).
        std::vector<std::pair<std::uintptr_t, std::int32_t>>& starts = state.starts;
        for (std::size_t id = 1; id <= max_id; ++id) starts.emplace_back(addresses[id - 1], static_cast<std::int32_t>(id));
        std::sort(starts.begin(), starts.end());
        const std::vector<FunctionTable::Entry>& others = executable_functions().functions;
        for (std::size_t i = 0; i < others.size() && max_id + 1 + i <= 0x7FFFFFFF; ++i) {
            const auto xray = std::lower_bound(starts.begin(), starts.begin() + static_cast<std::ptrdiff_t>(max_id),
                                               std::make_pair(others[i].address, std::int32_t{0}));
            if (xray == starts.begin() + static_cast<std::ptrdiff_t>(max_id) || xray->first != others[i].address)
                starts.emplace_back(others[i].address, static_cast<std::int32_t>(max_id + 1 + i));
        }
        std::sort(starts.begin(), starts.end());
        for (std::size_t id = 1; id <= max_id; ++id) {
            XRayFunction& function = *state.functions[id];
            function.direct = direct_calls(reinterpret_cast<const unsigned char*>(function.address), function.size,
                                           function.address, starts);
        }
        XRayTable& table = g_xray_table;
        xray_calibrate(state, table);
        state.expedited = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
        table.fence = !state.expedited;
        table.functions = state.functions.data();
        table.states = state.states.get();
        table.max_id = static_cast<std::int32_t>(max_id);
        __xray_set_handler(&xray_event);
        state.installed = true;
    } catch (const std::exception& e) {
        state.error = e.what();
        throw;
    }
}

// While this thread holds the state's lock, its own XRay events are not recorded: they could end a
// scope, and through it a capture, that runs the listener which takes the lock again. (While a large
// set is patched all at once, the standard library's functions this thread calls are patched too.)
class XRayQuiet {
public:
    XRayQuiet() noexcept
        : thread_(xray_thread() != nullptr ? xray_thread() : xray_join()), was_(thread_ != nullptr && thread_->inside) {
        if (thread_ != nullptr) thread_->inside = true;
    }
    ~XRayQuiet() {
        if (thread_ != nullptr) thread_->inside = was_;
    }
    XRayQuiet(const XRayQuiet&) = delete;
    XRayQuiet& operator=(const XRayQuiet&) = delete;

private:
    XRayThread* const thread_;
    const bool was_;
};

// The id of the function holding `at` (starts' numbering), or 0.
inline std::int32_t xray_function_at(const XRayState& state, std::uintptr_t at) {
    const FunctionTable::Entry* function = executable_functions().find(at);
    if (function == nullptr) return 0;
    const auto found = std::lower_bound(state.starts.begin(), state.starts.end(), std::make_pair(function->address, std::int32_t{0}));
    return found != state.starts.end() && found->first == function->address ? found->second : 0;
}

// Which functions the running sessions want (state.wanted[id]): those their patterns match, and for a
// trace or flight recorder those reachable from them in `depth` direct calls (narrowed by set_callees).
// Annotated functions seen so far are part of the graph: a pattern may match one, and a path may pass
// through one (an annotated function calling one built with XRay); they are never patched themselves.
inline void xray_mark_wanted(XRayState& state, const std::vector<InstrumentedSession>& sessions) {
    const std::size_t count = state.functions.size();
    state.wanted.assign(count, 0);
    state.wanted_by.assign(count, std::string());
    const auto by = [&](std::size_t id, const InstrumentedSession& session) {
        std::string& text = state.wanted_by[id];
        if (!text.empty()) text += "; ";
        text += std::string(session.kind) + " '" + session.pattern->text() + "'";
        if (session.captures) text += " (depth " + std::to_string(session.depth) + ")";
    };
    std::vector<const DirectCalls*> graph(count + executable_functions().functions.size(), nullptr);
    for (std::size_t id = 1; id < count; ++id) graph[id] = &state.functions[id]->direct;
    std::vector<std::pair<std::string, std::int32_t>> annotated;  // (name, id) of each annotated scope seen
    for (const AnnotatedCode& code : annotated_code()) {
        const std::int32_t id = xray_function_at(state, code.at);
        if (id == 0) continue;  // not in the executable: XRay cannot patch what it calls either
        annotated.emplace_back(code.name, id);
        if (static_cast<std::size_t>(id) < count) continue;  // built with XRay too: its calls are read
        auto known = state.annotated.find(id);
        if (known == state.annotated.end()) {
            const FunctionTable::Entry& function = executable_functions().functions[static_cast<std::size_t>(id) - count];
            known = state.annotated
                        .emplace(id, direct_calls(reinterpret_cast<const unsigned char*>(function.address), function.size,
                                                  function.address, state.starts))
                        .first;
        }
        graph[static_cast<std::size_t>(id)] = &known->second;
    }
    std::vector<std::uint8_t> reached(graph.size()), matched(count);
    for (const auto& session : sessions) {
        std::vector<std::int32_t> roots;
        for (std::size_t id = 1; id < count; ++id) {
            matched[id] = session.pattern->matches(state.functions[id]->name);
            if (matched[id] == 0) continue;
            roots.push_back(static_cast<std::int32_t>(id));
            state.wanted[id] = 1;
            if (!session.captures) by(id, session);
        }
        if (!session.captures) continue;
        for (const auto& [name, id] : annotated)
            if (session.pattern->matches(name)) roots.push_back(id);
        if (roots.empty()) continue;
        std::fill(reached.begin(), reached.end(), std::uint8_t{0});
        reachable(graph, std::move(roots), session.depth, reached);
        for (std::size_t id = 1; id < count; ++id)
            if (reached[id] != 0 && (matched[id] != 0 || state.callees.matches(state.functions[id]->name))) {
                state.wanted[id] = 1;
                by(id, session);
            }
    }
}

// Patches what the running sessions want now; what they no longer want drains.
inline void xray_update_locked(XRayState& state) {
    xray_install_locked(state);
    xray_find_sigreturn();  // before anything is patched
    const std::vector<InstrumentedSession> sessions = instrumented_sessions();
    xray_mark_wanted(state, sessions);
    bool drained = false;
    std::vector<std::int32_t> to_patch;
    std::size_t idle = 0;
    for (std::size_t id = 1; id < state.functions.size(); ++id) {
        const XRayFunction& function = *state.functions[id];
        const bool wanted = function.patchable && state.wanted[id] != 0;
        std::atomic<std::uint8_t>& function_state = state.states[id];
        const std::uint8_t now = function_state.load();
        if (wanted && now == kXRayIdle) {
            to_patch.push_back(static_cast<std::int32_t>(id));
        } else if (wanted && now == kXRayDraining) {
            function_state.store(kXRayWanted);
        } else if (!wanted && now == kXRayWanted) {
            function_state.store(kXRayDraining);
            state.draining.push_back(static_cast<std::int32_t>(id));
            drained = true;
        } else if (!wanted && now == kXRayIdle) {
            ++idle;
        }
    }
    xray_patch_wanted(state, to_patch, idle);
    if (drained) {  // every thread sees the new states before the sweep reads their stacks
        if (state.expedited) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
        else std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    xray_sweep_locked(state);
}

inline void xray_update() {
    XRayState& state = xray_state();
    const XRayQuiet quiet;
    std::lock_guard<std::mutex> lock(state.mutex);
    xray_update_locked(state);
}

[[clang::xray_never_instrument]] inline void xray_sessions_changed(void*) noexcept {
    try {
        xray_update();
    } catch (const std::exception& e) {  // kept in the state's error, which status() reports
        // An XRay that cannot install (a control file built without the LTO mode of the rest) patches
        // nothing for any session: said once, rather than sessions that wait for ever in silence.
        static std::atomic<bool> said{false};
        if (!xray::status().installed && !said.exchange(true))
            std::fprintf(stderr, "%s: sessions see annotated scopes only (docs/xray.md)\n", e.what());
    } catch (...) {
    }
}

// Listening from the start; nothing is read or patched before the first session.
inline const bool g_xray_listening = [] {
    try {
        g_xray_in_program.store(true);
        g_xray_rows.store([](std::vector<XRayRow>& rows) {
            xray::install();
            for (xray::Function& function : xray::functions())
                rows.push_back(XRayRow{std::move(function.name), function.patchable, function.patched, std::move(function.wanted_by)});
        });
        listen_to_sessions(&xray_sessions_changed, nullptr);
        // From the start, not at the first install, which holds the state's lock (a fork() then would
        // leave the child that lock held); after the runtime's handlers, so that fork() takes these
        // locks first, as a session change does.
        pthread_atfork(&xray_before_fork, &xray_after_fork_in_parent, &xray_after_fork_in_child);
        if (!instrumented_sessions().empty()) xray_sessions_changed(nullptr);
        return true;
    } catch (...) {
        return false;
    }
}();

}  // namespace detail

// ---- the public functions ---------------------------------------------------------------------------

inline void xray::install() {
    detail::XRayState& state = detail::xray_state();
    const detail::XRayQuiet quiet;
    std::lock_guard<std::mutex> lock(state.mutex);
    detail::xray_install_locked(state);
}

inline xray::Status xray::status() noexcept {
    Status result;
    try {
        detail::XRayState& state = detail::xray_state();
        std::lock_guard<std::mutex> lock(state.mutex);
        result.installed = state.installed;
        result.error = state.error;
        result.functions = state.functions.empty() ? 0 : state.functions.size() - 1;
        for (const detail::XRayFunction* function : state.functions)
            if (function != nullptr && function->patchable) ++result.patchable;
        result.patched = state.functions.empty() ? 0 : state.functions.size() - 1 - detail::xray_count(state, detail::kXRayIdle);
        result.draining = state.draining.size();
    } catch (...) {  // out of memory copying the error
    }
    return result;
}

inline std::vector<xray::Function> xray::functions() {
    detail::XRayState& state = detail::xray_state();
    std::lock_guard<std::mutex> lock(state.mutex);
    std::vector<Function> result;
    for (std::size_t id = 1; id < state.functions.size(); ++id) {
        const detail::XRayFunction& function = *state.functions[id];
        Function f;
        f.id = static_cast<std::int32_t>(id);
        f.name = function.name + "()";
        f.address = function.address;
        f.patchable = function.patchable;
        f.patched = state.states[id].load() != detail::kXRayIdle;
        if (id < state.wanted_by.size() && f.patched) f.wanted_by = state.wanted_by[id];
        result.push_back(std::move(f));
    }
    return result;
}

inline void xray::set_callees(std::string_view pattern, PatternSyntax syntax) {
    Pattern callees(pattern, syntax);
    detail::XRayState& state = detail::xray_state();
    const detail::XRayQuiet quiet;
    std::lock_guard<std::mutex> lock(state.mutex);
    state.callees = std::move(callees);
    if (state.installed) detail::xray_update_locked(state);
}

TRACETREE_END_NAMESPACE

// ---- the personality routine ----------------------------------------------------------------------
// The unwinder calls a frame's personality routine before it runs the frame's landing pad (its
// destructors or its catch). This definition (exported, weak: one per program) lets the C++
// runtime's own decide, then closes the XRay frames the exception has left, before any annotated
// scope around them ends.
extern "C" __attribute__((used, visibility("default"), xray_never_instrument)) inline _Unwind_Reason_Code
__gxx_personality_v0(int version, _Unwind_Action actions, _Unwind_Exception_Class exception_class,
                     _Unwind_Exception* exception, _Unwind_Context* context) {
    using Personality = _Unwind_Reason_Code (*)(int, _Unwind_Action, _Unwind_Exception_Class, _Unwind_Exception*,
                                                _Unwind_Context*);
    static const Personality real = [] {
        void* next = dlsym(RTLD_NEXT, "__gxx_personality_v0");
        if (next == nullptr) {  // this copy is loaded before the C++ runtime: ask the runtime's own module
            Dl_info where{};
            if (dladdr(reinterpret_cast<void*>(&abi::__cxa_allocate_exception), &where) != 0)
                if (void* module = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) next = dlsym(module, "__gxx_personality_v0");
        }
        return reinterpret_cast<Personality>(next);
    }();
    if (real == nullptr) return _URC_FATAL_PHASE1_ERROR;  // std::terminate, as for any broken unwind
    const _Unwind_Reason_Code result = real(version, actions, exception_class, exception, context);
    if ((actions & _UA_CLEANUP_PHASE) != 0) ::tracetree::detail::xray_unwound(_Unwind_GetCFA(context));
    return result;
}

#endif  // TRACETREE_XRAY_XRAY_HPP
