// tracetree session registry: the running sessions, which sites they watch, and delivery to them.
// SPDX-License-Identifier: MIT
//
// At most 32 sessions run at once, each in a slot. Every change to the set starts a new epoch; a site
// decides once per epoch which slots watch it (SiteInfo::watch), and a thread copies the sessions once
// per epoch, so that a watched scope takes no lock to find them.
#ifndef TRACETREE_RUNTIME_SESSION_REGISTRY_HPP
#define TRACETREE_RUNTIME_SESSION_REGISTRY_HPP

#include "sites.hpp"
#include "../matcher.hpp"
#include "../values.hpp"

#include <algorithm>           // std::find, std::remove, std::any_of
#include <iterator>            // std::begin
#include <atomic>
#include <chrono>
#include <condition_variable>  // sessions: next() waits for a capture
#include <cstdint>
#include <deque>               // queued values of a session
#include <functional>          // a trace session's callback
#include <memory>
#include <mutex>
#include <new>                 // a forked child's condition variables, made anew
#include <optional>            // a monitor's last interval
#include <stdexcept>           // std::invalid_argument: too many sessions
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

enum class SessionKind : std::uint8_t { trace, stack, watch, monitor, recorder };
inline const char* session_kind_name(SessionKind kind) noexcept {
    static const char* const names[] = {"trace", "stack", "watch", "monitor", "recorder"};
    return names[static_cast<int>(kind)];
}

struct SessionState {
    SessionState(SessionKind kind_, const std::string& pattern_text, PatternSyntax syntax)
        : kind(kind_), pattern(pattern_text, syntax) {}
    const SessionKind kind;
    const Pattern pattern;
    // Set by the session's constructor before the session is registered; read-only afterwards.
    Nanos min_cost{0};
    std::uint64_t limit = 1;
    std::function<void(const Trace&)> on_trace;
    bool with_values = false;
    std::vector<std::string> value_names;  // watch: only these (empty: all)
    std::size_t keep = 0, max_bytes = 0;   // recorder
    Nanos interval{0};                     // monitor
    int depth = kDefaultCallDepth;         // trace, recorder: XRay functions patched below a matching one

    std::atomic<std::uint64_t> reserved{0};
    std::atomic<int> slot{-1};  // written under the registry's lock; monitors read it while counting

    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Trace> traces;
    std::deque<StackTrace> stacks;
    std::deque<WatchEvent> watches;
    std::deque<std::size_t> trace_bytes;  // recorder: the estimated size of each kept trace
    std::size_t bytes = 0;
    std::uint64_t delivered = 0, evicted = 0;
    std::vector<const SiteInfo*> monitored;  // monitor: the sites it watches
    std::chrono::steady_clock::time_point interval_start;
    std::chrono::system_clock::time_point interval_wall_start;
    std::optional<MonitorInterval> last_interval;  // monitor: the one stop() cut short, until next() takes it
    bool cut_short = false;                        // monitor: stop() took the interval under way
    std::uint32_t callbacks_running = 0;  // stop() waits for them: the callback may use the caller's stack
    bool stopped = false;

    template <class Value>
    std::deque<Value>& queue() {
        if constexpr (std::is_same<Value, Trace>::value) return traces;
        else if constexpr (std::is_same<Value, StackTrace>::value) return stacks;
        else return watches;
    }
    bool captures() const noexcept { return kind == SessionKind::trace || kind == SessionKind::recorder; }
};

inline constexpr int kMaxSessions = 32;
using SessionSlots = std::shared_ptr<SessionState>[kMaxSessions];

// A monitored site's calls in the current interval, one cell per session slot. Many threads add to it.
struct MonitorCell {
    std::atomic<const SessionState*> owner{nullptr};
    std::atomic<std::uint64_t> calls{0}, failed{0}, total{0}, min{~std::uint64_t{0}}, max{0};
};
struct MonitorCells {
    MonitorCell cells[kMaxSessions];
};

inline const SessionState*& callback_session() noexcept {  // whose callback this thread is running
    static thread_local const SessionState* session = nullptr;
    return session;
}

class SessionRegistry {
public:
    // A session kept in the list of those alive, running or not: a thread may still deliver to one
    // that was stopped, so fork() takes every alive session's lock, not only the running ones'. Weak
    // references: a session's last owner may let it go under any lock, and takes none for it.
    std::shared_ptr<SessionState> make(SessionKind kind, const std::string& pattern, PatternSyntax syntax) {
        auto session = std::make_shared<SessionState>(kind, pattern, syntax);
        std::lock_guard<std::mutex> lock(alive_mutex_);
        alive_.erase(std::remove_if(alive_.begin(), alive_.end(), [](const auto& alive) { return alive.expired(); }),
                     alive_.end());
        alive_.push_back(session);
        held_.reserve(alive_.size());  // fork() holds them without allocating (or skips them, out of memory)
        return session;
    }

