// tracetree: Arthas-style call-tree tracing for C++17. SPDX-License-Identifier: MIT
//
//   #include <tracetree/tracetree.hpp>
//   void handle() { TRACETREE_FUNCTION(); { TRACETREE_SCOPE("parse"); parse(); } }
//   ...
//   tracetree::TraceSession trace({"handle", false, std::chrono::milliseconds(10), 3});
//   for (auto& t : trace.collect(std::chrono::seconds(30))) tracetree::render(std::cout, t);
//
// Reading order: configuration, the values a trace produces, the public functions, the macros,
// then `detail` (the recorder; the hot path is Arena::enter/leave and Scope), then rendering.
#ifndef TRACETREE_TRACETREE_HPP
#define TRACETREE_TRACETREE_HPP

// The single source of the version: meson.build reads these three lines.
#define TRACETREE_VERSION_MAJOR 0
#define TRACETREE_VERSION_MINOR 1
#define TRACETREE_VERSION_PATCH 0

// ---- configuration ---------------------------------------------------------------------------
// TRACETREE_DISABLE: define it to compile every scope macro to nothing (arguments not evaluated).

#ifndef TRACETREE_USE_TSC  // 1: time with the x86-64 time-stamp counter; 0: std::chrono::steady_clock
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TRACETREE_USE_TSC 1
#else
#define TRACETREE_USE_TSC 0
#endif
#endif

#ifndef TRACETREE_DEFAULT_MAX_DEPTH  // nesting recorded per thread; deeper scopes are counted, not kept
#define TRACETREE_DEFAULT_MAX_DEPTH 256
#endif

#ifndef TRACETREE_DEFAULT_MAX_NODES  // call-tree nodes per thread (64 bytes each)
#define TRACETREE_DEFAULT_MAX_NODES 65536
#endif

#ifndef TRACETREE_MAX_NAME_LENGTH  // run-time names longer than this are cut
#define TRACETREE_MAX_NAME_LENGTH 1024
#endif

#include <algorithm>           // std::min, std::max, std::reverse, std::any_of
#include <atomic>              // the flags, counters and published sizes shared with readers
#include <charconv>            // std::to_chars: shortest round-trip digits for Java's Double.toString
#include <chrono>              // durations, steady_clock, system_clock
#include <cmath>               // std::signbit for Java's "-0.0"
#include <condition_variable>  // TraceSession::next waits for a capture
#include <cstdint>             // fixed-width counters
#include <cstdio>              // std::snprintf for fixed-width numbers
#include <ctime>               // localtime_r/gmtime_r for the ts= header
#include <deque>               // queued traces of a session
#include <exception>           // std::uncaught_exceptions: scopes left by a throw
#include <functional>          // TraceRequest::on_trace
#include <iostream>            // std::cout/cerr: colour is automatic only for terminals
#include <memory>              // shared_ptr: thread and session state outlive their owners
#include <mutex>               // registries (never on the hot path)
#include <optional>            // TraceSession::next
#include <ostream>             // renderers write to any std::ostream
#include <regex>               // regex trace patterns
#include <sstream>             // to_string renders into a string stream
#include <stdexcept>           // std::invalid_argument for bad patterns and limits
#include <string>              // names
#include <string_view>         // names without copies
#include <unordered_map>       // function-name and run-time-name caches
#include <utility>             // std::move, std::pair
#include <vector>              // node storage and value trees

#if TRACETREE_USE_TSC
#include <x86intrin.h>  // __rdtsc
#endif
#if defined(__GLIBCXX__) || defined(_LIBCPPABI_VERSION) || (defined(__has_include) && __has_include(<cxxabi.h>))
#include <cxxabi.h>  // __cxa_get_globals: the thread's uncaught-exception count without a call per scope
#define TRACETREE_DETAIL_ITANIUM_EH 1
#else
#define TRACETREE_DETAIL_ITANIUM_EH 0
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>  // pthread_getname_np: default thread names
#include <unistd.h>   // isatty: colour only on terminals
#endif

namespace tracetree {

using Nanos = std::chrono::nanoseconds;

// ---- the values a trace or profile produces ----------------------------------------------------
// Plain data: tests and loaders build them by hand; renderers only read them.

struct Node {
    std::string name;        // "ns::Class::method()" for functions, the given text for named scopes
    std::string file;        // source file of the call site ("" when unknown)
    std::uint32_t line = 0;  // line of the call site (0 when unknown)
    std::uint64_t count = 0; // completed calls; 0 means still running when the snapshot was taken
    Nanos total{}, min{}, max{};
    std::uint64_t throws = 0;   // calls left by an exception
    std::uint64_t dropped = 0;  // calls below this node not recorded: depth or node limit reached
    std::vector<Node> children; // in order of first call

    Nanos self() const;              // total minus the children's totals, never negative
    void merge(const Node& other);   // adds counts and times, folds children with the same call site
    bool same_site(const Node& other) const { return name == other.name && file == other.file && line == other.line; }
};

struct Trace {  // one captured invocation of a watched scope, as Arthas `trace` prints it
    std::chrono::system_clock::time_point start;
    std::string thread_name;
    std::uint32_t thread_id = 0;
    std::vector<std::pair<std::string, std::string>> fields;  // annotate(): request ids and such
    Node root;
};

struct ThreadProfile {  // everything one thread recorded since start or reset (Arthas `monitor`)
    std::string thread_name;
    std::uint32_t thread_id = 0;
    bool exited = false;  // exited threads are folded together by thread name
    std::uint64_t dropped_depth = 0, dropped_nodes = 0;
    std::vector<Node> roots;  // top-level scopes
};

struct Profile {
    std::chrono::system_clock::time_point taken;
    std::vector<ThreadProfile> threads;
    ThreadProfile merged() const;  // all threads folded by call path, named "all threads"
};

// ---- control --------------------------------------------------------------------------------

void set_enabled(bool on) noexcept;  // the process-wide switch; recording is on by default
bool enabled() noexcept;

struct Limits {
    std::uint32_t max_depth = TRACETREE_DEFAULT_MAX_DEPTH;  // 1 ..= 100000
    std::uint32_t max_nodes = TRACETREE_DEFAULT_MAX_NODES;  // 16 ..= 16777216, for trees started later
};
void set_limits(const Limits& limits);  // std::invalid_argument when out of range
Limits limits();

void set_thread_name(std::string_view name);  // default: the OS thread name
void annotate(std::string_view key, std::string_view value);  // adds key=value to traces being captured here

Profile profile();  // snapshot from any thread; recording threads are not stopped
void reset();       // clears exited threads now, each live thread at its next outermost scope

// Replaces the clock for every thread (nullptr restores it): tests make timings exact with it.
// Set it while no scope is open; the function returns nanoseconds.
using ClockFunction = std::uint64_t (*)() noexcept;
void set_clock(ClockFunction now) noexcept;

// ---- traces on demand (Arthas `trace pattern '#cost > N' -n K`) --------------------------------

struct TraceRequest {
    std::string pattern;   // glob (`*` any run, `?` one char) or ECMAScript regex; must match the whole
                           // name, or the whole of what follows a `::` in it (`service` finds `a::B::service`)
    bool regex = false;
    Nanos min_cost{0};     // only invocations costing at least this much
    std::uint64_t limit = 1;  // capture this many, then stop (1 ..= 1000000)
    std::function<void(const Trace&)> on_trace{};  // called on the recording thread; else queued
};

namespace detail { struct SessionState; }

class TraceSession {
public:
    explicit TraceSession(TraceRequest request);  // std::invalid_argument on bad input
    TraceSession(TraceSession&&) noexcept = default;
    TraceSession& operator=(TraceSession&& other) noexcept;  // stops the session it held
    ~TraceSession();

    std::optional<Trace> next(Nanos timeout);     // the next queued capture, or nothing on timeout
    std::vector<Trace> collect(Nanos timeout);    // waits until `limit` captures or timeout; takes the queue
    std::uint64_t captured() const;               // delivered so far
    bool done() const;                            // limit reached or stopped
    void stop();

private:
    std::shared_ptr<detail::SessionState> state_;
};

// ---- timeline (optional): every scope with its start, for Chrome/Perfetto trace views ----------
// Off by default; while on, every scope takes the slow path and a per-thread lock at its end.
// Each thread keeps its first `max_spans_per_thread` spans since start_timeline(); later ones are
// counted in `dropped`. A span is recorded when its scope ends: running scopes are not in a snapshot.

struct Span {
    std::string name;
    std::string file;
    std::uint32_t line = 0;
    Nanos start{};  // since Timeline::origin
    Nanos duration{};
    std::uint32_t depth = 0;  // open recorded scopes around it on its thread
    bool threw = false;
};
struct ThreadTimeline {
    std::string thread_name;
    std::uint32_t thread_id = 0;
    std::uint64_t dropped = 0;  // spans not kept: the per-thread bound was reached
    std::vector<Span> spans;    // in order of their end
};
struct Timeline {
    std::chrono::system_clock::time_point origin;
    std::vector<ThreadTimeline> threads;
};
void start_timeline(std::size_t max_spans_per_thread = 65536);  // std::invalid_argument: 0 or > 16777216
void stop_timeline() noexcept;
Timeline timeline();

// ---- rendering --------------------------------------------------------------------------------

enum class Colour { automatic, never, always };  // automatic: only when the stream is a terminal
struct RenderOptions {
    Colour colour = Colour::automatic;
    bool utc = false;  // ts= in UTC instead of local time
};

void render(std::ostream& out, const Trace& trace, const RenderOptions& options = {});
void render(std::ostream& out, const ThreadProfile& thread, std::chrono::system_clock::time_point taken,
            const RenderOptions& options = {});
void render(std::ostream& out, const Profile& profile, const RenderOptions& options = {});
std::string to_string(const Trace& trace, const RenderOptions& options = {Colour::never, false});
std::string to_string(const Profile& profile, const RenderOptions& options = {Colour::never, false});

// Human mode: aligned columns (total, self, count, min, max) with ns/µs/ms/s units.
void render_human(std::ostream& out, const Trace& trace);
void render_human(std::ostream& out, const Profile& profile);

std::string java_millis(Nanos duration);  // nanoseconds as milliseconds, printed as Java's Double.toString

}  // namespace tracetree

