// What instrumentation that patches code on demand (xray/) may ask of the runtime, and all of it: to
// hear when the set of running sessions changes, what those sessions watch, and to drop a scope
// that the tree has moved past. SPDX-License-Identifier: MIT
//
// Declarations only: the definitions are compiled where the runtime is (runtime/control-inl.hpp).
#ifndef TRACETREE_RUNTIME_INSTRUMENTATION_HPP
#define TRACETREE_RUNTIME_INSTRUMENTATION_HPP

#include "../matcher.hpp"
#include "linkage.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// A running session, as instrumentation sees it.
struct InstrumentedSession {
    std::shared_ptr<const Pattern> pattern;  // which scopes it watches; kept alive with the session
    bool captures = false;                   // a trace or flight recorder: what those scopes call counts too
    int depth = 0;                           // captures: how many direct calls below them are patched
    const char* kind = "";                   // "trace", "stack", "watch", "monitor", "recorder": for views
};

// Set by instrumentation while it starts a scope of its own (xray.hpp): the canonical frame address of
// the function the scope stands for. A stack session's walk of the machine stack starts there
// (runtime/stack.hpp); 0 for annotated scopes, whose own address marks it.
inline thread_local std::uintptr_t t_scope_entry_sp = 0;

using SessionsChanged = void (*)(void* context);

// `changed` runs on the thread that started or stopped a session, after the set changed.
void listen_to_sessions(SessionsChanged changed, void* context);
void stop_listening_to_sessions(SessionsChanged changed, void* context);
std::vector<InstrumentedSession> instrumented_sessions();
// The annotated scopes called so far, each with an address inside the function that holds it: what
// that function calls directly is reachable from it, so that a trace rooted at an annotated scope, or
// passing through annotated functions, patches what lies below them. A scope first called while a
// trace or flight recorder runs makes the listeners run, on its thread, before its body does.
struct AnnotatedCode {
    std::string name;  // as patterns see it
    std::uintptr_t at = 0;
};
std::vector<AnnotatedCode> annotated_code();

// A scope whose node is no longer the innermost one cannot end in place: it is forgotten, and the
// depth it held on the fast path is given back.
void forget_if_moved_past(Scope& scope) noexcept;

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_INSTRUMENTATION_HPP
