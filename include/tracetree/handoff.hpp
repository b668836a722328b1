// tracetree hand-offs: work that crosses threads, recorded under its logical parent. SPDX-License-Identifier: MIT
//
//   auto here = tracetree::here();                         // on the thread that hands the work off
//   pool.post([here] { tracetree::Continue on(here); work(); });
//   pool.post(tracetree::wrap(here, [] { work(); }));      // the same, for an executor
//
// The worker records `work()` in its own tree under the path that was open where here() was taken
// (those nodes say `[continued]`: the calls were counted on the thread that made them), beside a
// `[queued]` node that holds the time from here() to Continue: the wait in the queue. A Here is plain
// data: copy it, drop it unused, use it after the thread that took it has exited. At most 8 levels
// of the path are kept (the outermost ones). A Continue is a scope: it must end on the thread that
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

// The path of open scopes on the thread that took it, and when.
class Here {
public:
    Here() = default;  // continues nothing
    Here(const Here& other) noexcept : path_(other.path_) { detail::retain(path_.hold); }
    Here(Here&& other) noexcept : path_(other.path_) { other.path_ = {}; }  // the moved-from continues nothing
    Here& operator=(const Here& other) noexcept {
        detail::retain(other.path_.hold);
        detail::release(path_.hold);
        path_ = other.path_;
        return *this;
    }
    Here& operator=(Here&& other) noexcept {
        if (this != &other) {
            detail::release(path_.hold);
            path_ = other.path_;
            other.path_ = {};
        }
        return *this;
    }
    ~Here() { detail::release(path_.hold); }  // the last one unspent lets the trace it was taken in go
    bool empty() const noexcept { return !path_.valid; }

private:
    friend Here here() noexcept;
    friend Here here(ForMany) noexcept;
    friend class Continue;
    friend class Resumed;  // coroutine.hpp
    detail::HandoffPath path_;
};

// Where this thread is now; empty while not recording.
inline Here here() noexcept {
    Here result;
    if (detail::Arena* arena = detail::recording_arena()) arena->recorder->capture_here(*arena, result.path_);
    return result;
}

// A Here for several Continues: the trace it was taken in waits until its last copy is gone.
inline Here here(ForMany) noexcept {
    Here result = here();
    if (result.path_.hold != nullptr) result.path_.hold->many = true;  // not shared yet
    return result;
}

// Until its end, what this thread records goes under `here`'s path, after a `[queued]` node.
class Continue {
public:
    explicit Continue(const Here& here) noexcept {
        if (here.empty()) return;
        if (detail::Arena* arena = detail::recording_arena())
            if (!arena->recorder->continue_at(*arena, here.path_, saved_)) saved_.arena = nullptr;
    }
    ~Continue() {
        if (saved_.arena != nullptr) saved_.arena->recorder->end_continue(saved_);
    }
    Continue(const Continue&) = delete;
    Continue& operator=(const Continue&) = delete;

private:
    detail::Continuation saved_;
};

// `task`, to run on another thread as if where `here` was taken: for executors and thread pools.
template <class Task>
auto wrap(const Here& here, Task&& task) {
    return [here, task = std::decay_t<Task>(std::forward<Task>(task))](auto&&... arguments) mutable -> decltype(auto) {
        Continue on(here);
        return task(std::forward<decltype(arguments)>(arguments)...);
    };
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_DISABLE

#endif  // TRACETREE_HANDOFF_HPP
