// tracetree control, defined: control.hpp's functions over the runtime. SPDX-License-Identifier: MIT
//
// Included at the end of control.hpp, never on its own. First, how the process's recorder is found or
// started: every control function, and every file that includes control.hpp, asks for it.
#ifndef TRACETREE_RUNTIME_CONTROL_INL_HPP
#define TRACETREE_RUNTIME_CONTROL_INL_HPP

#include "instrumentation.hpp"
#include "runtime.hpp"
#include "throw_hook.hpp"

#include <algorithm>  // std::find_if
#include <cstdio>     // stderr: where TRACETREE_ADMIN's listener says where it listens
#include <mutex>
#include <stdexcept>  // std::runtime_error: a copy that runs no recorder says why
#include <string>
#include <string_view>
#include <string.h>   // strdup: the reason a copy runs no recorder, kept

TRACETREE_BEGIN_NAMESPACE
class AdminServer;
namespace detail {
namespace admin {
// TRACETREE_ADMIN's listener, defined where admin/server.hpp is compiled: in the tracetree-runtime
// library, or in a header-only copy one of whose files includes it. The runtime includes nothing of
// the listener, so a copy without it has a null address here and says so (start_listener_or_say()).
TRACETREE_DETAIL_OPTIONAL_PART AdminServer* start_listener(const char* setting, std::FILE* messages);

inline void start_listener_or_say(const char* setting) {
    if (&start_listener != nullptr) {
        start_listener(setting, stderr);
        return;
    }
    std::fputs("tracetree: TRACETREE_ADMIN is set, but this program has no admin listener: link tracetree::runtime "
               "(tracetree-runtime), or include <tracetree/admin/server.hpp> in one of its files (docs/admin.md)\n",
               stderr);
}
}  // namespace admin

// ---- starting the recorder ----------------------------------------------------------------------

// Why this copy runs no recorder (empty: it may), said once on stderr. Asked first when the copy is
// loaded (g_runtime_started, below), so that no thread waits on the guard of this static later (nor a
// child forked while another thread held it). Nothing is allocated for a copy that may record: a
// plugin unloaded would leave it behind.
TRACETREE_DETAIL_LOCAL inline const char* refused() {
    static const char* const why = [] {
        const std::string reason = foreign_namespace();
        if (reason.empty()) return "";
        std::fprintf(stderr, "%s\n", reason.c_str());
        return static_cast<const char*>(strdup(reason.c_str()));  // never freed: static destructors may still ask
    }();
    return why;
}

// The process's recorder: found, or started by this copy. Copies that start at once (plugins loaded
// by two threads) each make one; settle_recorder() keeps exactly one, the others are deleted.
TRACETREE_DETAIL_COLD TRACETREE_DETAIL_RUNTIME_API RuntimeImpl& runtime() {
    const auto as_runtime = [](Recorder* recorder) -> RuntimeImpl& { return *static_cast<RuntimeImpl*>(recorder); };
    if (Recorder* found = find_recorder()) return as_runtime(found);
    // A copy in a dlmopen() namespace runs no recorder (process.hpp, foreign_namespace()): its scopes
    // find none and record nothing, so no lock of its own can be held across the program's fork().
    if (*refused() != '\0') throw std::runtime_error(refused());
    static std::atomic<pid_t> starting{0};  // threads start one at a time (process.hpp), no guard variable
    const StartLock lock(starting);
    if (Recorder* found = find_recorder()) return as_runtime(found);
    // The throw hook's probe runs before the recorder is published: recorder_info() never reads a
    // field being written.
    auto* fresh = new RuntimeImpl(check_throw_hook());
    auto* chosen = static_cast<Recorder*>(settle_recorder(static_cast<Recorder*>(fresh)));
    if (chosen != fresh) {
        delete fresh;
        return as_runtime(chosen);
    }
    fresh->started();
    // TRACETREE_ADMIN, read when the recorder was made: the copy that started it starts the listener,
    // once per process. A listener that cannot start says why and the recorder runs on without it.
    if (!fresh->admin_setting().empty()) {
        try {
            admin::start_listener_or_say(fresh->admin_setting().c_str());
        } catch (...) {
        }
    }
    return *fresh;
}

// Files that control tracing start the recorder before main, so that it records from the start.
TRACETREE_DETAIL_LOCAL inline const bool g_runtime_started = [] {
    try {
        // In every copy, also one that finds the recorder started. A copy that refuses throws nothing
        // here: in a statically linked executable, a throw from a plugin faults.
        if (*refused() != '\0') return false;
        runtime();
        return true;
    } catch (...) {  // tried again at the first call of a control function, which then reports it
        return false;
    }
}();

}  // namespace detail