// ---- macros ---------------------------------------------------------------------------------

#define TRACETREE_DETAIL_CAT2(a, b) a##b
#define TRACETREE_DETAIL_CAT(a, b) TRACETREE_DETAIL_CAT2(a, b)
#define TRACETREE_DETAIL_UNIQUE(prefix) TRACETREE_DETAIL_CAT(prefix, __LINE__)

#if defined(_MSC_VER) && !defined(__clang__)
#define TRACETREE_DETAIL_FUNCTION_SIGNATURE __FUNCSIG__
#else
#define TRACETREE_DETAIL_FUNCTION_SIGNATURE __PRETTY_FUNCTION__
#endif

#ifdef TRACETREE_DISABLE
#define TRACETREE_FUNCTION() static_cast<void>(0)
#define TRACETREE_SCOPE(name) static_cast<void>(0)
#define TRACETREE_SCOPE_DYNAMIC(name) static_cast<void>(0)
#else
#define TRACETREE_DETAIL_SITE(text, kind)                                                             \
    static ::tracetree::detail::Site TRACETREE_DETAIL_UNIQUE(tracetree_site_) { text, __FILE__, __LINE__, kind }
// A scope named after the enclosing function: `ns::Class::method()`.
#define TRACETREE_FUNCTION()                                                                          \
    TRACETREE_DETAIL_SITE(TRACETREE_DETAIL_FUNCTION_SIGNATURE, ::tracetree::detail::SiteKind::function); \
    const ::tracetree::detail::Scope TRACETREE_DETAIL_UNIQUE(tracetree_scope_) { TRACETREE_DETAIL_UNIQUE(tracetree_site_) }
// A scope with a fixed name (a string literal).
#define TRACETREE_SCOPE(name)                                                                         \
    TRACETREE_DETAIL_SITE("" name, ::tracetree::detail::SiteKind::scope);                             \
    const ::tracetree::detail::Scope TRACETREE_DETAIL_UNIQUE(tracetree_scope_) { TRACETREE_DETAIL_UNIQUE(tracetree_site_) }
// A scope named at run time (anything convertible to std::string_view), evaluated only while recording
// is on. Slower: each call looks the name up in a per-thread table (a hash and a compare); use it for
// URLs, not inner loops. Distinct names per thread are bounded like nodes; the rest are counted as dropped.
#define TRACETREE_SCOPE_DYNAMIC(name)                                                                 \
    TRACETREE_DETAIL_SITE(nullptr, ::tracetree::detail::SiteKind::dynamic);                           \
    const ::tracetree::detail::Scope TRACETREE_DETAIL_UNIQUE(tracetree_scope_) {                      \
        TRACETREE_DETAIL_UNIQUE(tracetree_site_), [&]() -> decltype(auto) { return (name); }          \
    }
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TRACETREE_DETAIL_INLINE __attribute__((always_inline))  // the fast path stays in the caller
#define TRACETREE_DETAIL_COLD __attribute__((noinline, cold))  // slow paths stay out of it
#else
#define TRACETREE_DETAIL_INLINE
#define TRACETREE_DETAIL_COLD
#endif

namespace tracetree {
namespace detail {

// ---- clock ----------------------------------------------------------------------------------

inline std::uint64_t ticks() noexcept {
#if TRACETREE_USE_TSC
    return __rdtsc();
#else
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch()).count());
#endif
}

inline std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::atomic<ClockFunction> g_test_clock{nullptr};

// Ticks become nanoseconds only when a snapshot or trace is taken: the ratio is measured between the
// first use of the clock and now, so there is no calibration pause at start-up.
struct TickAnchor {
    std::uint64_t tick;
    std::int64_t ns;
};
inline const TickAnchor& tick_anchor() noexcept {
    static const TickAnchor anchor{ticks(), steady_ns()};
    return anchor;
}
inline double ns_per_tick() noexcept {
    if (g_test_clock.load(std::memory_order_relaxed) != nullptr) return 1.0;
#if TRACETREE_USE_TSC
    const TickAnchor& anchor = tick_anchor();
    for (;;) {  // a window under 1 ms would make the ratio coarse: that only happens right at start-up
        const std::uint64_t tick = ticks();
        const std::int64_t ns = steady_ns();
        if (ns - anchor.ns >= 1000000 && tick > anchor.tick)
            return static_cast<double>(ns - anchor.ns) / static_cast<double>(tick - anchor.tick);
    }
#else
    return 1.0;
#endif
}
inline Nanos to_nanos(std::uint64_t tick_count, double ratio) noexcept {
    const double ns = static_cast<double>(tick_count) * ratio + 0.5;  // a clock that stepped back gives ~2^64
    return ns >= 9.2e18 ? Nanos::max() : Nanos(static_cast<std::int64_t>(ns));
}

// ---- call sites -----------------------------------------------------------------------------

enum class SiteKind : std::uint8_t { scope, function, dynamic };

struct Site {
    const char* text;  // the scope name, the function signature, or (dynamic) the run-time name
    const char* file;
    std::uint32_t line;
    SiteKind kind;
    // Which trace sessions watch this site: (session epoch << 32) | session bit mask. Decided once per
    // site and epoch, so a running session costs a load and a compare per scope, not a match.
    std::atomic<std::uint64_t> watch{0};

    constexpr Site(const char* text_, const char* file_, int line_, SiteKind kind_) noexcept
        : text(text_), file(file_), line(static_cast<std::uint32_t>(line_)), kind(kind_) {}
};

inline std::string function_name(const char* signature);  // "ns::Class::method", cached per signature
inline std::string display_name(const Site& site);        // function_name + "()", or the scope's text
inline std::string match_name(const Site& site);         // display name without "()"

// ---- the per-thread call tree ---------------------------------------------------------------

// One node per call site under one parent. The owner thread is the only writer; snapshot readers
// see `site` and `parent` (written before the node is published) and the relaxed counters.
struct NodeRecord {
    const Site* site = nullptr;
    std::uint32_t parent = 0;
    std::uint32_t first_child = 0;   // owner only
    std::uint32_t next_sibling = 0;  // owner only
    std::uint32_t hint = 0;          // owner only: the child found last, tried first
    std::atomic<std::uint32_t> throws{0};
    std::atomic<std::uint32_t> dropped{0};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> total{0};
    std::atomic<std::uint64_t> min{~std::uint64_t{0}};
    std::atomic<std::uint64_t> max{0};
};
static_assert(sizeof(NodeRecord) <= 64, "a node must fit a cache line");

// How many exceptions are in flight on this thread, read at scope entry and exit to count throws.
// The Itanium C++ ABI (section 2.2.2) lays the per-thread exception globals out as the caught-exception
// stack followed by this count, so a pointer taken once per thread turns two library calls per
// scope into two loads.
#if TRACETREE_DETAIL_ITANIUM_EH
struct EhGlobals {
    void* caught_exceptions;
    unsigned int uncaught_exceptions;
};
inline const unsigned int* uncaught_counter() noexcept {
    return &reinterpret_cast<const EhGlobals*>(abi::__cxa_get_globals())->uncaught_exceptions;
}
inline int uncaught(const unsigned int* counter) noexcept { return static_cast<int>(*counter); }
#else
inline const unsigned int* uncaught_counter() noexcept { return nullptr; }
inline int uncaught(const unsigned int*) noexcept { return std::uncaught_exceptions(); }
#endif

template <class T>
inline void bump(std::atomic<T>& counter, T by = 1) noexcept {  // single writer: no locked add needed
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}
// The 32-bit counters (throws, dropped) stop at their maximum instead of wrapping to a small number.
inline void bump_saturating(std::atomic<std::uint32_t>& counter, std::uint64_t by = 1) noexcept {
    const std::uint64_t sum = counter.load(std::memory_order_relaxed) + by;
    counter.store(sum > 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<std::uint32_t>(sum), std::memory_order_relaxed);
}

class Arena {
public:
    static constexpr std::uint32_t kChunkBits = 8;  // 256 nodes, 16 KiB per chunk
    static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;

    Arena(std::uint32_t max_nodes, std::uint32_t max_depth)
        : max_nodes_(max_nodes), max_depth_(max_depth), depth_limit_(max_depth), uncaught_(uncaught_counter()) {
        chunks_.reserve((max_nodes + kChunkSize - 1) / kChunkSize);  // never reallocates: readers index it
        chunks_.push_back(std::make_unique<NodeRecord[]>(kChunkSize));
        size_.store(1, std::memory_order_release);  // node 0: the root, no site
        cur_ = at(0);
    }

    NodeRecord* at(std::uint32_t index) const noexcept {
        return &chunks_[index >> kChunkBits][index & (kChunkSize - 1)];
    }

    // The hot path: the node for `site` under the current node, made current. nullptr: not recorded.
    TRACETREE_DETAIL_INLINE NodeRecord* enter(const Site* site) noexcept {
        if (depth_ >= depth_limit_.load(std::memory_order_relaxed)) return enter_limited(site);
        std::uint32_t index = cur_->hint;
        if (at(index)->site != site) {
            index = child(cur_index_, site);
            if (index == 0) return enter_overflow();
        }
        return descend(index);
    }

    TRACETREE_DETAIL_INLINE NodeRecord* descend(std::uint32_t index) noexcept {
        cur_index_ = index;
        cur_ = at(index);
        ++depth_;
        return cur_;
    }

