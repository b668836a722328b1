// tracetree clock: ticks as nanoseconds. SPDX-License-Identifier: MIT
//
// Scopes count ticks (recorder.hpp's ticks(): the x86-64 or aarch64 counter where there is one); they become
// nanoseconds only when something is read out, against a ratio measured as the process runs. A test
// may replace the clock (set_clock): its readings are nanoseconds already.
#ifndef TRACETREE_RUNTIME_CLOCK_HPP
#define TRACETREE_RUNTIME_CLOCK_HPP

#include "../core/recorder.hpp"
#include "../values.hpp"  // Nanos, ClockFunction

#include <atomic>
#include <chrono>
#include <cstdint>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

inline std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline Nanos to_nanos(std::uint64_t tick_count, double ratio) noexcept {
    const double ns = static_cast<double>(tick_count) * ratio + 0.5;  // a clock that stepped back gives ~2^64
    return ns >= 9.2e18 ? Nanos::max() : Nanos(static_cast<std::int64_t>(ns));
}

class Clock {
public:
    Clock() : anchor_tick_(ticks()), anchor_ns_(steady_ns()) {}

    // Measured between the anchor and now, so it sharpens as the process runs; remeasured at most every
    // 2^28 ticks (about 0.1 s), which keeps a clock read off every capture's end.
    double ns_per_tick() const noexcept {
        if (test_.load(std::memory_order_relaxed) != nullptr) return 1.0;
#if defined(TRACETREE_DETAIL_COUNTER)
#if defined(__aarch64__)  // the counter's frequency is known (measured only where the firmware left it 0)
        if (const std::uint64_t hz = counter_frequency()) return 1e9 / static_cast<double>(hz);
#endif
        const std::uint64_t now_tick = ticks();
        if (now_tick - ratio_tick_.load(std::memory_order_relaxed) < (std::uint64_t{1} << 28))
            return ratio_.load(std::memory_order_relaxed);
        for (;;) {  // a window under 1 ms would make the ratio coarse: that only happens right at start-up
            const std::uint64_t tick = ticks();
            const std::int64_t ns = steady_ns();
            if (ns - anchor_ns_ >= 1000000 && tick > anchor_tick_) {
                const double ratio = static_cast<double>(ns - anchor_ns_) / static_cast<double>(tick - anchor_tick_);
                ratio_.store(ratio, std::memory_order_relaxed);
                ratio_tick_.store(tick, std::memory_order_relaxed);
                return ratio;
            }
        }
#else
        return 1.0;
#endif
    }

    // `fake`: the scope started on the test clock (it may have been removed since).
    std::uint64_t now(bool fake) const noexcept {
        if (fake) {
            const ClockFunction clock = test_.load(std::memory_order_relaxed);
            return clock != nullptr ? clock() : 0;
        }
        return ticks();
    }

    void set_test(ClockFunction clock) noexcept { test_.store(clock); }
    bool is_test(std::memory_order order = std::memory_order_seq_cst) const noexcept { return test_.load(order) != nullptr; }

    // The tick a timeline counts from: the anchor; with the test clock, its own zero.
    std::uint64_t origin_tick() const noexcept { return is_test() ? 0 : anchor_tick_; }
    // Nanoseconds since the anchor, on the steady clock.
    Nanos since_anchor() const noexcept { return Nanos(steady_ns() - anchor_ns_); }

private:
    const std::uint64_t anchor_tick_;  // ticks become nanoseconds against this, at snapshot time
    const std::int64_t anchor_ns_;
    mutable std::atomic<double> ratio_{1.0};  // ns_per_tick(), as last measured
    mutable std::atomic<std::uint64_t> ratio_tick_{0};
    std::atomic<ClockFunction> test_{nullptr};
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_CLOCK_HPP
