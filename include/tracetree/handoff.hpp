// tracetree hand-offs: work that crosses threads, recorded under its logical parent. SPDX-License-Identifier: MIT
//
//   auto here = tracetree::here();                         // on the thread that hands the work off
//   pool.post([here] { tracetree::Continue on(here); work(); });
//   pool.post(tracetree::wrap(here, [] { work(); }));      // the same, for an executor
//
// The worker records `work()` in its own tree under the path that was open where here() was taken
// (those nodes say `[continued]`: the calls were counted on the thread that made them), beside a
// `[queued]` node that holds the time from here() to Continue: the wait in the queue. A Here is one
// counted pointer to the runtime's record of the path (pooled, so here() allocates nothing once warm):
// copy it, drop it unused, use it after the thread that took it has exited. At most 8 levels of the
// path are kept (the outermost ones). wrap()'s result with a task of one pointer fits std::function's
// own buffer (libstdc++'s 16 bytes, libc++'s 24): such a hand-off allocates nothing. A lambda that
// captures a Here fits libc++'s too, not libstdc++'s (which keeps only what may be moved as bytes). A Continue is a scope: it must end on the thread that
// made it, after the scopes opened inside it, and not inside a scope a trace session captures or
// another trace's continued work (there the work is recorded where it runs). A Here taken inside a
// trace's capture, or inside work continued from one (any number of hops), holds that trace back
// until it is spent: once a Continue of it (of any copy) has ended, or when its last copy is gone. A
// Here for several Continues says so, here(for_many): only its last copy lets the trace go. The last
// hold let go delivers the trace, on that thread, to the sessions' on_trace callbacks. In the trace,
// a call's time is its wall time; the work it handed off is shown under it as Node::parallel.
//
// With TRACETREE_DISABLE this header defines the same names in an inline namespace of their own,
// which do nothing; a Here from such a file cannot reach a file that records (a link error, not a
// silent mismatch).
#ifndef TRACETREE_HANDOFF_HPP
#define TRACETREE_HANDOFF_HPP

#include <type_traits>  // std::decay_t
#include <utility>      // std::forward, std::move

#ifdef TRACETREE_DISABLE

namespace tracetree {
inline namespace handoff_disabled {
struct Here {};
struct ForMany {};
inline constexpr ForMany for_many{};
inline Here here() noexcept { return {}; }
inline Here here(ForMany) noexcept { return {}; }
class Continue {
public:
    explicit Continue(const Here&) noexcept {}
    Continue(const Continue&) = delete;
    Continue& operator=(const Continue&) = delete;
};
template <class Task>
std::decay_t<Task> wrap(const Here&, Task&& task) {
    return std::forward<Task>(task);
}
}  // namespace handoff_disabled
}  // namespace tracetree

#else

#include "core/handoff.hpp"

TRACETREE_BEGIN_NAMESPACE

class Resumed;
struct ForMany {};
inline constexpr ForMany for_many{};  // here(for_many): a Here continued more than once

// The path of open scopes on the thread that took it, and when: a counted pointer to the runtime's
// record of it (null while not recording), so that a task carrying one fits std::function's buffer.
class Here {
public:
    Here() = default;  // continues nothing
    Here(const Here& other) noexcept : record_(other.record_) { detail::retain(record_); }
    Here(Here&& other) noexcept : record_(other.record_) { other.record_ = nullptr; }  // the moved-from continues nothing
    Here& operator=(const Here& other) noexcept {
        detail::retain(other.record_);
        detail::release(record_);
        record_ = other.record_;
        return *this;
    }
    Here& operator=(Here&& other) noexcept {
        if (this != &other) {
            detail::release(record_);
            record_ = other.record_;
            other.record_ = nullptr;
        }
        return *this;
    }
    ~Here() { detail::release(record_); }  // the last one unspent lets the trace it was taken in go
    bool empty() const noexcept { return record_ == nullptr; }

private:
    friend Here here() noexcept;
    friend Here here(ForMany) noexcept;
    friend class Continue;
    friend class Resumed;  // coroutine.hpp
    const detail::HandoffPath& path() const noexcept { return record_ != nullptr ? record_->path : detail::kNoPath; }
    detail::HandoffRecord* record_ = nullptr;
};

// Where this thread is now; empty while not recording.
inline Here here() noexcept {
    Here result;
    if (detail::Arena* arena = detail::recording_arena()) result.record_ = arena->recorder->capture_here(*arena);
    return result;
}

// A Here for several Continues: the trace it was taken in waits until its last copy is gone.
inline Here here(ForMany) noexcept {
    Here result = here();
    if (!result.empty() && result.record_->path.hold != nullptr) result.record_->path.hold->many = true;  // not shared yet
    return result;
}

// Until its end, what this thread records goes under `here`'s path, after a `[queued]` node.
class Continue {
public:
    explicit Continue(const Here& here) noexcept {
        if (here.empty()) return;
        if (detail::Arena* arena = detail::recording_arena())
            if (!arena->recorder->continue_at(*arena, here.path(), saved_)) saved_.arena = nullptr;
    }
    ~Continue() {
        if (saved_.arena != nullptr) saved_.arena->recorder->end_continue(saved_);
    }
    Continue(const Continue&) = delete;
    Continue& operator=(const Continue&) = delete;

private:
    detail::Continuation saved_;
};

namespace detail {
// wrap()'s task: a class rather than a lambda, so that libstdc++ may be told it moves as bytes (below).
template <class Task>
class Wrapped {
public:
    template <class From>
    Wrapped(Here&& here, From&& task) : here_(std::move(here)), task_(std::forward<From>(task)) {}
    template <class... Arguments>
    decltype(auto) operator()(Arguments&&... arguments) {
        Continue on(here_);
        return task_(std::forward<Arguments>(arguments)...);
    }

private:
    Here here_;
    Task task_;
};
}  // namespace detail

// `task`, to run on another thread as if where `here` was taken: for executors and thread pools.
// (`here` by value: wrap(here(), task) moves it, no count to change.)
template <class Task>
detail::Wrapped<std::decay_t<Task>> wrap(Here here, Task&& task) {
    return {std::move(here), std::forward<Task>(task)};
}

TRACETREE_END_NAMESPACE

#ifdef __GLIBCXX__
// libstdc++'s std::function keeps a callable in its own 16 bytes only if it may be moved as bytes:
// trivially copyable, or said so by this trait, which libstdc++ leaves to its users to specialize. A
// Here may (a counted pointer, its address kept nowhere), so a wrapped task may if its task may: a
// hand-off through std::function then allocates nothing. Declared with libstdc++'s own namespace macros.
namespace std _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION
template <typename>
struct __is_location_invariant;
template <class Task>
struct __is_location_invariant<::tracetree::detail::Wrapped<Task>> : __is_location_invariant<Task> {};
_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace std
#endif

#endif  // TRACETREE_DISABLE

#endif  // TRACETREE_HANDOFF_HPP