    TRACETREE_DETAIL_INLINE void leave(NodeRecord* node, std::uint64_t elapsed, int uncaught_at_entry) noexcept {
        bump(node->count);
        bump(node->total, elapsed);
        if (elapsed < node->min.load(std::memory_order_relaxed)) node->min.store(elapsed, std::memory_order_relaxed);
        if (elapsed > node->max.load(std::memory_order_relaxed)) node->max.store(elapsed, std::memory_order_relaxed);
        if (uncaught_exceptions() > uncaught_at_entry) bump_saturating(node->throws);
        cur_index_ = node->parent;
        cur_ = at(cur_index_);
        --depth_;
    }

    // The index of `parent`'s child for `site`, added if new; 0 when the node limit is reached.
    TRACETREE_DETAIL_COLD std::uint32_t child(std::uint32_t parent_index, const Site* site) noexcept {
        NodeRecord* parent = at(parent_index);
        const std::uint32_t after_hint = at(parent->hint)->next_sibling;  // calls tend to repeat in order
        std::uint32_t found = after_hint != 0 && at(after_hint)->site == site ? after_hint : 0;
        for (std::uint32_t i = parent->first_child; found == 0 && i != 0; i = at(i)->next_sibling)
            if (at(i)->site == site) found = i;
        if (found == 0) found = add(parent_index, site);
        if (found != 0) parent->hint = found;
        return found;
    }

    NodeRecord* drop(NodeRecord* parent, std::uint64_t calls) noexcept {  // counts calls not recorded
        bump_saturating(parent->dropped, calls);
        bump(dropped_nodes_, calls);
        return nullptr;
    }

    int uncaught_exceptions() const noexcept { return uncaught(uncaught_); }  // owner thread only
    std::uint32_t size() const noexcept { return size_.load(std::memory_order_acquire); }
    std::uint32_t current() const noexcept { return cur_index_; }
    std::uint32_t depth() const noexcept { return depth_; }
    std::uint32_t max_nodes() const noexcept { return max_nodes_; }
    std::uint32_t max_depth() const noexcept { return max_depth_.load(std::memory_order_relaxed); }
    std::uint64_t dropped_depth() const noexcept { return dropped_depth_.load(std::memory_order_relaxed); }
    std::uint64_t dropped_nodes() const noexcept { return dropped_nodes_.load(std::memory_order_relaxed); }
    void add_dropped(std::uint64_t depth, std::uint64_t nodes) noexcept {
        bump(dropped_depth_, depth);
        bump(dropped_nodes_, nodes);
    }

    // Called from any thread: the owner zeroes its tree at its next outermost scope. Until then the
    // depth limit reads 0, which sends the owner to enter_limited without a check of its own.
    void request_reset() noexcept {
        reset_requested_.fetch_add(1);
        depth_limit_.store(0);
    }
    bool reset_pending() const noexcept { return reset_requested_.load() != reset_done_.load(); }
    // Owner only. Open scopes then add their whole call when they end.
    void apply_pending_reset() noexcept {
        if (reset_pending()) zero();
    }
    void set_max_depth(std::uint32_t max_depth) noexcept {
        max_depth_.store(max_depth);
        restore_depth_limit();
    }

private:
    // Re-checked after the store, so that a concurrent request_reset or overflow is never lost.
    void restore_depth_limit() noexcept {
        if (!reset_pending() && !in_overflow_.load()) depth_limit_.store(max_depth_.load());
        if (reset_pending() || in_overflow_.load()) depth_limit_.store(0);
    }

    TRACETREE_DETAIL_COLD NodeRecord* enter_limited(const Site* site) noexcept {
        if (cur_ == &overflow_) return drop(at(cur_index_), 1);  // inside a scope cut by the node limit
        if (in_overflow_.load()) {  // that scope has ended
            in_overflow_.store(false);
            restore_depth_limit();
        }
        apply_pending_reset();
        if (depth_ >= max_depth_.load(std::memory_order_relaxed)) {
            bump_saturating(cur_->dropped);
            bump(dropped_depth_);
            return nullptr;
        }
        const std::uint32_t index = child(cur_index_, site);
        if (index == 0) return enter_overflow();
        return descend(index);
    }

    // A scope past the node limit is entered as `overflow_`, a node outside the tree, so that the calls
    // inside it are dropped with it instead of being filed under its parent. The depth limit reads 0
    // meanwhile: nested scopes take enter_limited, the fast path never sees overflow_.
    TRACETREE_DETAIL_COLD NodeRecord* enter_overflow() noexcept {
        drop(cur_, 1);
        overflow_.parent = cur_index_;  // leave() goes back to the real parent from here
        cur_ = &overflow_;
        ++depth_;
        in_overflow_.store(true);
        depth_limit_.store(0);
        return &overflow_;
    }

    std::uint32_t add(std::uint32_t parent_index, const Site* site) noexcept {
        const std::uint32_t index = size_.load(std::memory_order_relaxed);
        if (index >= max_nodes_) return 0;
        if ((index >> kChunkBits) == chunks_.size()) {
            NodeRecord* chunk = new (std::nothrow) NodeRecord[kChunkSize];
            if (chunk == nullptr) return 0;
            chunks_.emplace_back(chunk);
        }
        NodeRecord* parent = at(parent_index);
        NodeRecord* node = at(index);
        node->site = site;
        node->parent = parent_index;
        node->next_sibling = parent->first_child;  // newest first here; readers use index order
        parent->first_child = index;
        size_.store(index + 1, std::memory_order_release);
        return index;
    }

    void zero() noexcept {
        const std::uint32_t request = reset_requested_.load();
        for (std::uint32_t i = 0, n = size(); i < n; ++i) {
            NodeRecord* node = at(i);
            node->throws.store(0, std::memory_order_relaxed);
            node->dropped.store(0, std::memory_order_relaxed);
            node->count.store(0, std::memory_order_relaxed);
            node->total.store(0, std::memory_order_relaxed);
            node->min.store(~std::uint64_t{0}, std::memory_order_relaxed);
            node->max.store(0, std::memory_order_relaxed);
        }
        dropped_depth_.store(0, std::memory_order_relaxed);
        dropped_nodes_.store(0, std::memory_order_relaxed);
        reset_done_.store(request);
        restore_depth_limit();
    }

    std::vector<std::unique_ptr<NodeRecord[]>> chunks_;
    std::atomic<std::uint32_t> size_{0};
    NodeRecord* cur_ = nullptr;
    std::uint32_t cur_index_ = 0;
    std::uint32_t depth_ = 0;
    const std::uint32_t max_nodes_;
    std::atomic<std::uint32_t> max_depth_;
    std::atomic<std::uint32_t> depth_limit_;  // max_depth_, or 0 while a reset is pending or in overflow_
    NodeRecord overflow_;
    std::atomic<bool> in_overflow_{false};
    std::atomic<std::uint32_t> reset_requested_{0}, reset_done_{0};
    std::atomic<std::uint64_t> dropped_depth_{0}, dropped_nodes_{0};
    const unsigned int* const uncaught_;  // the owner's: arenas are made on the thread that fills them
};

// ---- threads and sessions (slow paths, behind mutexes) ----------------------------------------

struct Capture;  // one invocation being recorded for trace sessions
struct ThreadState;

inline constexpr std::uint8_t kRecording = 1;  // g_flags bits
inline constexpr std::uint8_t kSessions = 2;
inline constexpr std::uint8_t kTestClock = 4;
inline constexpr std::uint8_t kTimeline = 8;
inline std::atomic<std::size_t> g_timeline_limit{65536};
inline std::atomic<std::uint8_t> g_flags{kRecording};
inline std::atomic<std::uint32_t> g_epoch{1};  // bumped when the set of trace sessions changes

inline Arena*& tls_arena() noexcept {  // trivially initialised: no guard on the hot path
    static thread_local Arena* arena = nullptr;
    return arena;
}
inline ThreadState*& tls_state() noexcept {
    static thread_local ThreadState* state = nullptr;
    return state;
}
inline Arena* thread_arena_slow() noexcept;  // creates the thread's state on its first scope

