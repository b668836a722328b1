// tracetree for standalone Asio's coroutines: each co_spawn keeps its own place in the tree.
// SPDX-License-Identifier: MIT
//
//   asio::awaitable<void> session(asio::ip::tcp::socket socket) {
//       TRACETREE_CO_SCOPE("session");        // open across co_await: a co-scope (coroutine.hpp)
//       co_await socket.async_read_some(...);  // the wait is a `[suspended]` node under `session`
//   }
//   asio::co_spawn(tracetree::traced(socket.get_executor()), session(std::move(socket)), asio::detached);
//
// Asio's awaitable frames take no foreign awaitables, so this hooks the executor instead: every
// resumption of an asio coroutine (co_spawn's start, each completion of an operation it awaits) runs
// through the executor it was spawned on. traced() wraps that executor in a TracedExecutor, which
// runs each of them inside a tracetree::Resumed of one Coroutine made by traced(), where it is called.
// The coroutine's type stays asio::awaitable<T>: its any_io_executor holds the TracedExecutor.
//
// Pass traced() the executor the coroutine is to run on: the io_context's, a strand, or inside a
// traced coroutine `co_await asio::this_coro::executor` or an I/O object's get_executor(). Those are
// the spawning coroutine's TracedExecutor, and a child needs a place of its own: traced() unwraps a
// TracedExecutor, also inside an any_io_executor when it wraps an io_context's executor, an
// any_io_executor or a strand of either (what traced() makes). Another wrapped type is not found in
// an any_io_executor (its target type is not known here): pass its inner executor yourself. So for a
// strand: make it of the io_context's executor (asio::make_strand(context)), not of a traced one,
// whose resumptions would be recorded as the spawning coroutine's too.
//
// The adapter itself is C++17: a handler posted through it runs at its place too. Asio's coroutines
// need C++20; Asio 1.22 finds them in g++ only (clang++ 14 with libstdc++: -DASIO_HAS_CO_AWAIT
// -DASIO_HAS_STD_COROUTINE, and -fno-sanitize=function under UBSan, whose code for awaitables clang
// 14 cannot assemble). With TRACETREE_DISABLE the adapter still runs the work, unrecorded.
//
// A coroutine destroyed before it ends (its io_context destroyed while it waits) ends its co-scopes
// outside any resumption: each is a dropped call, as coroutine.hpp says. Asio's awaitable operators
// (`co_await (a() && b())`) and experimental::parallel_group spawn their operands on the awaiting
// coroutine's executor: they share its place, and their co-scopes nest under one another's when they
// interleave.
#ifndef TRACETREE_ASIO_HPP
#define TRACETREE_ASIO_HPP

#include "coroutine.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/execution.hpp>
#include <asio/io_context.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>
#include <asio/require.hpp>
#include <asio/strand.hpp>
#include <asio/version.hpp>

#include <memory>
#include <type_traits>
#include <typeinfo>
#include <utility>

// With TRACETREE_DISABLE the same names in an inline namespace of their own (as handoff.hpp does): a
// program may mix files built with and without it.
#ifdef TRACETREE_DISABLE
namespace tracetree {
inline namespace asio_disabled {
#else
TRACETREE_BEGIN_NAMESPACE
#endif

// An executor that runs each function given to it inside a Resumed of its place.
template <typename Inner>
class TracedExecutor {
public:
    TracedExecutor(Inner inner, std::shared_ptr<Coroutine> place) noexcept
        : inner_(std::move(inner)), place_(std::move(place)) {}

    const Inner& inner() const noexcept { return inner_; }
    const std::shared_ptr<Coroutine>& place() const noexcept { return place_; }

    // The function holds the place: a Coroutine outlives each Resumed of it, and asio may run the
    // last resumption after the spawning code and every other copy of this executor are gone.
    template <typename Function>
    void execute(Function&& function) const {
        auto resumed = [place = place_, function = std::forward<Function>(function)]() mutable {
            Resumed on(*place);
            std::move(function)();
        };
#if ASIO_VERSION >= 102600  // Asio 1.26 made the member the way in and deprecated execution::execute
        inner_.execute(std::move(resumed));
#else  // before, io_context's executor kept its execute() to execution::execute
        asio::execution::execute(inner_, std::move(resumed));
#endif
    }

    // Properties are the inner executor's; one required or preferred keeps the place: asio prefers
    // blocking.possibly and outstanding_work.tracked for each completion, and requires blocking.never
    // to post, of the executor it was given.
    template <typename Property,
              typename = std::enable_if_t<asio::can_query<const Inner&, const Property&>::value>>
    decltype(auto) query(const Property& property) const
        noexcept(asio::is_nothrow_query<const Inner&, const Property&>::value) {
        return asio::query(inner_, property);
    }
    template <typename Property,
              typename = std::enable_if_t<asio::can_require<const Inner&, const Property&>::value>>
    auto require(const Property& property) const {
        return wrap(asio::require(inner_, property));
    }
    template <typename Property,
              typename = std::enable_if_t<asio::can_prefer<const Inner&, const Property&>::value>>
    auto prefer(const Property& property) const {
        return wrap(asio::prefer(inner_, property));
    }

    friend bool operator==(const TracedExecutor& a, const TracedExecutor& b) noexcept {
        return a.inner_ == b.inner_ && a.place_ == b.place_;
    }
    friend bool operator!=(const TracedExecutor& a, const TracedExecutor& b) noexcept { return !(a == b); }

private:
    template <typename Other>
    TracedExecutor<std::decay_t<Other>> wrap(Other&& other) const {
        return TracedExecutor<std::decay_t<Other>>(std::forward<Other>(other), place_);
    }

    Inner inner_;
    std::shared_ptr<Coroutine> place_;
};

namespace detail {

// `executor`'s inner executor if it holds a TracedExecutor of one of `Inners`, else itself.
template <typename... Inners>
asio::any_io_executor untraced(const asio::any_io_executor& executor) {
    asio::any_io_executor found = executor;
#if !defined(ASIO_NO_TYPEID)  // without it nothing tells the target's type: nothing is unwrapped
    // Asio 1.22's target<T>() casts whatever it holds to T: the type is compared first. The first
    // of `Inners` that matches sets `found`.
    static_cast<void>((... || [&] {
        if (executor.target_type() != typeid(TracedExecutor<Inners>)) return false;
        found = executor.template target<TracedExecutor<Inners>>()->inner();
        return true;
    }()));
#endif
    return found;
}

}  // namespace detail

// An executor for one co_spawn: the spawned coroutine's place is here, where traced() is called.
template <typename Executor>
TracedExecutor<Executor> traced(const Executor& executor) {
    return TracedExecutor<Executor>(executor, std::make_shared<Coroutine>());
}
template <typename Inner>
TracedExecutor<Inner> traced(const TracedExecutor<Inner>& executor) {
    return traced(executor.inner());
}
inline TracedExecutor<asio::any_io_executor> traced(const asio::any_io_executor& executor) {
    using Context = asio::io_context::executor_type;
    return TracedExecutor<asio::any_io_executor>(
        detail::untraced<Context, asio::any_io_executor, asio::strand<Context>, asio::strand<asio::any_io_executor>>(executor),
        std::make_shared<Coroutine>());
}

#ifdef TRACETREE_DISABLE
}  // namespace asio_disabled
}  // namespace tracetree
#else
TRACETREE_END_NAMESPACE
#endif

#endif  // TRACETREE_ASIO_HPP
