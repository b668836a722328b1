// tracetree coroutines: scopes held across co_await, recorded where the coroutine was started.
// SPDX-License-Identifier: MIT
//
//   tracetree::Coroutine place;                          // where a chain of coroutines is started
//   { tracetree::Resumed on(place); handle.resume(); }   // in the scheduler: each run, on any thread
//
//   task<void> fetch() {
//       TRACETREE_CO_SCOPE("fetch");   // a scope that may end on another thread
//       co_await socket.read();        // the time suspended is a `[suspended]` node under `fetch`
//   }
//
// A Coroutine is the place in the tree of one chain of coroutines that suspend and resume together
// (a task and the tasks it awaits; an Asio co_spawn, see asio.hpp): the path open where it was made,
// as here() takes it, and the chain's co-scopes open now. A Resumed around each resumption enters
// that place on the thread that resumes it (from the root of that thread's tree, like a Continue: a
// `[queued]` node holds the time before the first run, a `[suspended]` node each wait after) and,
// when the coroutine suspends again, puts the thread back. A resumption may start on another thread
// before the end of the one before has run there. A Resumed of a Coroutine this thread already runs
// (resumed inline from its own code) does nothing. A Coroutine must outlive each Resumed of it: keep
// it beside the chain's first handle, not in a frame that destroys itself at its end.
//
// Inside a coroutine, a scope that is open across a co_await must be a TRACETREE_CO_SCOPE (or a
// TRACETREE_CO_FUNCTION): it keeps nothing of the thread it started on, and counts the call at its
// end where the coroutine runs then. Sessions see it as a plain scope: a trace records each of its
// coroutine's resumptions from it on, on whichever thread, and delivers one tree once it and the work
// handed off from it have ended; stack, watch and monitor sessions get its end, with its wall time
// (watch: with the TRACETREE_WATCH values said directly in it, in any resumption, for one watched
// co-scope per place at a time). A trace starts only where the Resumed's coroutine runs its own code
// (at its place or in its co-scopes, not inside a plain scope: a task resumed from there without a
// Resumed of its own records its co-scope untraced). A plain TRACETREE_SCOPE open across a co_await
// is not supported: it would end on another thread's tree. A co-scope that ends outside its coroutine's
// resumption (a frame destroyed elsewhere, a coroutine resumed without a Resumed) counts as a dropped
// call and touches nothing else.
//
// With TRACETREE_DISABLE the names exist and do nothing, and the macros compile to nothing.
#ifndef TRACETREE_COROUTINE_HPP
#define TRACETREE_COROUTINE_HPP

#include "handoff.hpp"
#include "tracetree.hpp"

#ifdef TRACETREE_DISABLE

#define TRACETREE_CO_SCOPE(name) static_cast<void>(0)
#define TRACETREE_CO_FUNCTION() static_cast<void>(0)

namespace tracetree {
inline namespace coroutine_disabled {
class Coroutine {
public:
    Coroutine() noexcept = default;
    explicit Coroutine(const Here&) noexcept {}
    Coroutine(const Coroutine&) = delete;
    Coroutine& operator=(const Coroutine&) = delete;
};
class Resumed {
public:
    explicit Resumed(Coroutine&) noexcept {}
    Resumed(const Resumed&) = delete;
    Resumed& operator=(const Resumed&) = delete;
};
}  // namespace coroutine_disabled
}  // namespace tracetree

#else

#define TRACETREE_CO_SCOPE(name) TRACETREE_DETAIL_CO_SCOPE(TRACETREE_DETAIL_ID, "" name, scope)
#define TRACETREE_CO_FUNCTION() TRACETREE_DETAIL_CO_SCOPE(TRACETREE_DETAIL_ID, TRACETREE_DETAIL_SIGNATURE, function)

#define TRACETREE_DETAIL_CO_SCOPE(id, text, kind)                                                     \
    static ::tracetree::detail::Site TRACETREE_DETAIL_CAT(tracetree_site_, id){                        \
        text, __FILE__, __LINE__, ::tracetree::detail::SiteKind::kind};                                \
    ::tracetree::detail::CoScope TRACETREE_DETAIL_CAT(tracetree_scope_, id) {                          \
        TRACETREE_DETAIL_CAT(tracetree_site_, id)                                                      \
    }

TRACETREE_BEGIN_NAMESPACE

// Where a chain of coroutines is in the tree, between its resumptions.
class Coroutine {
public:
    Coroutine() noexcept : origin_(here()) {}
    explicit Coroutine(Here origin) noexcept : origin_(static_cast<Here&&>(origin)) {}
    Coroutine(const Coroutine&) = delete;
    Coroutine& operator=(const Coroutine&) = delete;

private:
    friend class Resumed;
    Here origin_;
    detail::CoroutineState state_;
};

// Until its end, this thread records at `coroutine`'s place; at its end the coroutine's open scopes
// are kept for its next resumption.
class Resumed {
public:
    explicit Resumed(Coroutine& coroutine) noexcept {
        detail::Arena* arena = detail::tls_arena();
        if (arena == nullptr && (arena = detail::join_thread()) == nullptr) return;
        if (!arena->recorder->resume(*arena, coroutine.origin_.path(), coroutine.state_, saved_)) saved_.arena = nullptr;
    }
    ~Resumed() {
        if (saved_.arena != nullptr) saved_.arena->recorder->suspend(saved_);
    }
    Resumed(const Resumed&) = delete;
    Resumed& operator=(const Resumed&) = delete;

private:
    detail::Resumption saved_;
};

namespace detail {

// TRACETREE_CO_SCOPE: both ends are calls into the runtime, which looks for the scope's node where
// the coroutine runs at its end.
class CoScope {
public:
    explicit CoScope(Site& site) noexcept {
        if (Arena* arena = recording_arena()) arena->recorder->enter_suspendable(*arena, &site, scope_);
    }
    ~CoScope() {
        if (scope_.entered == nullptr) return;
        Arena* arena = tls_arena();
        if (arena != nullptr || (arena = join_thread()) != nullptr) arena->recorder->leave_suspendable(*arena, scope_);
    }
    CoScope(const CoScope&) = delete;
    CoScope& operator=(const CoScope&) = delete;

private:
    SuspendableScope scope_;
};

}  // namespace detail

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_DISABLE

#endif  // TRACETREE_COROUTINE_HPP