class Scope {
public:
    TRACETREE_DETAIL_INLINE explicit Scope(Site& site) noexcept {
        const std::uint8_t flags = g_flags.load(std::memory_order_relaxed);
        if ((flags & kRecording) == 0) return;  // runtime-disabled: one test, nothing else
        if (flags == kRecording || (flags == (kRecording | kSessions) && unwatched(site))) {
            Arena* arena = tls_arena();
            if (arena != nullptr) {
                node_ = arena->enter(&site);
                if (node_ == nullptr) return;
                arena_ = arena;
                mode_ = 0;
                uncaught_ = arena->uncaught_exceptions();
                start_ = ticks();
                return;
            }
        }
        begin_slow(site, flags);
    }
    // TRACETREE_SCOPE_DYNAMIC: the name is computed only when recording is on.
    template <class MakeName>
    Scope(Site& site, MakeName&& make_name) {
        if ((g_flags.load(std::memory_order_relaxed) & kRecording) != 0) begin_dynamic(site, make_name());
    }
    TRACETREE_DETAIL_INLINE ~Scope() {
        if (node_ == nullptr) return;
        if (mode_ == 0) {
            arena_->leave(node_, ticks() - start_, uncaught_);
            return;
        }
        end_slow();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

private:
    // Decided for this session epoch and watched by none: a running session costs such a site a
    // load and a compare, not a match.
    static bool unwatched(const Site& site) noexcept {
        return site.watch.load(std::memory_order_relaxed) ==
               std::uint64_t{g_epoch.load(std::memory_order_relaxed)} << 32;
    }
    static constexpr std::uint8_t kCaptureRoot = 1;  // mode_ bits
    static constexpr std::uint8_t kFakeClock = 2;
    static constexpr std::uint8_t kTimelineSpan = 4;
    TRACETREE_DETAIL_COLD inline void begin_slow(Site& site, std::uint8_t flags) noexcept;
    TRACETREE_DETAIL_COLD inline void begin_dynamic(Site& site, std::string_view name) noexcept;
    TRACETREE_DETAIL_COLD inline void end_slow() noexcept;

    NodeRecord* node_ = nullptr;  // null: not recorded, and nothing else below is read
    std::uint8_t mode_;
    Arena* arena_;
    std::uint64_t start_;
    int uncaught_;
};

// ---- pattern matching -----------------------------------------------------------------------

class Matcher {
public:
    Matcher(const std::string& pattern, bool regex) : pattern_(pattern), is_regex_(regex) {
        if (pattern.empty()) throw std::invalid_argument("tracetree: empty trace pattern");
        if (pattern.size() > 4096) throw std::invalid_argument("tracetree: trace pattern longer than 4096 characters");
        if (regex) {
            check_repetitions(pattern);
            try {
                static std::mutex compiling;  // libstdc++'s ctype<char>::narrow cache is not thread-safe
                std::lock_guard<std::mutex> lock(compiling);
                regex_ = std::regex(pattern, std::regex::ECMAScript);
            } catch (const std::regex_error& e) {
                throw std::invalid_argument("tracetree: bad regex '" + pattern + "': " + e.what());
            }
        }
    }
    // The whole name, or the whole of any part that follows a "::".
    bool matches(std::string_view name) const {
        for (std::size_t from = 0;;) {
            if (matches_whole(name.substr(from))) return true;
            const std::size_t next = name.find("::", from);
            if (next == std::string_view::npos) return false;
            from = next + 2;
        }
    }

private:
    // libstdc++ expands `x{n}` into n states and overflows on huge n (undefined behaviour): bound it.
    static void check_repetitions(const std::string& pattern) {
        for (std::size_t i = 0; i < pattern.size(); ++i) {
            if (pattern[i] == '\\') {  // `\N`: a back-reference number, read like a count
                std::size_t j = i + 1;
                unsigned long number = 0;
                for (; j < pattern.size() && pattern[j] >= '0' && pattern[j] <= '9'; ++j)
                    if ((number = number * 10 + static_cast<unsigned long>(pattern[j] - '0')) > 1000)
                        throw std::invalid_argument("tracetree: bad regex '" + pattern + "': back-reference above 1000");
                i = j == i + 1 ? i + 1 : j - 1;  // past the escaped character or the digits
                continue;
            }
            if (pattern[i] != '{') continue;
            unsigned long count = 0;
            for (std::size_t j = i + 1; j < pattern.size() && pattern[j] != '}'; ++j) {
                if (pattern[j] == ',') count = 0;
                else if (pattern[j] >= '0' && pattern[j] <= '9') count = count * 10 + static_cast<unsigned long>(pattern[j] - '0');
                if (count > 1000)
                    throw std::invalid_argument("tracetree: bad regex '" + pattern + "': repetition count above 1000");
            }
        }
    }
    bool matches_whole(std::string_view name) const {
        if (is_regex_) return std::regex_match(name.begin(), name.end(), regex_);
        return glob(pattern_, name);
    }
    static bool glob(std::string_view pattern, std::string_view text) {
        std::size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
        while (t < text.size()) {
            if (p < pattern.size() && pattern[p] == '*') {  // before the literal test: names contain '*' too
                star = p++;
                resume = t;
            } else if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
                ++p;
                ++t;
            } else if (star != std::string_view::npos) {
                p = star + 1;
                t = ++resume;
            } else {
                return false;
            }
        }
        while (p < pattern.size() && pattern[p] == '*') ++p;
        return p == pattern.size();
    }
    std::string pattern_;
    bool is_regex_;
    std::regex regex_;
};

struct SessionState {
    SessionState(TraceRequest request)
        : matcher(request.pattern, request.regex), min_cost(request.min_cost), limit(request.limit),
          on_trace(std::move(request.on_trace)) {}
    const Matcher matcher;
    const Nanos min_cost;
    const std::uint64_t limit;
    const std::function<void(const Trace&)> on_trace;
    std::atomic<std::uint64_t> reserved{0};
    int slot = -1;  // guarded by the session registry's mutex

    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Trace> queue;
    std::uint64_t delivered = 0;
    std::uint32_t callbacks_running = 0;  // stop() waits for them: the callback may use the caller's stack
    bool stopped = false;
};

inline const SessionState*& callback_session() noexcept {  // whose callback this thread is running
    static thread_local const SessionState* session = nullptr;
    return session;
}

inline constexpr int kMaxSessions = 32;

struct SessionRegistry {
    std::mutex mutex;
    std::shared_ptr<SessionState> slots[kMaxSessions];
};
inline SessionRegistry& sessions() {
    static SessionRegistry* registry = new SessionRegistry;  // never destroyed: threads may outlive main
    return *registry;
}

inline void update_session_flag_locked(const SessionRegistry& registry) noexcept {
    bool any = false;
    for (const auto& slot : registry.slots) any = any || slot != nullptr;
    if (any) g_flags.fetch_or(kSessions, std::memory_order_relaxed);
    else g_flags.fetch_and(static_cast<std::uint8_t>(~kSessions), std::memory_order_relaxed);
    if (g_epoch.fetch_add(1, std::memory_order_release) + 1 == 0) g_epoch.fetch_add(1);  // 0: never decided
}

inline void unregister_session(SessionState& state) {
    SessionRegistry& registry = sessions();
    std::lock_guard<std::mutex> lock(registry.mutex);
    if (state.slot >= 0 && registry.slots[state.slot].get() == &state) registry.slots[state.slot].reset();
    state.slot = -1;
    update_session_flag_locked(registry);
}

// The sessions watching `site`, decided once per site and session epoch.
// `epoch` receives the session epoch the mask belongs to: a slot may be reused by another session later.
inline std::uint32_t watch_mask(Site& site, std::uint32_t& epoch) {
    const std::uint64_t cached = site.watch.load(std::memory_order_acquire);
    epoch = g_epoch.load(std::memory_order_acquire);
    if ((cached >> 32) == epoch) return static_cast<std::uint32_t>(cached);
    std::shared_ptr<SessionState> watching[kMaxSessions];
    {
        SessionRegistry& registry = sessions();
        std::lock_guard<std::mutex> lock(registry.mutex);
        epoch = g_epoch.load(std::memory_order_relaxed);
        std::copy(std::begin(registry.slots), std::end(registry.slots), std::begin(watching));
    }
    // Matched outside the lock: a slow regex then stalls this thread only, not every thread that traces.
    const std::string name = match_name(site);
    std::uint32_t mask = 0;
    for (int i = 0; i < kMaxSessions; ++i)
        if (watching[i] && watching[i]->matcher.matches(name)) mask |= 1u << i;
    site.watch.store((std::uint64_t{epoch} << 32) | mask, std::memory_order_release);
    return mask;
}

struct Capture {
    Arena arena;
    Arena* parent;
    std::uint32_t mask;
    std::vector<std::shared_ptr<SessionState>> sessions;
    Trace trace;  // header fields filled at the start, root at the end
    Capture(std::uint32_t max_nodes, std::uint32_t max_depth, Arena* parent_arena)
        : arena(max_nodes, max_depth), parent(parent_arena), mask(0) {}
};

struct DynamicSite {
    std::string name;
    Site site;
    DynamicSite(std::string text, const Site& origin)
        : name(std::move(text)), site(nullptr, origin.file, static_cast<int>(origin.line), SiteKind::dynamic) {
        site.text = name.c_str();
    }
};

struct RawSpan {
    const Site* site;
    std::uint64_t start, end;
    std::uint32_t depth;
    bool threw;
};

struct ThreadState {
    ThreadState(std::uint32_t thread_id, const Limits& limits) : id(thread_id), main(limits.max_nodes, limits.max_depth) {}
    const std::uint32_t id;
    Arena main;
    std::mutex name_mutex;
    std::string name;
    bool named = false;  // set_thread_name was called: stop following the OS name

    // Owner only:
    std::vector<std::unique_ptr<Capture>> captures;
    std::uint32_t capturing = 0;  // sessions already being captured on this thread
    std::unordered_map<std::string, std::unique_ptr<DynamicSite>> dynamic_sites;  // bounded by max_nodes
    std::string dynamic_key;  // reused: no allocation per dynamic scope once it has grown
    std::uint32_t timeline_depth = 0;

    std::mutex timeline_mutex;  // the owner appends, timeline() copies
    std::vector<RawSpan> spans;
    std::uint64_t spans_dropped = 0;

    std::string thread_name() {
        std::lock_guard<std::mutex> lock(name_mutex);
        return name;
    }
    void refresh_os_name() {  // owner only
#if defined(__unix__) || defined(__APPLE__)
        char buffer[64] = {};
        if (pthread_getname_np(pthread_self(), buffer, sizeof buffer) != 0) return;
        std::lock_guard<std::mutex> lock(name_mutex);
        if (!named) name = buffer;
#endif
    }
};

struct ThreadRegistry {
    std::mutex mutex;
    std::vector<std::shared_ptr<ThreadState>> live;
    std::vector<ThreadProfile> exited;  // folded by thread name: memory bounded by distinct names
    std::vector<ThreadTimeline> exited_timelines;  // likewise
    std::uint32_t next_id = 1;
    std::uint64_t resets = 0;  // an exiting thread's data taken before a reset must not come back after it
    Limits limits;
};
inline ThreadRegistry& threads() {
    static ThreadRegistry* registry = new ThreadRegistry;  // never destroyed: threads may outlive main
    return *registry;
}


}  // namespace detail

