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
#include <limits>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

inline std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline Nanos to_nanos(std::uint64_t tick_count, double ratio) noexcept {
    const double ns = static_cast<double>(tick_count) * ratio + 0.5;  // a clock that stepped back gives ~2^64
    return ns >= 9.2e18 ? Nanos::max() : Nanos(static_cast<std::int64_t>(ns));
}

// A tick and the steady clock's nanoseconds of one moment: the tick read between two clock reads that
// lie close together. Read beside a single clock read, a tick took whatever fell between the two (a
// preemption, or the clock's first call binding its symbol) for time that did not pass: against such
// an anchor, traces in a program's first 0.1 s read 7% short, and 5 times short after a preemption.
struct TickAndNanos {
    std::uint64_t tick = 0;
    std::int64_t ns = 0;     // the middle of the two clock reads
    std::int64_t error = 0;  // half their distance: how far `ns` may lie from the tick's moment
};
template <class TickReader, class NanosReader>
TickAndNanos read_together(TickReader read_tick, NanosReader read_ns) noexcept {
    TickAndNanos best;
    best.error = std::numeric_limits<std::int64_t>::max();
    for (int attempt = 0; attempt < 8 && best.error > 250; ++attempt) {
        const std::int64_t before = read_ns();
        const std::uint64_t tick = read_tick();
        const std::int64_t error = (read_ns() - before + 1) / 2;
        if (error < best.error) best = TickAndNanos{tick, before + error, error};
    }
    return best;
}
// Whether the ticks between two readings give a ratio sharp enough: over 1 ms at least, and over a
// thousand times the readings' errors (within 0.1%), waited for until 10 ms have passed.
inline bool sharp_enough(const TickAndNanos& anchor, const TickAndNanos& now) noexcept {
    const std::int64_t window = now.ns - anchor.ns;
    if (now.tick <= anchor.tick || window < 1000000) return false;
    return window >= 10000000 || window / 1000 >= anchor.error + now.error;
}

class Clock {
public:
    Clock() : anchor_(read_together(ticks, steady_ns)) {}

    // Measured between the anchor and now, so it sharpens as the process runs; remeasured at most every
    // 2^28 ticks (about 0.1 s), which keeps a clock read off every capture's end.
    double ns_per_tick() const noexcept {
        if (test_.load(std::memory_order_relaxed) != nullptr) return 1.0;
#if defined(TRACETREE_DETAIL_COUNTER)
#if defined(__aarch64__)  // the counter's frequency is known (measured only where the firmware left it 0)
        if (const std::uint64_t hz = counter_frequency()) return 1e9 / static_cast<double>(hz);
#endif
        // Acquire: the ratio stored before this tick, never the 1.0 it started as (3 times too long).
        const std::uint64_t measured_at = ratio_tick_.load(std::memory_order_acquire);
        if (measured_at != 0 && ticks() - measured_at < (std::uint64_t{1} << 28)) return ratio_.load(std::memory_order_relaxed);
        for (;;) {  // a window too short would make the ratio coarse: that only happens right at start-up
            const TickAndNanos now = read_together(ticks, steady_ns);
            if (sharp_enough(anchor_, now)) {
                const double ratio = static_cast<double>(now.ns - anchor_.ns) / static_cast<double>(now.tick - anchor_.tick);
                ratio_.store(ratio, std::memory_order_relaxed);
                ratio_tick_.store(now.tick, std::memory_order_release);
                return ratio;
            }
            // 10 ms on, the counter has not passed the anchor (it stepped back: a resume, a migration):
            // the last ratio stays rather than a wait for the counter.
            if (now.ns - anchor_.ns >= 10000000) return ratio_.load(std::memory_order_relaxed);
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
    std::uint64_t origin_tick() const noexcept { return is_test() ? 0 : anchor_.tick; }
    // Nanoseconds since the anchor, on the steady clock.
    Nanos since_anchor() const noexcept { return Nanos(steady_ns() - anchor_.ns); }

private:
    const TickAndNanos anchor_;  // ticks become nanoseconds against this, at snapshot time
    mutable std::atomic<double> ratio_{1.0};  // ns_per_tick(), as last measured
    mutable std::atomic<std::uint64_t> ratio_tick_{0};  // the tick ratio_ was measured at; 0: never
    std::atomic<ClockFunction> test_{nullptr};
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_CLOCK_HPP
