// tracetree values: the plain trees a trace, a profile or a timeline produces. SPDX-License-Identifier: MIT
//
// Plain data: the recorder produces them, tests and loaders build them by hand, renderers only read
// them. Nothing here records or knows about threads.
#ifndef TRACETREE_VALUES_HPP
#define TRACETREE_VALUES_HPP

#include "core/abi.hpp"  // the version and namespace macros

#include <algorithm>  // std::min, std::max
#include <chrono>     // durations and wall-clock times
#include <cstddef>
#include <cstdint>
#include <functional> // std::hash of names and files, to merge wide trees
#include <optional>   // a throw's message: absent when the exception has no what()
#include <string>
#include <string_view>
#include <utility>    // std::pair
#include <vector>

TRACETREE_BEGIN_NAMESPACE

using Nanos = std::chrono::nanoseconds;

namespace detail {
// What a trace or flight recorder patches below the functions it matches (xray/xray.hpp), in direct
// calls: two shows the structure of a write of db_bench's shape within 1.3x its untraced time, three
// already reaches its skip list's comparisons, most of its calls (docs/xray.md, "What it costs").
inline constexpr int kDefaultCallDepth = 2;
inline constexpr int kMaxCallDepth = 64;
// Node::file of an XRay function entered by a tail call: the renderers mark it "[tail call]".
inline constexpr const char* kTailCallFile = "(tail call)";
}  // namespace detail

enum class NodeKind : std::uint8_t {
    call,    // a scope: its calls, folded
    thrown,  // an exception thrown while its parent was the innermost open scope (Arthas `throw:` lines)
};

// How much of a traced call's time its thread was not running: preempted while runnable, or blocked.
// On a trace's root it is measured (runtime/cpu_time.hpp); on a node below the root it is a lower
// bound, `at_least`: the node's total minus the root's time on CPU, as no part of an invocation runs
// longer than the whole. Profiles carry none; nor does a trace on the test clock (set_clock).
struct OffCpu {
    Nanos off{};                    // off CPU, of the node's total
    std::optional<Nanos> runnable;  // of which preempted, waiting for a CPU (unset: the source cannot tell)
    bool at_least = false;          // a lower bound (nodes below the root)
};

struct Node {
    NodeKind kind = NodeKind::call;
    std::string name;        // a call: "ns::Class::method()" or the scope's text; thrown: the exception's type
    std::string file;        // source file ("" when unknown; "(tail call)": an XRay function entered by a tail call)
    std::uint32_t line = 0;  // a call: the line of its scope macro; thrown: the line of TRACETREE_THROW (0: unknown)
    std::uint64_t count = 0; // completed calls (thrown: throws); a call with 0 was still running at the snapshot
    Nanos total{}, min{}, max{};
    std::uint64_t throws = 0;   // calls left by an exception
    std::uint64_t dropped = 0;  // calls below this node not recorded: depth or node limit reached
    std::optional<std::string> message;  // thrown: what() of the last one, when it derives from std::exception
    std::vector<std::pair<std::string, std::string>> values;  // TRACETREE_WATCH values, when a trace asked for them
    // Continued here, not called here: a hand-off's path (handoff.hpp) on the thread that ran the work.
    // Its count is 0 (the calls were counted where they were made) and its total its children's.
    bool continued = false;
    std::string continued_on;  // the innermost node of such a path: the thread that ran the work below it
    // A call folded with such a path (Profile::merged()): the part of total continued on other threads;
    // min and max stay the calls' own.
    Nanos continued_total{};
    // In a trace: work handed off from its parent that ran on another thread meanwhile (handoff.hpp).
    // Its total is not part of the parent's, which is wall time; its percentage is of that wall time,
    // so such siblings may add up to more than 100%.
    bool parallel = false;
    std::optional<OffCpu> off_cpu;  // traces only: see OffCpu
    std::vector<Node> children;  // in order of first call

    Nanos self() const;             // total minus the children's totals (not parallel ones), never negative
    bool mostly_off_cpu() const { return off_cpu && off_cpu->off * 2 > total; }
    void merge(const Node& other);  // adds counts and times, folds children with the same site
    bool same_site(const Node& other) const {
        return kind == other.kind && line == other.line && name == other.name && file == other.file;
    }
};

struct Trace {  // one captured invocation of a watched scope, as Arthas `trace` prints it
    std::chrono::system_clock::time_point start;
    std::string thread_name;
    std::uint32_t thread_id = 0;  // the recorder's own number for the thread, from 1 in the order threads first recorded
    std::uint32_t os_thread_id = 0;  // the kernel's id of the thread (gettid(), as top -H and perf show it); 0: unknown
    std::vector<std::pair<std::string, std::string>> fields;  // annotate(): request ids and such
    Node root;
};

struct ThreadProfile {  // everything one thread recorded since start or reset (Arthas `monitor`)
    std::string thread_name;
    std::uint32_t thread_id = 0;
    // As in Trace; 0 also for an entry of exited threads that folds several (their ids may be reused).
    std::uint32_t os_thread_id = 0;
    bool exited = false;  // exited threads are folded together by thread name
    std::uint64_t dropped_depth = 0, dropped_nodes = 0;
    std::uint64_t exited_threads = 0;  // exited: how many threads were folded into this entry
    std::vector<Node> roots;  // top-level scopes
};