// ==== definitions ================================================================================

namespace detail {

struct NameCache {
    std::mutex mutex;
    std::unordered_map<const char*, std::string> names;  // by signature address: one entry per call site
};
inline NameCache& name_cache() {
    static NameCache* cache = new NameCache;  // never destroyed: threads may outlive main
    return *cache;
}

inline std::string function_name(const char* signature) {
    NameCache& cache = name_cache();
    {
        std::lock_guard<std::mutex> lock(cache.mutex);
        auto it = cache.names.find(signature);
        if (it != cache.names.end()) return it->second;
    }
    // "R ns::C<T>::f(A) const [with T = int]" -> "ns::C::f": drop the return type, parameters,
    // qualifiers and template arguments, keep namespaces and classes.
    std::string s = signature;
    if (const std::size_t with = s.find(" [with "); with != std::string::npos) s.erase(with);
    int depth = 0;
    std::size_t params = std::string::npos;
    for (std::size_t i = s.size(); i-- > 0;) {  // the parameter list: the last top-level (...)
        if (s[i] == ')') ++depth;
        if (s[i] == '(' && --depth == 0) {
            params = i;
            break;
        }
    }
    if (params != std::string::npos) s.erase(params);
    std::size_t begin = 0;
    depth = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {  // the name starts after the last top-level space
        const char c = s[i];
        if (c == '<' || c == '(') ++depth;
        if ((c == '>' || c == ')') && depth > 0) --depth;
        if (c == ' ' && depth == 0 && s.compare(i + 1 > 8 ? i - 8 : 0, 8, "operator") != 0) begin = i + 1;
    }
    std::string name;
    depth = 0;
    const std::size_t op = s.find("operator", begin);
    for (std::size_t i = begin; i < s.size(); ++i) {
        const char c = s[i];
        const bool in_operator = op != std::string::npos && i >= op + 8;  // operator<, operator() stay
        if (!in_operator && c == '<') ++depth;
        else if (!in_operator && c == '>' && depth > 0) --depth;
        else if (depth == 0) name += c;
    }
    for (std::size_t at = name.find("{anonymous}"); at != std::string::npos; at = name.find("{anonymous}"))
        name.replace(at, 11, "(anonymous namespace)");  // g++ and clang++ spell it differently
    if (name.empty()) name = signature;
    std::lock_guard<std::mutex> lock(cache.mutex);
    return cache.names.emplace(signature, std::move(name)).first->second;
}

inline std::string match_name(const Site& site) {
    if (site.kind == SiteKind::function) return function_name(site.text);
    return site.text != nullptr ? site.text : "";
}
inline std::string display_name(const Site& site) {
    return site.kind == SiteKind::function ? function_name(site.text) + "()" : match_name(site);
}

// An arena's nodes as values, children in order of first call. Nodes with no finished call and
// nothing finished below them (zeroed by a reset, or entered and still running) are left out.
inline std::vector<Node> to_values(const Arena& arena, double ratio) {
    const std::uint32_t size = arena.size();
    std::vector<Node> nodes(size);
    std::vector<std::uint32_t> parents(size, 0);
    std::vector<bool> keep(size, false);
    for (std::uint32_t i = 1; i < size; ++i) {
        const NodeRecord& record = *arena.at(i);
        Node& node = nodes[i];
        node.name = display_name(*record.site);
        node.file = record.site->file;
        node.line = record.site->line;
        node.count = record.count.load(std::memory_order_relaxed);
        node.total = to_nanos(record.total.load(std::memory_order_relaxed), ratio);
        node.min = node.count == 0 ? Nanos(0) : to_nanos(record.min.load(std::memory_order_relaxed), ratio);
        node.max = to_nanos(record.max.load(std::memory_order_relaxed), ratio);
        node.throws = record.throws.load(std::memory_order_relaxed);
        node.dropped = record.dropped.load(std::memory_order_relaxed);
        parents[i] = record.parent;
        keep[i] = node.count != 0 || node.dropped != 0;
    }
    Node root;
    root.dropped = arena.at(0)->dropped.load(std::memory_order_relaxed);
    for (std::uint32_t i = size; i-- > 1;) {  // children have larger indices than their parents
        if (!keep[i]) continue;
        keep[parents[i]] = true;
        Node& parent = parents[i] == 0 ? root : nodes[parents[i]];
        parent.children.push_back(std::move(nodes[i]));
    }
    std::vector<Node*> stack{&root};  // children were gathered last-first
    while (!stack.empty()) {
        Node* node = stack.back();
        stack.pop_back();
        std::reverse(node->children.begin(), node->children.end());
        for (Node& child : node->children) stack.push_back(&child);
    }
    if (root.dropped != 0) {  // drops at the top level have no node to live on: keep them visible
        Node marker;
        marker.name = "(calls not recorded at the top level)";
        marker.dropped = root.dropped;
        root.children.push_back(std::move(marker));
    }
    return std::move(root.children);
}

inline void merge_into(std::vector<Node>& into, const Node& node) {
    for (Node& existing : into) {
        if (existing.same_site(node)) {
            existing.merge(node);
            return;
        }
    }
    into.push_back(node);
}

inline ThreadProfile thread_profile(ThreadState& state, double ratio) {
    ThreadProfile profile;
    profile.thread_name = state.thread_name();
    profile.thread_id = state.id;
    if (state.main.reset_pending()) return profile;  // logically empty until the owner clears it
    profile.dropped_depth = state.main.dropped_depth();
    profile.dropped_nodes = state.main.dropped_nodes();
    profile.roots = to_values(state.main, ratio);
    return profile;
}

inline ThreadTimeline thread_timeline(ThreadState& state, double ratio) {
    ThreadTimeline result;
    result.thread_name = state.thread_name();
    result.thread_id = state.id;
    // With the test clock, ticks are nanoseconds since the clock's own zero.
    const std::uint64_t origin = g_test_clock.load() != nullptr ? 0 : tick_anchor().tick;
    std::lock_guard<std::mutex> lock(state.timeline_mutex);
    result.dropped = state.spans_dropped;
    result.spans.reserve(state.spans.size());
    for (const RawSpan& raw : state.spans) {
        Span span;
        span.name = display_name(*raw.site);
        span.file = raw.site->file;
        span.line = raw.site->line;
        span.start = to_nanos(raw.start > origin ? raw.start - origin : 0, ratio);
        span.duration = to_nanos(raw.end > raw.start ? raw.end - raw.start : 0, ratio);
        span.depth = raw.depth;
        span.threw = raw.threw;
        result.spans.push_back(std::move(span));
    }
    return result;
}

inline void retire_thread(ThreadState& state) {
    ThreadRegistry& registry = threads();
    std::uint64_t resets_before = 0;
    {
        std::lock_guard<std::mutex> lock(registry.mutex);
        resets_before = registry.resets;
    }
    state.refresh_os_name();
    const double ratio = ns_per_tick();
    ThreadProfile profile = thread_profile(state, ratio);
    profile.exited = true;
    ThreadTimeline timeline = thread_timeline(state, ratio);
    std::lock_guard<std::mutex> lock(registry.mutex);
    if (registry.resets != resets_before) profile.roots.clear();  // taken before a reset() that has run since
    if (!timeline.spans.empty() || timeline.dropped != 0) {
        auto same = std::find_if(registry.exited_timelines.begin(), registry.exited_timelines.end(),
                                 [&](const ThreadTimeline& t) { return t.thread_name == timeline.thread_name; });
        if (same == registry.exited_timelines.end()) {
            registry.exited_timelines.push_back(std::move(timeline));
        } else {  // the per-thread bound holds for the folded entry too
            const std::size_t limit = g_timeline_limit.load();
            for (Span& span : timeline.spans) {
                if (same->spans.size() < limit) same->spans.push_back(std::move(span));
                else ++same->dropped;
            }
            same->dropped += timeline.dropped;
        }
    }
    registry.live.erase(std::remove_if(registry.live.begin(), registry.live.end(),
                                       [&](const std::shared_ptr<ThreadState>& p) { return p.get() == &state; }),
                        registry.live.end());
    for (ThreadProfile& folded : registry.exited) {
        if (folded.thread_name != profile.thread_name) continue;
        for (const Node& root : profile.roots) merge_into(folded.roots, root);
        folded.dropped_depth += profile.dropped_depth;
        folded.dropped_nodes += profile.dropped_nodes;
        return;
    }
    registry.exited.push_back(std::move(profile));
}

struct ThreadOwner {  // its destructor runs at thread exit
    std::shared_ptr<ThreadState> state;
    bool gone = false;
    ~ThreadOwner() {
        gone = true;
        tls_arena() = nullptr;
        tls_state() = nullptr;
        if (state) {
            try {
                retire_thread(*state);
            } catch (...) {  // out of memory at thread exit: the thread's data is lost, the program is not
            }
        }
    }
};

// fork() copies only the calling thread: a registry lock held by another thread at that moment would
// never be released in the child. So the locks are taken around fork(), and the child forgets the
// other threads (their states are leaked, not destroyed: their own mutexes may be held).
inline void install_fork_handlers() noexcept {
#if defined(__unix__) || defined(__APPLE__)
    static const int installed = pthread_atfork(
        [] {  // lock order as everywhere: registry, this thread's own, sessions, names
            // A static being initialised by another thread at the fork would stay "in progress" in
            // the child, whose first use of it would wait for ever: let that initialisation finish.
            tick_anchor();
            threads().mutex.lock();
            if (ThreadState* self = tls_state()) {
                self->timeline_mutex.lock();
                self->name_mutex.lock();
            }
            sessions().mutex.lock();
            name_cache().mutex.lock();
        },
        [] {
            name_cache().mutex.unlock();
            sessions().mutex.unlock();
            if (ThreadState* self = tls_state()) {
                self->name_mutex.unlock();
                self->timeline_mutex.unlock();
            }
            threads().mutex.unlock();
        },
        [] {
            ThreadRegistry& registry = threads();
            auto* orphans = new (std::nothrow) std::vector<std::shared_ptr<ThreadState>>;
            for (auto& state : registry.live)
                if (state.get() != tls_state() && orphans != nullptr) orphans->push_back(std::move(state));
            registry.live.erase(std::remove(registry.live.begin(), registry.live.end(), nullptr), registry.live.end());
            name_cache().mutex.unlock();
            sessions().mutex.unlock();
            if (ThreadState* self = tls_state()) {
                self->name_mutex.unlock();
                self->timeline_mutex.unlock();
            }
            registry.mutex.unlock();
        });
    (void)installed;
#endif
}
// Before main (dynamic initialisation of an inline variable): profile(), reset() and sessions take the
// same locks, and the tick anchor's guard, from threads that never record, so installing the handlers
// at a thread's first scope is too late for them.
inline const bool g_fork_handlers_installed = (install_fork_handlers(), true);

inline Arena* thread_arena_slow() noexcept {
    if (tls_arena() != nullptr) return tls_arena();
    install_fork_handlers();
    static thread_local ThreadOwner owner;
    if (owner.gone) return nullptr;  // a scope in another thread_local's destructor, after ours
    try {
        tick_anchor();
        ThreadRegistry& registry = threads();
        std::shared_ptr<ThreadState> state;
        {
            std::lock_guard<std::mutex> lock(registry.mutex);
            state = std::make_shared<ThreadState>(registry.next_id++, registry.limits);
        }
        state->refresh_os_name();  // before any snapshot can see the thread
        {
            std::lock_guard<std::mutex> lock(registry.mutex);
            registry.live.push_back(state);
        }
        owner.state = state;
        tls_state() = state.get();
        tls_arena() = &state->main;
        return tls_arena();
    } catch (...) {
        return nullptr;
    }
}

inline ThreadState* thread_state() noexcept {
    if (tls_state() == nullptr) thread_arena_slow();
    return tls_state();
}

inline std::uint64_t now_ticks(bool fake) noexcept {
    if (fake) {
        const ClockFunction clock = g_test_clock.load(std::memory_order_relaxed);
        return clock != nullptr ? clock() : 0;
    }
    return ticks();
}

void Scope::begin_slow(Site& site, std::uint8_t flags) noexcept {  // declared inline in the class
    Arena* arena = tls_arena() != nullptr ? tls_arena() : thread_arena_slow();
    if (arena == nullptr) return;
    mode_ = 0;
    ThreadState& state = *tls_state();
    arena->apply_pending_reset();  // before a capture, whose data is merged into this arena later
    try {
        std::uint32_t epoch = 0;
        std::uint32_t mask = (flags & kSessions) != 0 ? watch_mask(site, epoch) & ~state.capturing : 0;
        if (mask != 0) {  // outermost watched scope for these sessions: record it into its own arena
            std::vector<std::shared_ptr<SessionState>> watching;
            {
                SessionRegistry& registry = sessions();
                std::lock_guard<std::mutex> lock(registry.mutex);
                if (g_epoch.load(std::memory_order_relaxed) != epoch) mask = 0;  // sessions changed: not this call
                for (int i = 0; i < kMaxSessions; ++i)
                    if ((mask & (1u << i)) != 0 && registry.slots[i]) watching.push_back(registry.slots[i]);
            }
            if (!watching.empty()) {
                const std::uint32_t max_depth = arena->max_depth();
                auto capture = std::make_unique<Capture>(arena->max_nodes(),
                                                         max_depth > arena->depth() ? max_depth - arena->depth() : 1,
                                                         arena);
                capture->mask = mask;
                capture->sessions = std::move(watching);
                capture->trace.start = std::chrono::system_clock::now();
                Arena* capture_arena = &capture->arena;
                state.captures.push_back(std::move(capture));  // the last step that can throw
                state.capturing |= mask;
                arena = capture_arena;
                tls_arena() = arena;
                mode_ |= kCaptureRoot;
            }
        }
    } catch (...) {  // out of memory while starting a capture: record the scope without it
    }
    node_ = arena->enter(&site);  // never null for a fresh capture arena: it has room for its root
    if (node_ == nullptr) return;
    arena_ = arena;
    if ((flags & kTestClock) != 0) mode_ |= kFakeClock;
    if ((flags & kTimeline) != 0) {
        mode_ |= kTimelineSpan;
        ++state.timeline_depth;
    }
    uncaught_ = arena->uncaught_exceptions();
    start_ = now_ticks((mode_ & kFakeClock) != 0);
}

void Scope::begin_dynamic(Site& site, std::string_view name) noexcept {  // declared inline in the class
    ThreadState* state = thread_state();
    if (state == nullptr) return;
    try {
        name = name.substr(0, TRACETREE_MAX_NAME_LENGTH);
        const Site* const origin = &site;  // the key: which call site, then which name
        state->dynamic_key.assign(reinterpret_cast<const char*>(&origin), sizeof origin);
        state->dynamic_key.append(name.data(), name.size());
        auto found = state->dynamic_sites.find(state->dynamic_key);
        if (found == state->dynamic_sites.end()) {
            Arena& arena = *tls_arena();
            if (state->dynamic_sites.size() >= arena.max_nodes()) {  // as many names as nodes: no room left
                arena.drop(arena.at(arena.current()), 1);
                return;
            }
            auto made = std::make_unique<DynamicSite>(std::string(name), site);
            found = state->dynamic_sites.emplace(state->dynamic_key, std::move(made)).first;
        }
        begin_slow(found->second->site, g_flags.load(std::memory_order_relaxed));
    } catch (...) {  // out of memory: this call is not recorded
    }
}

inline void deliver(SessionState& session, const Trace& trace) {
    if (trace.root.total < session.min_cost) return;
    {
        std::lock_guard<std::mutex> lock(session.mutex);
        if (session.stopped) return;
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
    const std::uint64_t ticket = session.reserved.fetch_add(1, std::memory_order_relaxed);
    if (ticket >= session.limit) return;
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
        if (!session.on_trace) session.queue.push_back(trace);
        ++session.delivered;
    }
    if (ticket + 1 == session.limit) unregister_session(session);
}

// Folds a finished capture into the arena it was started from, as if it had been recorded there.
inline void merge_capture(const Arena& from, Arena& into) {
    const std::uint32_t size = from.size();
    std::vector<std::uint32_t> mapped(size, 0);  // index in `into`, 0 when not recorded there
    std::vector<std::uint32_t> kept(size, 0);    // the nearest ancestor recorded in `into`
    mapped[0] = kept[0] = into.current();
    for (std::uint32_t i = 1; i < size; ++i) {
        const NodeRecord& source = *from.at(i);
        const std::uint64_t count = source.count.load(std::memory_order_relaxed);
        const std::uint32_t parent = mapped[source.parent];
        const std::uint32_t index = parent != 0 || source.parent == 0 ? into.child(parent, source.site) : 0;
        kept[i] = index != 0 ? index : kept[source.parent];
        mapped[i] = index;
        if (index == 0) {
            into.drop(into.at(kept[i]), count);
            continue;
        }
        NodeRecord& target = *into.at(index);
        bump(target.count, count);
        bump(target.total, source.total.load(std::memory_order_relaxed));
        bump_saturating(target.throws, source.throws.load(std::memory_order_relaxed));
        bump_saturating(target.dropped, source.dropped.load(std::memory_order_relaxed));
        target.min.store(std::min(target.min.load(std::memory_order_relaxed), source.min.load(std::memory_order_relaxed)),
                         std::memory_order_relaxed);
        target.max.store(std::max(target.max.load(std::memory_order_relaxed), source.max.load(std::memory_order_relaxed)),
                         std::memory_order_relaxed);
    }
    into.add_dropped(from.dropped_depth(), from.dropped_nodes());
}

void Scope::end_slow() noexcept {  // declared inline in the class
    const std::uint64_t end = now_ticks((mode_ & kFakeClock) != 0);
    const bool threw = arena_->uncaught_exceptions() > uncaught_;
    arena_->leave(node_, end - start_, uncaught_);
    if (tls_state() == nullptr) return;
    ThreadState& state = *tls_state();
    if ((mode_ & kTimelineSpan) != 0) {
        --state.timeline_depth;
        try {
            std::lock_guard<std::mutex> lock(state.timeline_mutex);
            if (node_->site != nullptr && state.spans.size() < g_timeline_limit.load(std::memory_order_relaxed))
                state.spans.push_back(RawSpan{node_->site, start_, end, state.timeline_depth, threw});
            else
                ++state.spans_dropped;
        } catch (...) {  // out of memory: the span is lost, the program goes on
        }
    }
    if ((mode_ & kCaptureRoot) == 0) return;
    std::unique_ptr<Capture> capture = std::move(state.captures.back());
    state.captures.pop_back();
    state.capturing &= ~capture->mask;
    tls_arena() = capture->parent;
    try {
        const double ratio = ns_per_tick();
        const Nanos cost = to_nanos(end - start_, ratio);
        const bool wanted = std::any_of(capture->sessions.begin(), capture->sessions.end(), [&](const auto& session) {
            return cost >= session->min_cost && session->reserved.load(std::memory_order_relaxed) < session->limit;
        });
        std::vector<Node> roots = wanted ? to_values(capture->arena, ratio) : std::vector<Node>{};  // cheap calls skip this
        if (!roots.empty()) {
            Trace& trace = capture->trace;
            trace.root = std::move(roots.front());
            state.refresh_os_name();
            trace.thread_name = state.thread_name();
            trace.thread_id = state.id;
            for (const auto& session : capture->sessions) deliver(*session, trace);
        }
        merge_capture(capture->arena, *capture->parent);
    } catch (...) {  // out of memory while delivering: this capture is lost, the program goes on
    }
}

inline std::string timestamp(std::chrono::system_clock::time_point time, bool utc) {
    using namespace std::chrono;
    const std::int64_t ms = duration_cast<milliseconds>(time.time_since_epoch()).count();
    const std::int64_t ms_part = ((ms % 1000) + 1000) % 1000;
    const std::time_t seconds = static_cast<std::time_t>((ms - ms_part) / 1000);
    std::tm parts{};
#if defined(_WIN32)
    utc ? gmtime_s(&parts, &seconds) : localtime_s(&parts, &seconds);
#else
    utc ? gmtime_r(&seconds, &parts) : localtime_r(&seconds, &parts);
#endif
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02d %02d:%02d:%02d.%03d", parts.tm_year + 1900, parts.tm_mon + 1,
                  parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, static_cast<int>(ms_part));
    return buffer;
}