    // Registers `session` in a free slot and starts a new epoch; std::invalid_argument when all are taken.
    void start(const std::shared_ptr<SessionState>& session) {
        std::lock_guard<std::mutex> lock(mutex_);
        int free = 0;
        while (free < kMaxSessions && slots_[free]) ++free;
        if (free == kMaxSessions) throw std::invalid_argument("tracetree: too many sessions (at most 32 at once)");
        slots_[free] = session;
        session->slot.store(free, std::memory_order_relaxed);
        session->interval_start = std::chrono::steady_clock::now();
        session->interval_wall_start = std::chrono::system_clock::now();
        changed_locked(+1);
    }
    // False when `session` was not running.
    bool stop(SessionState& session) {
        std::lock_guard<std::mutex> lock(mutex_);
        const int slot = session.slot.load(std::memory_order_relaxed);
        if (slot < 0 || slots_[slot].get() != &session) return false;
        slots_[slot].reset();
        session.slot.store(-1, std::memory_order_relaxed);
        changed_locked(-1);
        return true;
    }
    std::vector<std::shared_ptr<const SessionState>> running() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<std::shared_ptr<const SessionState>> result;
        for (const auto& session : slots_)
            if (session) result.push_back(session);
        return result;
    }
    // What a thread's arena mirrors: whether any session runs, and the epoch, read without the lock.
    bool any() const noexcept { return running_.load(std::memory_order_acquire) != 0; }
    std::uint32_t epoch() const noexcept { return epoch_seen_.load(std::memory_order_acquire); }

    // The sessions watching `site`, decided once per site and session epoch. `epoch` receives the
    // epoch the mask belongs to: a slot may be reused by another session later.
    std::uint32_t watch_mask(const SiteInfo& site, std::uint32_t& epoch) noexcept {
        const std::uint64_t cached = site.watch.load(std::memory_order_acquire);
        epoch = WatchWord::epoch(cached);
        if (epoch == epoch_seen_.load(std::memory_order_acquire)) return WatchWord::mask(cached);
        return decide_watch(site, epoch);
    }

    // The sessions of `epoch` into a thread's own slots, and which of them capture; false when the
    // sessions have changed since.
    bool copy(std::uint32_t epoch, SessionSlots& into, std::uint32_t& capture_mask) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        if (epoch_ != epoch) return false;  // decided for sessions that are gone: not this call
        capture_mask = 0;
        for (int i = 0; i < kMaxSessions; ++i) {
            into[i] = slots_[i];
            if (slots_[i] && slots_[i]->captures()) capture_mask |= 1u << i;
        }
        return true;
    }

    // For instrumentation that patches code on demand (xray/xray.hpp): called, on the thread that started
    // or stopped a session, after the set of sessions changed; running() says what it is now.
    using Listener = void (*)(void* context);
    void listen(Listener listener, void* context) {
        std::lock_guard<std::mutex> notifying(notify_mutex_);
        std::lock_guard<std::mutex> lock(listeners_mutex_);
        listeners_.emplace_back(listener, context);
        listened_.store(true, std::memory_order_relaxed);
    }
    bool listened() const noexcept { return listened_.load(std::memory_order_relaxed); }
    // Whether a trace or flight recorder runs.
    bool capturing() {
        std::lock_guard<std::mutex> lock(mutex_);
        return std::any_of(std::begin(slots_), std::end(slots_), [](const auto& session) { return session && session->captures(); });
    }
    void unlisten(Listener listener, void* context) {
        std::lock_guard<std::mutex> notifying(notify_mutex_);
        std::lock_guard<std::mutex> lock(listeners_mutex_);
        listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), std::make_pair(listener, context)),
                         listeners_.end());
    }
    void notify_listeners() {
        // Serialised, so that a listener sees the changes in the order they happened, by a lock that
        // fork() does not take: a listener waits for locks of its own, which a fork handler registered
        // after the runtime's (xray.hpp's, so run before it) may hold while it waits for this registry's.
        // The list changes only under both locks, so this one is enough to read it.
        std::lock_guard<std::mutex> lock(notify_mutex_);
        for (const auto& listener : listeners_) listener.first(listener.second);
    }

    // fork(): the listeners' list first (kept whole in the child), then the registry's, then
    // every alive session's (a delivery holds one only to queue or count, never while taking another).
    void lock() noexcept {
        listeners_mutex_.lock();
        mutex_.lock();
        alive_mutex_.lock();
        for (const auto& alive : alive_) {
            std::shared_ptr<SessionState> session = alive.lock();
            if (!session || held_.size() == held_.capacity()) continue;  // never: make() reserved room
            session->mutex.lock();
            held_.push_back(std::move(session));
        }
    }
    // In the child only this thread is left: no one waits on a session's condition variable (whose
    // state a waiter in the parent may have left half-changed), and no callback runs but this thread's.
    void unlock_after_fork(bool child) noexcept {
        for (const auto& session : held_) {
            if (child) {  // not destroyed: that would wait for the parent's waiters
                new (&session->changed) std::condition_variable();
                session->callbacks_running = callback_session() == session.get() ? 1 : 0;
            }
            session->mutex.unlock();
        }
        alive_mutex_.unlock();
        mutex_.unlock();
        listeners_mutex_.unlock();
        // A thread of the parent may have held it, telling the listeners of a change: gone here, and
        // with it that notice (the child's XRay patches match its sessions again at the next change).
        if (child) new (&notify_mutex_) std::mutex();
    }
    // Last, when every lock of the recorder is free again: a session let go here runs its callback's
    // destructor, which is the program's code.
    void forget_held() noexcept {
        std::vector<std::shared_ptr<SessionState>> let_go;
        {
            std::lock_guard<std::mutex> lock(alive_mutex_);
            let_go.swap(held_);
            try {
                held_.reserve(let_go.capacity());
            } catch (...) {  // out of memory: make() reserves again
            }
        }
    }