struct Profile {
    std::chrono::system_clock::time_point taken;
    std::vector<ThreadProfile> threads;
    ThreadProfile merged() const;  // all threads folded by call path, named "all threads"
};

// ---- what the other sessions deliver (sessions.hpp) ---------------------------------------------

// Arthas `stack`: who called a matching scope.
struct StackFrame {
    std::string name;  // as in a trace: "ns::Class::method()" or the scope's text
    std::string file;
    std::uint32_t line = 0;  // the scope macro's line
};
struct StackTrace {
    std::chrono::system_clock::time_point start;
    std::string thread_name;
    std::uint32_t thread_id = 0;
    std::uint32_t os_thread_id = 0;  // as in Trace
    std::vector<std::pair<std::string, std::string>> fields;  // annotate()
    Nanos cost{};
    bool threw = false;
    std::vector<StackFrame> frames;  // innermost first: the matching scope, then each open scope around it
    // The machine stack at the scope's start, innermost first: every function that called it, down to
    // the thread's entry (main, or what a thread library called), named as XRay names functions; the
    // file and line where an open scope is that function's. A named scope stands before the next
    // function holding a scope; a function's scope only where a frame has its name (not one the
    // compiler inlined, nor a lambda's). Across a hand-off, the path it continues follows the last
    // function holding a scope, in place of the worker's own callers. Empty when it could not be walked.
    std::vector<StackFrame> callers;
};

// Arthas `watch`: the values an invocation saw.
struct WatchEvent {
    std::chrono::system_clock::time_point start;
    std::string thread_name;
    std::uint32_t thread_id = 0;
    std::uint32_t os_thread_id = 0;  // as in Trace
    std::vector<std::pair<std::string, std::string>> fields;  // annotate()
    std::string scope;  // the matching scope's name
    std::string file;
    std::uint32_t line = 0;
    Nanos cost{};
    bool threw = false;  // left by an exception (Arthas: location=AtExceptionExit)
    std::vector<std::pair<std::string, std::string>> values;  // TRACETREE_WATCH(name, value) in the scope, in order
};

// Arthas `monitor -c`: calls per interval.
struct MonitorRow {
    std::string name;  // one row per matching scope that was called in the interval
    std::string file;
    std::uint32_t line = 0;
    std::uint64_t calls = 0, failed = 0;  // failed: left by an exception
    Nanos total{}, min{}, max{};          // min and max of this interval's calls
};
struct MonitorInterval {
    std::chrono::system_clock::time_point start, end;
    std::vector<MonitorRow> rows;
    bool cut_short = false;  // ended by Monitor::stop() before its length
};

// ---- timeline: every scope with its start, for Chrome/Perfetto trace views ----------------------

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
    std::uint32_t process_id = 0;  // of the process that recorded it
    std::vector<ThreadTimeline> threads;
};

// ---- the recorder's settings and state, as control.hpp sets and reports them ------------------

// Bounds on what the recorder keeps. What they cut is counted and shown (`dropped`), never lost
// silently; memory stays bounded whatever the program names or however many threads it starts.
struct Limits {
    std::uint32_t max_depth = 256;        // nesting recorded per thread, 1 ..= 4096 (applies at once)
    std::uint32_t max_nodes = 65536;      // call-tree nodes per thread, 16 ..= 16777216 (trees started later)
    std::uint64_t max_total_nodes = 1u << 22;  // nodes of all live threads (64 bytes each), and apart of all exited ones, >= 256
    std::uint32_t max_name_length = 1024;      // run-time names and annotations are cut here, 1 ..= 65536
    std::uint64_t max_name_bytes = 16u << 20;  // memory held by distinct run-time names, all threads, >= 1024
    std::uint32_t max_exited_threads = 256;    // exited threads kept apart (by name); the rest fold into one
};

// Replaces the clock for every thread (nullptr restores it): tests make timings exact with it.
// Set it while no scope is open; the function returns nanoseconds.
using ClockFunction = std::uint64_t (*)() noexcept;

// What the process's recorder is, and how much of its budgets it uses.
struct RecorderInfo {
    std::string version;             // "0.2.0"
    std::string module;              // the executable or library whose copy runs the recorder
    std::vector<std::string> others; // recorders of other tracetree versions or standard libraries in this process
    std::uint64_t threads = 0;       // live threads that have recorded
    std::uint64_t nodes = 0;         // node capacity allocated, all threads
    std::uint64_t spare_nodes = 0;   // freed with exited threads' trees, kept for new ones (at most 65,536)
    std::uint64_t name_bytes = 0;    // memory held by interned run-time names
    std::uint64_t dropped_names = 0; // scopes not recorded: the name budget was full
    bool throw_hook = false;         // every throw is recorded as a throw node (checked when the recorder starts)
    std::string throw_hook_note;     // why not, when throw_hook is false
    bool exported = false;           // copies loaded later (plugins, RTLD_LOCAL too) find this recorder: an anchor they reach holds it
    std::string refused;             // why this copy records nothing (loaded by dlmopen(), or into a static executable); empty: it records
    // Where a trace's off-CPU time comes from: "context switches (perf_event_open)", or, where that is
    // refused, "thread CPU clock (clock_gettime)"; "none yet" before a thread has captured.
    std::string cpu_time_source;
    std::string cpu_time_note;       // why the context switches were refused, when they were
};