// Java's Double.toString: shortest round-trip digits; plain between 1e-3 and 1e7 with at least one
// decimal ("3.0", "0.096584"), otherwise "d.dddE±n" ("8.55E-4").
inline std::string java_double(double value) {
    if (value != value) return "NaN";
    if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
    if (value > 1.7976931348623157e308 || value < -1.7976931348623157e308) return value > 0 ? "Infinity" : "-Infinity";
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
    std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
    std::string out;
    if (text.front() == '-') {
        out = "-";
        text.remove_prefix(1);
    }
    const std::size_t e = text.find('e');
    std::string digits;
    for (char c : text.substr(0, e)) if (c != '.') digits += c;
    int exponent = 0;
    const bool negative = text[e + 1] == '-';
    for (char c : text.substr(e + 2)) exponent = exponent * 10 + (c - '0');
    if (negative) exponent = -exponent;
    const double magnitude = value < 0 ? -value : value;
    if (magnitude >= 1e-3 && magnitude < 1e7) {
        if (exponent < 0) return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
        const std::size_t point = static_cast<std::size_t>(exponent) + 1;
        if (digits.size() <= point) return out + digits + std::string(point - digits.size(), '0') + ".0";
        return out + digits.substr(0, point) + "." + digits.substr(point);
    }
    return out + digits.substr(0, 1) + "." + (digits.size() > 1 ? digits.substr(1) : "0") + "E" + std::to_string(exponent);
}