private:
    void changed_locked(int running) noexcept {
        running_.fetch_add(static_cast<std::uint32_t>(running), std::memory_order_release);
        if (++epoch_ == 0) ++epoch_;  // 0: never decided
        epoch_seen_.store(epoch_, std::memory_order_release);
    }

    TRACETREE_DETAIL_COLD std::uint32_t decide_watch(const SiteInfo& site, std::uint32_t& epoch) noexcept {
        SessionSlots watching;
        try {
            std::lock_guard<std::mutex> lock(mutex_);
            epoch = epoch_;
            std::copy(std::begin(slots_), std::end(slots_), std::begin(watching));
        } catch (...) {
            return 0;
        }
        // Matched outside the lock. The matcher's time is linear in the name (matcher.hpp).
        std::uint32_t mask = 0;
        for (int i = 0; i < kMaxSessions; ++i) {
            if (!watching[i] || !watching[i]->pattern.matches(interned(&site).match_name)) continue;
            mask |= 1u << i;
            if (watching[i]->kind == SessionKind::monitor) {
                try {
                    monitor_site(*watching[i], site);
                } catch (...) {  // out of memory: the monitor does not see this site
                    mask &= ~(1u << i);
                }
            }
        }
        const_cast<SiteInfo&>(site).watch.store(WatchWord::make(epoch, mask), std::memory_order_release);
        return mask;
    }

    // A monitor that matched `site`: its cell is made (or taken over from a session that had the slot
    // before) and the site is added to what the monitor reports.
    static void monitor_site(SessionState& session, const SiteInfo& site) {
        auto& holder = const_cast<InternedSite&>(interned(&site)).monitors;
        MonitorCells* cells = holder.load(std::memory_order_acquire);
        if (cells == nullptr) {
            auto made = std::make_unique<MonitorCells>();
            if (holder.compare_exchange_strong(cells, made.get(), std::memory_order_acq_rel)) cells = made.release();
        }
        std::lock_guard<std::mutex> lock(session.mutex);
        const int slot = session.slot.load(std::memory_order_relaxed);
        if (slot < 0) return;
        MonitorCell& cell = cells->cells[slot];
        if (cell.owner.load() != &session) {
            cell.calls.store(0);
            cell.failed.store(0);
            cell.total.store(0);
            cell.min.store(~std::uint64_t{0});
            cell.max.store(0);
            cell.owner.store(&session);
        }
        if (std::find(session.monitored.begin(), session.monitored.end(), &site) == session.monitored.end())
            session.monitored.push_back(&site);
    }

    std::mutex mutex_;
    SessionSlots slots_;
    std::uint32_t epoch_ = 1;                   // bumped when the set of sessions changes
    std::atomic<std::uint32_t> epoch_seen_{1};  // epoch_, read without the lock
    std::atomic<std::uint32_t> running_{0};     // sessions in slots_

    std::mutex notify_mutex_;     // held while the listeners run; before listeners_mutex_; not taken by fork()
    std::mutex listeners_mutex_;  // the list, whole across fork(); taken before mutex_
    std::vector<std::pair<Listener, void*>> listeners_;
    std::atomic<bool> listened_{false};  // ever: a program without instrumentation never unwinds for it

    std::mutex alive_mutex_;
    std::vector<std::weak_ptr<SessionState>> alive_;
    std::vector<std::shared_ptr<SessionState>> held_;  // across fork()
};