// ---- definitions ------------------------------------------------------------------------------

namespace detail {
inline void merge_into(std::vector<Node>& into, const Node& node) {
    for (Node& existing : into) {
        if (existing.same_site(node)) {
            existing.merge(node);
            return;
        }
    }
    into.push_back(node);
}
// Each of `from` merged into `into` as merge_into() does it, in time linear in both: a scan of the
// siblings per node made a thread of 64k distinct names cost seconds to fold (issue 42). Past a few
// siblings they are found by a hash of their site; the first of equal sites in `into` still wins.
inline void merge_all(std::vector<Node>& into, const std::vector<Node>& from) {
    if (from.size() <= 1 || into.size() + from.size() <= 16) {  // a hash costs more than a scan
        for (const Node& node : from) merge_into(into, node);
        return;
    }
    const auto hash = [](const Node& node) {  // mixed: sites of one name may differ by their line alone
        constexpr std::size_t odd = static_cast<std::size_t>(0x9E3779B97F4A7C15u);
        std::size_t h = std::hash<std::string_view>{}(node.name) ^ std::hash<std::string_view>{}(node.file) * odd;
        h = (h ^ node.line) * odd;
        h = (h ^ static_cast<std::size_t>(node.kind)) * odd;
        return h ^ (h >> (sizeof h * 4));
    };
    std::size_t mask = 15;
    while (mask < 2 * (into.size() + from.size())) mask = mask << 1 | 1;
    std::vector<std::size_t> slots(mask + 1, 0);  // an index into `into`, plus one; 0: free
    const auto slot_of = [&](const Node& node) {  // its site's slot, or the free slot where it goes
        std::size_t slot = hash(node) & mask;
        while (slots[slot] != 0 && !into[slots[slot] - 1].same_site(node)) slot = (slot + 1) & mask;
        return slot;
    };
    for (std::size_t i = 0; i < into.size(); ++i) {
        const std::size_t slot = slot_of(into[i]);
        if (slots[slot] == 0) slots[slot] = i + 1;
    }
    for (const Node& node : from) {
        const std::size_t slot = slot_of(node);
        if (slots[slot] != 0) {
            into[slots[slot] - 1].merge(node);
        } else {
            into.push_back(node);
            slots[slot] = into.size();
        }
    }
}
}  // namespace detail

inline Nanos Node::self() const {
    Nanos children_total{0};
    for (const Node& child : children)
        if (!child.parallel) children_total += child.total;  // ran meanwhile elsewhere: not out of this total
    return total > children_total ? total - children_total : Nanos(0);
}

inline void Node::merge(const Node& other) {
    const Nanos continued_here =
        (continued ? total : continued_total) + (other.continued ? other.total : other.continued_total);
    if (other.count != 0) {
        min = count == 0 ? other.min : std::min(min, other.min);
        max = std::max(max, other.max);
    }
    parallel = continued ? other.parallel : other.continued ? parallel : parallel && other.parallel;  // a path has no say
    if (!continued || !other.continued) {  // folded with the calls themselves: no longer only a path
        continued = false;
        continued_on.clear();
        continued_total = continued_here;
    } else if (continued_on != other.continued_on) {
        continued_on = "several threads";
    }
    count += other.count;
    total += other.total;
    throws += other.throws;
    dropped += other.dropped;
    if (other.message) message = other.message;
    if (off_cpu || other.off_cpu) {  // what only one side knows is a lower bound of the sum
        OffCpu sum = off_cpu ? *off_cpu : OffCpu{};
        sum.at_least = !off_cpu || !other.off_cpu || off_cpu->at_least || other.off_cpu->at_least;
        if (other.off_cpu) {
            sum.off += other.off_cpu->off;
            sum.runnable = off_cpu && sum.runnable && other.off_cpu->runnable ? std::optional<Nanos>(*sum.runnable + *other.off_cpu->runnable)
                                                                               : std::nullopt;
        } else {
            sum.runnable.reset();
        }
        off_cpu = sum;
    }
    values.insert(values.end(), other.values.begin(), other.values.end());
    detail::merge_all(children, other.children);
}

inline ThreadProfile Profile::merged() const {
    ThreadProfile all;
    all.thread_name = "all threads";
    for (const ThreadProfile& thread : threads) {
        detail::merge_all(all.roots, thread.roots);
        all.dropped_depth += thread.dropped_depth;
        all.dropped_nodes += thread.dropped_nodes;
    }
    return all;
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_VALUES_HPP
