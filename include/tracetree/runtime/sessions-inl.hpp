// tracetree sessions, defined: sessions.hpp's classes over the runtime. SPDX-License-Identifier: MIT
//
// Included at the end of sessions.hpp, never on its own.
#ifndef TRACETREE_RUNTIME_SESSIONS_INL_HPP
#define TRACETREE_RUNTIME_SESSIONS_INL_HPP

#include "control-inl.hpp"  // runtime(): the recorder, found or started
#include "runtime.hpp"

#include <algorithm>  // std::max
#include <chrono>
#include <iterator>   // std::make_move_iterator
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>  // std::invalid_argument for bad requests
#include <string>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

namespace detail {

inline void check_depth(int depth) {
    if (depth < 0 || depth > kMaxCallDepth)
        throw std::invalid_argument("tracetree: depth must be between 0 and " + std::to_string(kMaxCallDepth) + ", asked " +
                                    std::to_string(depth));
}
inline void check_limit(std::uint64_t limit, Nanos min_cost) {
    if (limit > 1000000)
        throw std::invalid_argument("tracetree: limit must be between 1 and 1000000 (0: until stopped), got " +
                                    std::to_string(limit));
    if (min_cost < Nanos(0)) throw std::invalid_argument("tracetree: min_cost must not be negative");
}

// Makes, configures and registers a session of `kind` for `request`.
template <class Request, class Configure>
std::shared_ptr<SessionState> start(SessionKind kind, const Request& request, Configure configure) {
    RuntimeImpl& recorder = runtime();
    std::shared_ptr<SessionState> state = recorder.make_session(kind, request.pattern(), request.syntax());
    configure(*state);
    recorder.start_session(state);
    return state;
}

inline void stop(SessionState& state) {
    runtime().stop_session(state);
    std::unique_lock<std::mutex> lock(state.mutex);
    state.stopped = true;
    state.changed.notify_all();
    // A callback still running may use what the caller is about to destroy; from inside the callback
    // itself, waiting would never end.
    const std::uint32_t own = callback_session() == &state ? 1 : 0;
    state.changed.wait(lock, [&] { return state.callbacks_running <= own; });
}

}  // namespace detail

template <class Value>
Session<Value>& Session<Value>::operator=(Session&& other) noexcept {
    if (this != &other) {
        stop();
        state_ = std::move(other.state_);
    }
    return *this;
}

template <class Value>
Session<Value>::~Session() {
    if (!state_) return;
    stop();
    std::lock_guard<std::mutex> lock(state_->mutex);  // a thread may still hold the state: free what it queued
    state_->queue<Value>().clear();
}

template <class Value>
void Session<Value>::stop() {
    if (state_) detail::stop(*state_);
}

template <class Value>
std::optional<Value> Session<Value>::next(Nanos timeout) {
    if (!state_) return std::nullopt;
    detail::SessionState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mutex);
    auto& queue = s.queue<Value>();
    s.changed.wait_for(lock, timeout, [&] { return !queue.empty() || s.stopped || s.delivered >= s.limit; });
    if (queue.empty()) return std::nullopt;
    Value value = std::move(queue.front());
    queue.pop_front();
    return value;
}

template <class Value>
std::vector<Value> Session<Value>::collect(Nanos timeout) {
    if (!state_) return {};
    detail::SessionState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mutex);
    s.changed.wait_for(lock, timeout, [&] { return s.stopped || s.delivered >= s.limit; });
    auto& queue = s.queue<Value>();
    std::vector<Value> values(std::make_move_iterator(queue.begin()), std::make_move_iterator(queue.end()));
    queue.clear();
    return values;
}

template <class Value>
std::uint64_t Session<Value>::captured() const {
    if (!state_) return 0;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->delivered;
}

template <class Value>
bool Session<Value>::done() const {
    if (!state_) return true;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->stopped || state_->delivered >= state_->limit;
}

TRACETREE_DETAIL_RUNTIME_API TraceSession::TraceSession(const TraceRequest& request) {
    detail::check_limit(request.limit(), request.min_cost());
    detail::check_depth(request.depth());
    state_ = detail::start(detail::SessionKind::trace, request, [&](detail::SessionState& s) {
        s.depth = request.depth();
        s.min_cost = request.min_cost();
        s.limit = request.limit() == 0 ? ~std::uint64_t{0} : request.limit();
        s.on_trace = request.on_trace();
        s.with_values = request.with_values();
    });
}

TRACETREE_DETAIL_RUNTIME_API StackSession::StackSession(const StackRequest& request) {
    detail::check_limit(request.limit(), request.min_cost());
    state_ = detail::start(detail::SessionKind::stack, request, [&](detail::SessionState& s) {
        s.min_cost = request.min_cost();
        s.limit = request.limit() == 0 ? ~std::uint64_t{0} : request.limit();
    });
}

TRACETREE_DETAIL_RUNTIME_API WatchSession::WatchSession(const WatchRequest& request) {
    detail::check_limit(request.limit(), request.min_cost());
    state_ = detail::start(detail::SessionKind::watch, request, [&](detail::SessionState& s) {
        s.min_cost = request.min_cost();
        s.limit = request.limit() == 0 ? ~std::uint64_t{0} : request.limit();
        s.value_names = request.values();
    });
}