// part/whole as a percentage with two decimals, rounded half up on the exact ratio.
inline std::string percent(Nanos part, Nanos whole) {
    if (whole.count() <= 0 || part.count() <= 0) return "0.00";
    std::uint64_t p = static_cast<std::uint64_t>(part.count()), w = static_cast<std::uint64_t>(whole.count());
    while (p > ~std::uint64_t{0} / 20000) {  // keep p * 20000 in range; the ratio barely moves
        p >>= 1;
        w = std::max<std::uint64_t>(w >> 1, 1);
    }
    const std::uint64_t hundredths = (p * 20000 / w + 1) / 2;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%llu.%02llu", static_cast<unsigned long long>(hundredths / 100),
                  static_cast<unsigned long long>(hundredths % 100));
    return buffer;
}

inline bool use_colour(std::ostream& out, Colour colour) {
    if (colour != Colour::automatic) return colour == Colour::always;
#if defined(__unix__) || defined(__APPLE__)
    if (out.rdbuf() == std::cout.rdbuf()) return isatty(1) != 0;
    if (out.rdbuf() == std::cerr.rdbuf() || out.rdbuf() == std::clog.rdbuf()) return isatty(2) != 0;
#endif
    return false;
}

// The cost bracket: root `[Xms]`, a call `[P.PP% Xms ]`, folded `[P.PP% min=..,max=..,total=..,count=N]`.
// `parent` is null for roots and for children of a still-running node (no total to divide by).
inline std::string cost_text(const Node& node, const Node* parent) {
    if (node.count == 0) return "[running]";
    std::string text = "[";
    if (parent != nullptr) text += percent(node.total, parent->total) + "% ";
    if (node.count == 1) return text + java_millis(node.total) + (parent != nullptr ? "ms ]" : "ms]");
    return text + "min=" + java_millis(node.min) + "ms,max=" + java_millis(node.max) + "ms,total=" +
           java_millis(node.total) + "ms,count=" + std::to_string(node.count) + "]";
}

inline const Node* costliest_below(const Node& node, const Node* best) {
    for (const Node& child : node.children) {
        if (best == nullptr || child.total > best->total) best = &child;
        best = costliest_below(child, best);
    }
    return best;
}

struct TreeWriter {
    std::ostream& out;
    const Node* highlighted;  // null: no colour

    void line(const std::string& prefix, bool last, const Node& node, const Node* parent, bool with_line) {
        out << prefix << (last ? "`---" : "+---");
        const std::string cost = cost_text(node, parent);
        if (&node == highlighted) out << "\x1b[31m" << cost << " \x1b[m";
        else out << cost << ' ';
        out << node.name;
        if (with_line && node.line != 0) out << " #" << node.line;
        if (node.throws == 1) out << " [throws Exception]";
        if (node.throws > 1) out << " [throws Exception," << node.throws << "]";
        out << '\n';
        const std::string inner = prefix + (last ? "    " : "|   ");
        const Node* total_holder = node.count != 0 ? &node : nullptr;
        for (std::size_t i = 0; i < node.children.size(); ++i)
            line(inner, i + 1 == node.children.size() && node.dropped == 0, node.children[i], total_holder, true);
        if (node.dropped != 0)
            out << inner << "`---[not recorded: " << node.dropped << " calls past the depth or node limit]\n";
    }
};

inline void write_header(std::ostream& out, std::chrono::system_clock::time_point time, const std::string& thread_name,
                         std::uint32_t thread_id, const std::vector<std::pair<std::string, std::string>>& fields,
                         bool utc) {
    char id[16];
    std::snprintf(id, sizeof id, "%x", thread_id);  // Arthas prints thread ids in hex
    out << "`---ts=" << timestamp(time, utc) << ";thread_name=" << thread_name << ";id=" << id;
    for (const auto& field : fields) out << ';' << field.first << '=' << field.second;
    out << '\n';
}

}  // namespace detail

// ==== public functions ===========================================================================

inline Nanos Node::self() const {
    Nanos children_total{0};
    for (const Node& child : children) children_total += child.total;
    return total > children_total ? total - children_total : Nanos(0);
}

inline void Node::merge(const Node& other) {
    if (other.count != 0) {
        min = count == 0 ? other.min : std::min(min, other.min);
        max = std::max(max, other.max);
    }
    count += other.count;
    total += other.total;
    throws += other.throws;
    dropped += other.dropped;
    for (const Node& child : other.children) detail::merge_into(children, child);
}

inline ThreadProfile Profile::merged() const {
    ThreadProfile all;
    all.thread_name = "all threads";
    for (const ThreadProfile& thread : threads) {
        for (const Node& root : thread.roots) detail::merge_into(all.roots, root);
        all.dropped_depth += thread.dropped_depth;
        all.dropped_nodes += thread.dropped_nodes;
    }
    return all;
}

inline void set_enabled(bool on) noexcept {
    if (on) detail::g_flags.fetch_or(detail::kRecording);
    else detail::g_flags.fetch_and(static_cast<std::uint8_t>(~detail::kRecording));
}
inline bool enabled() noexcept { return (detail::g_flags.load() & detail::kRecording) != 0; }

inline void set_clock(ClockFunction now) noexcept {
    detail::g_test_clock.store(now);
    if (now != nullptr) detail::g_flags.fetch_or(detail::kTestClock);
    else detail::g_flags.fetch_and(static_cast<std::uint8_t>(~detail::kTestClock));
}

inline void set_limits(const Limits& limits) {
    if (limits.max_depth < 1 || limits.max_depth > 100000)
        throw std::invalid_argument("tracetree: max_depth must be between 1 and 100000, got " +
                                    std::to_string(limits.max_depth));
    if (limits.max_nodes < 16 || limits.max_nodes > (1u << 24))
        throw std::invalid_argument("tracetree: max_nodes must be between 16 and 16777216, got " +
                                    std::to_string(limits.max_nodes));
    detail::ThreadRegistry& registry = detail::threads();
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.limits = limits;
    for (const auto& state : registry.live) state->main.set_max_depth(limits.max_depth);
}

inline Limits limits() {
    detail::ThreadRegistry& registry = detail::threads();
    std::lock_guard<std::mutex> lock(registry.mutex);
    return registry.limits;
}

inline void set_thread_name(std::string_view name) {
    detail::ThreadState* state = detail::thread_state();
    if (state == nullptr) return;
    std::lock_guard<std::mutex> lock(state->name_mutex);
    state->name = std::string(name.substr(0, TRACETREE_MAX_NAME_LENGTH));
    state->named = true;
}

inline void annotate(std::string_view key, std::string_view value) {
    detail::ThreadState* state = detail::tls_state();
    if (state == nullptr) return;
    for (const auto& capture : state->captures)
        capture->trace.fields.emplace_back(std::string(key.substr(0, TRACETREE_MAX_NAME_LENGTH)),
                                           std::string(value.substr(0, TRACETREE_MAX_NAME_LENGTH)));
}

inline Profile profile() {
    Profile result;
    result.taken = std::chrono::system_clock::now();
    const double ratio = detail::ns_per_tick();
    detail::ThreadRegistry& registry = detail::threads();
    std::vector<std::shared_ptr<detail::ThreadState>> live;
    {
        std::lock_guard<std::mutex> lock(registry.mutex);
        live = registry.live;
        result.threads = registry.exited;
    }
    for (const auto& state : live) result.threads.push_back(detail::thread_profile(*state, ratio));
    std::sort(result.threads.begin(), result.threads.end(),
              [](const ThreadProfile& a, const ThreadProfile& b) { return a.thread_id < b.thread_id; });
    return result;
}