TRACETREE_DETAIL_RUNTIME_API void set_enabled(bool on) noexcept {
    try {
        detail::runtime().set_flag(detail::kRecording, on);
    } catch (...) {
    }
}
TRACETREE_DETAIL_RUNTIME_API bool enabled() noexcept {
    try {
        return detail::runtime().enabled();
    } catch (...) {
        return false;
    }
}
TRACETREE_DETAIL_RUNTIME_API void set_limits(const Limits& limits) { detail::runtime().set_limits(limits); }
TRACETREE_DETAIL_RUNTIME_API Limits limits() { return detail::runtime().limits(); }

TRACETREE_DETAIL_RUNTIME_API void set_thread_name(std::string_view name) {
    detail::ThreadState* state = detail::runtime().this_thread();
    if (state == nullptr) return;
    const std::string cut(name.substr(0, state->arena.max_name_length.load(std::memory_order_relaxed)));
    std::lock_guard<std::mutex> lock(state->mutex);
    state->name = cut;
    state->named = true;
}

TRACETREE_DETAIL_RUNTIME_API void annotate(std::string_view key, std::string_view value) {
    detail::ThreadState* state = detail::runtime().this_thread();
    if (state == nullptr) return;
    const std::size_t cut = state->arena.max_name_length.load(std::memory_order_relaxed);
    const std::string k(key.substr(0, cut));
    auto& fields = state->annotations;  // owner only
    auto same = std::find_if(fields.begin(), fields.end(), [&](const auto& field) { return field.first == k; });
    if (value.empty()) {
        if (same != fields.end()) fields.erase(same);
    } else if (same != fields.end()) {
        same->second = std::string(value.substr(0, cut));
    } else if (fields.size() < 64) {  // a bound against keys made from data
        fields.emplace_back(k, std::string(value.substr(0, cut)));
    }
}
TRACETREE_DETAIL_RUNTIME_API void clear_annotations() {
    if (detail::ThreadState* state = detail::runtime().this_thread()) state->annotations.clear();
}

TRACETREE_DETAIL_RUNTIME_API void set_clock(ClockFunction now) noexcept {
    try {
        detail::runtime().set_clock(now);
    } catch (...) {
    }
}

TRACETREE_DETAIL_RUNTIME_API RecorderInfo recorder_info() {
    if (*detail::refused() == '\0') return detail::runtime().info();
    RecorderInfo info;  // this copy's own: no recorder, no hook, nothing exported
    info.version = std::to_string(TRACETREE_VERSION_MAJOR) + "." + std::to_string(TRACETREE_VERSION_MINOR) + "." +
                   std::to_string(TRACETREE_VERSION_PATCH);
    info.module = detail::module_of(reinterpret_cast<void*>(&detail::refused));
    info.throw_hook_note = info.refused = detail::refused();
    return info;
}
TRACETREE_DETAIL_RUNTIME_API Profile profile() { return detail::runtime().profile(); }
TRACETREE_DETAIL_RUNTIME_API std::vector<std::string> scope_names() { return detail::runtime().scope_names(); }
TRACETREE_DETAIL_RUNTIME_API void reset() { detail::runtime().reset(); }

TRACETREE_DETAIL_RUNTIME_API void start_timeline(std::size_t max_spans_per_thread) { detail::runtime().start_timeline(max_spans_per_thread); }
TRACETREE_DETAIL_RUNTIME_API void stop_timeline() noexcept {
    try {
        detail::runtime().stop_timeline();
    } catch (...) {
    }
}
TRACETREE_DETAIL_RUNTIME_API Timeline timeline() { return detail::runtime().timeline(); }

namespace detail {

// ---- instrumentation.hpp: what xray/ asks of the runtime ------------------------------------------

TRACETREE_DETAIL_RUNTIME_API void listen_to_sessions(SessionsChanged changed, void* context) { runtime().listen(changed, context); }
TRACETREE_DETAIL_RUNTIME_API void stop_listening_to_sessions(SessionsChanged changed, void* context) {
    runtime().unlisten(changed, context);
}
TRACETREE_DETAIL_RUNTIME_API std::vector<InstrumentedSession> instrumented_sessions() {
    std::vector<InstrumentedSession> sessions;
    for (std::shared_ptr<const SessionState>& session : runtime().running_sessions())
        sessions.push_back({std::shared_ptr<const Pattern>(session, &session->pattern), session->captures(), session->depth,
                            session_kind_name(session->kind)});
    return sessions;
}
TRACETREE_DETAIL_RUNTIME_API std::vector<AnnotatedCode> annotated_code() { return runtime().annotated_code(); }
TRACETREE_DETAIL_RUNTIME_API void forget_if_moved_past(Scope& scope) noexcept { RuntimeImpl::forget_if_moved_past(scope); }

}  // namespace detail

TRACETREE_END_NAMESPACE

#if defined(TRACETREE_RUNTIME_IMPLEMENTATION)
extern "C" {
char TRACETREE_DETAIL_RUNTIME_LINK_CHECK = 0;  // what files with TRACETREE_SEPARATE_RUNTIME link to (control.hpp)
}
#endif

#endif  // TRACETREE_RUNTIME_CONTROL_INL_HPP