TRACETREE_DETAIL_RUNTIME_API Monitor::Monitor(const MonitorRequest& request) {
    if (request.interval() < std::chrono::milliseconds(1) || request.interval() > std::chrono::hours(24))
        throw std::invalid_argument("tracetree: a monitor's interval must be between 1 ms and 24 h");
    state_ = detail::start(detail::SessionKind::monitor, request, [&](detail::SessionState& s) {
        s.interval = request.interval();
        s.limit = ~std::uint64_t{0};
    });
}
TRACETREE_DETAIL_RUNTIME_API Monitor& Monitor::operator=(Monitor&& other) noexcept {
    if (this != &other) {
        stop();
        state_ = std::move(other.state_);
    }
    return *this;
}
TRACETREE_DETAIL_RUNTIME_API Monitor::~Monitor() { stop(); }

namespace detail {
// The calls counted in `slot`'s cells since the interval began, taken: the cells start again.
inline MonitorInterval take_interval(SessionState& s, int slot) {
    MonitorInterval interval;
    interval.start = s.interval_wall_start;
    interval.end = std::chrono::system_clock::now();
    s.interval_start = std::chrono::steady_clock::now();
    s.interval_wall_start = interval.end;
    if (slot < 0) return interval;
    const double ratio = runtime().ns_per_tick();
    for (const SiteInfo* info : s.monitored) {
        const InternedSite& site = interned(info);
        MonitorCells* cells = site.monitors.load(std::memory_order_acquire);
        if (cells == nullptr) continue;
        MonitorCell& cell = cells->cells[slot];
        if (cell.owner.load() != &s) continue;  // not claimed for it (monitor_site() claims before it lists)
        MonitorRow row;
        row.calls = cell.calls.exchange(0, std::memory_order_relaxed);
        row.failed = cell.failed.exchange(0, std::memory_order_relaxed);
        row.total = to_nanos(cell.total.exchange(0, std::memory_order_relaxed), ratio);
        const std::uint64_t min = cell.min.exchange(~std::uint64_t{0}, std::memory_order_relaxed);
        const std::uint64_t max = cell.max.exchange(0, std::memory_order_relaxed);
        if (row.calls == 0) continue;
        row.min = to_nanos(min, ratio);
        row.max = std::max(row.min, to_nanos(max, ratio));
        row.name = site.name;
        row.file = site.file;
        row.line = site.line;
        interval.rows.push_back(std::move(row));
    }
    return interval;
}
}  // namespace detail

// The interval under way is taken, cut short, for next(): calls counted before a program's exit or a
// cancelled request are not lost. Taken while the slot is still this monitor's (no other can take
// over its cells meanwhile); a call that ends as it stops may miss it.
TRACETREE_DETAIL_RUNTIME_API void Monitor::stop() {
    if (!state_) return;
    detail::SessionState& s = *state_;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!s.stopped && !s.cut_short) {
            s.cut_short = true;  // next() gives what is taken here, then nothing
            try {
                MonitorInterval last = detail::take_interval(s, s.slot.load(std::memory_order_relaxed));
                last.cut_short = true;
                if (!last.rows.empty()) s.last_interval = std::move(last);
            } catch (...) {  // out of memory: the interval under way is lost, the monitor still stops
            }
        }
    }
    s.changed.notify_all();
    detail::stop(s);
}

TRACETREE_DETAIL_RUNTIME_API std::optional<MonitorInterval> Monitor::next() {
    if (!state_) return std::nullopt;
    detail::SessionState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mutex);
    const auto end = s.interval_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(s.interval);
    s.changed.wait_until(lock, end, [&] { return s.stopped || s.cut_short; });
    if (s.stopped || s.cut_short) return std::exchange(s.last_interval, std::nullopt);
    return detail::take_interval(s, s.slot.load(std::memory_order_relaxed));
}

TRACETREE_DETAIL_RUNTIME_API FlightRecorder::FlightRecorder(const RecorderRequest& request) {
    if (request.keep() < 1 || request.keep() > 100000)
        throw std::invalid_argument("tracetree: a flight recorder keeps between 1 and 100000 traces, asked " +
                                    std::to_string(request.keep()));
    if (request.max_bytes() < 4096) throw std::invalid_argument("tracetree: a flight recorder's max_bytes must be at least 4096");
    detail::check_limit(1, request.min_cost());
    detail::check_depth(request.depth());
    state_ = detail::start(detail::SessionKind::recorder, request, [&](detail::SessionState& s) {
        s.depth = request.depth();
        s.min_cost = request.min_cost();
        s.limit = ~std::uint64_t{0};
        s.keep = request.keep();
        s.max_bytes = request.max_bytes();
    });
}
TRACETREE_DETAIL_RUNTIME_API FlightRecorder& FlightRecorder::operator=(FlightRecorder&& other) noexcept {
    if (this != &other) {
        stop();
        state_ = std::move(other.state_);
    }
    return *this;
}
TRACETREE_DETAIL_RUNTIME_API FlightRecorder::~FlightRecorder() {
    if (!state_) return;
    stop();
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->traces.clear();
}
TRACETREE_DETAIL_RUNTIME_API void FlightRecorder::stop() {
    if (state_) detail::stop(*state_);
}
TRACETREE_DETAIL_RUNTIME_API std::vector<Trace> FlightRecorder::recent() const {
    if (!state_) return {};
    std::lock_guard<std::mutex> lock(state_->mutex);
    return std::vector<Trace>(state_->traces.begin(), state_->traces.end());
}
TRACETREE_DETAIL_RUNTIME_API std::uint64_t FlightRecorder::recorded() const {
    if (!state_) return 0;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->delivered;
}
TRACETREE_DETAIL_RUNTIME_API std::uint64_t FlightRecorder::evicted() const {
    if (!state_) return 0;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->evicted;
}

#if defined(TRACETREE_RUNTIME_IMPLEMENTATION)
template class Session<Trace>;
template class Session<StackTrace>;
template class Session<WatchEvent>;
#endif

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_SESSIONS_INL_HPP