inline void start_timeline(std::size_t max_spans_per_thread) {
    if (max_spans_per_thread < 1 || max_spans_per_thread > (std::size_t{1} << 24))
        throw std::invalid_argument("tracetree: max_spans_per_thread must be between 1 and 16777216, got " +
                                    std::to_string(max_spans_per_thread));
    detail::ThreadRegistry& registry = detail::threads();
    std::lock_guard<std::mutex> lock(registry.mutex);
    detail::g_timeline_limit.store(max_spans_per_thread);
    registry.exited_timelines.clear();
    for (const auto& state : registry.live) {
        std::lock_guard<std::mutex> spans_lock(state->timeline_mutex);
        state->spans.clear();
        state->spans_dropped = 0;
    }
    detail::g_flags.fetch_or(detail::kTimeline);
}

inline void stop_timeline() noexcept { detail::g_flags.fetch_and(static_cast<std::uint8_t>(~detail::kTimeline)); }

inline Timeline timeline() {
    Timeline result;
    const double ratio = detail::ns_per_tick();
    if (detail::g_test_clock.load() == nullptr) {
        const auto since_anchor = Nanos(detail::steady_ns() - detail::tick_anchor().ns);
        result.origin = std::chrono::system_clock::now() - std::chrono::duration_cast<std::chrono::system_clock::duration>(since_anchor);
    }
    detail::ThreadRegistry& registry = detail::threads();
    std::vector<std::shared_ptr<detail::ThreadState>> live;
    {
        std::lock_guard<std::mutex> lock(registry.mutex);
        live = registry.live;
        result.threads = registry.exited_timelines;
    }
    for (const auto& state : live) result.threads.push_back(detail::thread_timeline(*state, ratio));
    std::sort(result.threads.begin(), result.threads.end(),
              [](const ThreadTimeline& a, const ThreadTimeline& b) { return a.thread_id < b.thread_id; });
    return result;
}

inline void reset() {
    detail::ThreadRegistry& registry = detail::threads();
    std::lock_guard<std::mutex> lock(registry.mutex);
    for (const auto& state : registry.live) state->main.request_reset();
    registry.exited.clear();
    ++registry.resets;
}

inline TraceSession::TraceSession(TraceRequest request) {
    if (request.limit < 1 || request.limit > 1000000)
        throw std::invalid_argument("tracetree: trace limit must be between 1 and 1000000, got " +
                                    std::to_string(request.limit));
    if (request.min_cost < Nanos(0)) throw std::invalid_argument("tracetree: negative min_cost");
    state_ = std::make_shared<detail::SessionState>(std::move(request));
    detail::SessionRegistry& registry = detail::sessions();
    std::lock_guard<std::mutex> lock(registry.mutex);
    for (int i = 0; i < detail::kMaxSessions; ++i) {
        if (registry.slots[i]) continue;
        registry.slots[i] = state_;
        state_->slot = i;
        detail::update_session_flag_locked(registry);
        return;
    }
    throw std::invalid_argument("tracetree: too many trace sessions (at most 32 at once)");
}

inline TraceSession& TraceSession::operator=(TraceSession&& other) noexcept {
    if (this != &other) {
        stop();
        state_ = std::move(other.state_);
    }
    return *this;
}

inline TraceSession::~TraceSession() {
    if (state_) stop();
}

inline void TraceSession::stop() {
    if (!state_) return;
    detail::unregister_session(*state_);
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->stopped = true;
    state_->changed.notify_all();
    // A callback still running may use what the caller is about to destroy; from inside the callback
    // itself, waiting would never end.
    const std::uint32_t own = detail::callback_session() == state_.get() ? 1 : 0;
    state_->changed.wait(lock, [&] { return state_->callbacks_running <= own; });
}

inline std::optional<Trace> TraceSession::next(Nanos timeout) {
    if (!state_) return std::nullopt;
    detail::SessionState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mutex);
    s.changed.wait_for(lock, timeout, [&] { return !s.queue.empty() || s.stopped || s.delivered >= s.limit; });
    if (s.queue.empty()) return std::nullopt;
    Trace trace = std::move(s.queue.front());
    s.queue.pop_front();
    return trace;
}

inline std::vector<Trace> TraceSession::collect(Nanos timeout) {
    if (!state_) return {};
    detail::SessionState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mutex);
    s.changed.wait_for(lock, timeout, [&] { return s.stopped || s.delivered >= s.limit; });
    std::vector<Trace> traces(std::make_move_iterator(s.queue.begin()), std::make_move_iterator(s.queue.end()));
    s.queue.clear();
    return traces;
}

inline std::uint64_t TraceSession::captured() const {
    if (!state_) return 0;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->delivered;
}

inline bool TraceSession::done() const {
    if (!state_) return true;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->stopped || state_->delivered >= state_->limit;
}

inline std::string java_millis(Nanos duration) {
    return detail::java_double(static_cast<double>(duration.count()) / 1000000.0);
}

inline void render(std::ostream& out, const Trace& trace, const RenderOptions& options) {
    detail::write_header(out, trace.start, trace.thread_name, trace.thread_id, trace.fields, options.utc);
    const Node* highlighted = detail::use_colour(out, options.colour) ? detail::costliest_below(trace.root, nullptr) : nullptr;
    detail::TreeWriter{out, highlighted}.line("    ", true, trace.root, nullptr, false);
    out << '\n';
}

inline void render(std::ostream& out, const ThreadProfile& thread, std::chrono::system_clock::time_point taken,
                   const RenderOptions& options) {
    std::vector<std::pair<std::string, std::string>> fields;
    if (thread.exited) fields.emplace_back("exited", "true");
    if (thread.dropped_depth != 0) fields.emplace_back("dropped_depth", std::to_string(thread.dropped_depth));
    if (thread.dropped_nodes != 0) fields.emplace_back("dropped_nodes", std::to_string(thread.dropped_nodes));
    detail::write_header(out, taken, thread.thread_name, thread.thread_id, fields, options.utc);
    const Node* highlighted = nullptr;
    if (detail::use_colour(out, options.colour))
        for (const Node& root : thread.roots) highlighted = detail::costliest_below(root, highlighted);
    detail::TreeWriter writer{out, highlighted};
    for (std::size_t i = 0; i < thread.roots.size(); ++i)
        writer.line("    ", i + 1 == thread.roots.size(), thread.roots[i], nullptr, false);
    out << '\n';
}

inline void render(std::ostream& out, const Profile& profile, const RenderOptions& options) {
    for (const ThreadProfile& thread : profile.threads) render(out, thread, profile.taken, options);
}

inline std::string to_string(const Trace& trace, const RenderOptions& options) {
    std::ostringstream out;
    render(out, trace, options);
    return out.str();
}

inline std::string to_string(const Profile& profile, const RenderOptions& options) {
    std::ostringstream out;
    render(out, profile, options);
    return out.str();
}

namespace detail {

inline std::string human_duration(Nanos duration) {
    const double ns = static_cast<double>(duration.count());
    char buffer[32];
    if (ns < 1e3) std::snprintf(buffer, sizeof buffer, "%.0f ns", ns);
    else if (ns < 1e6) std::snprintf(buffer, sizeof buffer, "%.2f \u00b5s", ns / 1e3);
    else if (ns < 1e9) std::snprintf(buffer, sizeof buffer, "%.2f ms", ns / 1e6);
    else std::snprintf(buffer, sizeof buffer, "%.2f s", ns / 1e9);
    return buffer;
}

inline std::string pad_left(const std::string& text, std::size_t width) {  // by code points, for "µ"
    std::size_t visible = 0;
    for (char c : text) visible += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return visible >= width ? text : std::string(width - visible, ' ') + text;
}

inline void human_rows(std::ostream& out, const Node& node, const std::string& prefix, const std::string& branch) {
    out << pad_left(human_duration(node.total), 11) << pad_left(human_duration(node.self()), 11)
        << pad_left(std::to_string(node.count), 8) << pad_left(human_duration(node.min), 11)
        << pad_left(human_duration(node.max), 11) << "  " << prefix << branch << node.name;
    if (node.line != 0 && !branch.empty()) out << " #" << node.line;
    if (node.throws != 0) out << "  (" << node.throws << " threw)";
    if (node.dropped != 0) out << "  (" << node.dropped << " calls below not recorded)";
    out << '\n';
    const std::string inner = branch.empty() ? prefix : prefix + (branch == "`- " ? "   " : "|  ");
    for (std::size_t i = 0; i < node.children.size(); ++i)
        human_rows(out, node.children[i], inner, i + 1 == node.children.size() ? "`- " : "+- ");
}

inline void human_table(std::ostream& out, const std::string& title, const std::vector<Node>& roots) {
    out << title << '\n'
        << "      total       self   count        min        max  call tree\n";
    for (const Node& root : roots) human_rows(out, root, "", "");
    out << '\n';
}

}  // namespace detail

inline void render_human(std::ostream& out, const Trace& trace) {
    detail::human_table(out,
                        "trace of " + trace.root.name + " on " + trace.thread_name + " (id " +
                            std::to_string(trace.thread_id) + ") at " + detail::timestamp(trace.start, false),
                        {trace.root});
}

inline void render_human(std::ostream& out, const Profile& profile) {
    for (const ThreadProfile& thread : profile.threads)
        detail::human_table(out,
                            "profile of " + thread.thread_name + " (id " + std::to_string(thread.thread_id) +
                                (thread.exited ? ", exited" : "") + ")",
                            thread.roots);
}

}  // namespace tracetree

#endif  // TRACETREE_TRACETREE_HPP