// ---- delivery: each returns true when the session's limit is reached (the caller stops it) ----

// One ticket of the session's limit, or false when it is reached.
inline bool ticket(SessionState& session, std::uint64_t& number) {
    number = session.reserved.fetch_add(1, std::memory_order_relaxed);
    return number < session.limit;
}

// When an invocation that just ended after `cost` started, on the wall clock: read only for the
// invocations delivered.
inline std::chrono::system_clock::time_point started_at(Nanos cost) {
    return std::chrono::system_clock::now() - std::chrono::duration_cast<std::chrono::system_clock::duration>(cost);
}

// A stack or watch session's value for one invocation: its thread's part by `header(value)`,
// the rest by `fill(value)`, made only when the session wants it.
template <class Value, class Header, class Fill>
bool deliver_invocation(SessionState& session, Nanos cost, bool threw, Header&& header, Fill&& fill) {
    std::uint64_t number = 0;
    if (cost < session.min_cost || !ticket(session, number)) return false;
    Value value;
    value.start = started_at(cost);
    header(value);
    value.cost = cost;
    value.threw = threw;
    fill(value);
    {
        std::lock_guard<std::mutex> lock(session.mutex);
        if (session.stopped) return false;
        session.queue<Value>().push_back(std::move(value));
        ++session.delivered;
    }
    session.changed.notify_all();
    return number + 1 == session.limit;
}

inline void count_call(SessionState& session, const SiteInfo* site, std::uint64_t elapsed, bool threw) noexcept {
    MonitorCells* cells = interned(site).monitors.load(std::memory_order_acquire);
    const int slot = session.slot.load(std::memory_order_relaxed);
    if (cells == nullptr || slot < 0) return;
    MonitorCell& cell = cells->cells[slot];
    if (cell.owner.load(std::memory_order_relaxed) != &session) return;
    cell.calls.fetch_add(1, std::memory_order_relaxed);
    if (threw) cell.failed.fetch_add(1, std::memory_order_relaxed);
    cell.total.fetch_add(elapsed, std::memory_order_relaxed);
    for (std::uint64_t min = cell.min.load(std::memory_order_relaxed);
         elapsed < min && !cell.min.compare_exchange_weak(min, elapsed, std::memory_order_relaxed);) {
    }
    for (std::uint64_t max = cell.max.load(std::memory_order_relaxed);
         elapsed > max && !cell.max.compare_exchange_weak(max, elapsed, std::memory_order_relaxed);) {
    }
}

// A capture to a trace session (its callback, or its queue) or a flight recorder (its ring).
inline bool deliver_trace(SessionState& session, const Trace& trace) {
    if (trace.root.total < session.min_cost) return false;
    if (session.kind == SessionKind::recorder) {
        std::size_t size = sizeof trace;
        const auto add = [&size](const Node& node, const auto& self) -> void {
            size += sizeof node + node.name.size() + node.file.size() + (node.message ? node.message->size() : 0);
            for (const auto& value : node.values) size += value.first.size() + value.second.size() + 64;
            for (const Node& child : node.children) self(child, self);
        };
        add(trace.root, add);
        std::lock_guard<std::mutex> lock(session.mutex);
        if (session.stopped) return false;
        session.traces.push_back(trace);
        session.trace_bytes.push_back(size);
        session.bytes += size;
        ++session.delivered;
        while (session.traces.size() > session.keep || (session.bytes > session.max_bytes && session.traces.size() > 1)) {
            session.bytes -= session.trace_bytes.front();
            session.traces.pop_front();
            session.trace_bytes.pop_front();
            ++session.evicted;
        }
        return false;
    }
    {
        std::lock_guard<std::mutex> lock(session.mutex);
        if (session.stopped) return false;
        ++session.callbacks_running;
    }
    struct Finished {
        SessionState& session;
        ~Finished() {
            {
                std::lock_guard<std::mutex> lock(session.mutex);
                --session.callbacks_running;
            }
            session.changed.notify_all();
        }
    } finished{session};
    std::uint64_t number = 0;
    if (!ticket(session, number)) return false;
    if (session.on_trace) {
        callback_session() = &session;
        try {
            session.on_trace(trace);
        } catch (...) {  // a throwing callback must not unwind through the traced program
        }
        callback_session() = nullptr;
    }
    {
        std::lock_guard<std::mutex> lock(session.mutex);
        if (!session.on_trace) session.traces.push_back(trace);
        ++session.delivered;
    }
    return number + 1 == session.limit;
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_SESSION_REGISTRY_HPP
