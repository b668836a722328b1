// tracetree runtime: the process-wide recorder behind control.hpp. SPDX-License-Identifier: MIT
//
// Reading order: the clock's conversion to nanoseconds; interned call sites; a call tree's storage
// (Tree) and its snapshot as values; a thread's state; trace sessions and captures; RuntimeImpl, the
// one object per process that every copy of the library records into (its slow paths, its threads,
// its sessions); how it is started; then control.hpp's functions. The throw hook is detail/throw_hook.hpp.
//
// One process, one recorder: the first copy of this header to run starts it and writes its address
// into the anchors (detail/anchor.hpp); every other copy, whatever the linking, finds it there.
// Everything that allocates objects the recorder keeps runs in the starting copy (virtual calls),
// whose module is pinned in memory, so a library that is unloaded takes nothing the recorder needs.
#ifndef TRACETREE_DETAIL_RUNTIME_HPP
#define TRACETREE_DETAIL_RUNTIME_HPP

#include "../control.hpp"
#include "../sessions.hpp"
#include "exception_types.hpp"
#include "format.hpp"

#include <algorithm>           // std::find_if, std::sort, std::min
#include <condition_variable>  // sessions: next() waits for a capture
#include <cstring>             // std::memcmp
#include <deque>               // queued traces of a session; retired threads
#include <exception>           // std::exception: a throw's what()
#include <sstream>             // TRACETREE_WATCH values printed with operator<<
#include <mutex>               // registries (never on the hot path)
#include <new>                 // std::nothrow
#include <stdexcept>           // std::invalid_argument for bad limits
#include <typeinfo>            // the throw hook's exception types
#include <unordered_map>       // interned sites
#include <cxxabi.h>            // __cxa_get_globals (exceptions in flight), __cxa_demangle
#include <dlfcn.h>             // dladdr: which module runs the recorder; dlsym: why throws go unseen
#include <pthread.h>           // thread-exit key, fork handlers, OS thread names
#include <stdlib.h>            // free
#include <unistd.h>            // getpid

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// ---- time ---------------------------------------------------------------------------------------

inline std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline Nanos to_nanos(std::uint64_t tick_count, double ratio) noexcept {
    const double ns = static_cast<double>(tick_count) * ratio + 0.5;  // a clock that stepped back gives ~2^64
    return ns >= 9.2e18 ? Nanos::max() : Nanos(static_cast<std::int64_t>(ns));
}

// ---- interned call sites ----------------------------------------------------------------------

struct MonitorCells;

struct InternedSite : SiteInfo {
    std::atomic<MonitorCells*> monitors{nullptr};  // made when a monitor first watches the site
    SiteKind kind = SiteKind::scope;
    std::string name;        // as shown: "ns::Class::method()", the scope's text, the run-time name, the type
    std::string match_name;  // what trace patterns see: the name without "()"
    std::string file;
    std::uint32_t line = 0;
};
inline const InternedSite& interned(const SiteInfo* info) noexcept { return *static_cast<const InternedSite*>(info); }

// "R ns::C<T>::f(A) const [with T = int]" -> "ns::C::f": drops the return type, parameters,
// qualifiers and template arguments, keeps namespaces and classes.
inline std::string function_name(const char* signature) {
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
    return name;
}

// ---- a call tree's storage ----------------------------------------------------------------------

// The chunks of nodes of every tree in the process. `nodes` counts those trees hold, against
// max_total_nodes. A freed tree's chunks are kept for the next tree, up to kSpare: threads come and
// go in pools, and a fresh chunk's pages each cost a page fault, more than making its 256 nodes.
class ChunkPool {
public:
    static constexpr std::size_t kSpare = 256;  // 65,536 nodes, 4 MiB: a default thread's whole tree

    NodeRecord* take() noexcept {
        NodeRecord* chunk = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!spare_.empty()) {
                chunk = spare_.back();
                spare_.pop_back();
            }
        }
        if (chunk == nullptr) return new (std::nothrow) NodeRecord[kChunkMask + 1];
        for (std::uint32_t i = 0; i <= kChunkMask; ++i) new (&chunk[i]) NodeRecord();  // as new
        return chunk;
    }
    void give(NodeRecord* chunk) noexcept {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (spare_.size() < kSpare) {
                try {
                    spare_.push_back(chunk);
                    return;
                } catch (...) {  // out of memory: freed instead
                }
            }
        }
        delete[] chunk;
    }
    std::size_t spare_chunks() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        return spare_.size();
    }
    // fork(): no other lock is taken while this one is held, so it is taken last.
    void lock() noexcept { mutex_.lock(); }
    void unlock() noexcept { mutex_.unlock(); }

    std::atomic<std::uint64_t> nodes{0};

private:
    std::mutex mutex_;
    std::vector<NodeRecord*> spare_;
};

// Nodes in chunks that never move (snapshot readers index them while the owner appends), a child
// index for the owner, and what the limits cut. A thread's own tree, or a capture's.
struct Tree {
    Tree(std::uint32_t max_nodes, ChunkPool& chunk_pool)
        : capacity(max_nodes), chunk_table(new NodeRecord*[(max_nodes + kChunkMask) >> kChunkBits]()),
          pool(chunk_pool), slots(64, 0) {}
    ~Tree() {
        for (std::uint32_t i = 0; i < chunk_count; ++i) pool.give(chunk_table[i]);
        pool.nodes.fetch_sub(std::uint64_t{chunk_count} << kChunkBits);
    }
    Tree(const Tree&) = delete;
    Tree& operator=(const Tree&) = delete;

    NodeRecord* at(std::uint32_t index) const noexcept { return &chunk_table[index >> kChunkBits][index & kChunkMask]; }
    std::uint32_t nodes() const noexcept { return size.load(std::memory_order_acquire); }

    const std::uint32_t capacity;
    const std::unique_ptr<NodeRecord*[]> chunk_table;
    std::uint32_t chunk_count = 0;
    ChunkPool& pool;
    std::atomic<std::uint32_t> size{0};
    std::vector<std::uint32_t> slots;  // owner only: the child index (Arena::find); a power of two, never empty
    std::atomic<std::uint64_t> dropped_depth{0}, dropped_nodes{0};
    std::unordered_map<std::uint32_t, std::string> messages;  // throw nodes: what() of the last throw
    // TRACETREE_WATCH values by node, in captures that asked for them.
    std::unordered_map<std::uint32_t, std::vector<std::pair<std::string, std::string>>> values;
    // Capture trees: each node's counterpart in the tree the capture is folded into.
    std::vector<std::uint32_t> folded_into;
    const Tree* folded_tree = nullptr;
    std::uint32_t folded_under = 0;
};

// An arena's nodes as values, children in order of first call. Nodes with no finished call and
// nothing finished below them (zeroed by a reset, or entered and still running) are left out.
// Counters are read while the owner writes them: totals are clamped so that a parent is never below
// its children, and min never above max.
//
// Each Node is made once, in its parent's `children`, reserved to size from the counters first: no
// Node is moved, and no scratch copy of the tree is allocated (fresh memory costs a page fault per
// page, which at 200 bytes a Node was most of a snapshot's time).
inline std::vector<Node> to_values(const Tree& tree, double ratio,
                                   const std::unordered_map<std::uint32_t, std::string>* messages,
                                   const decltype(Tree::values)* values = nullptr) {
    const std::uint32_t size = tree.nodes();
    if (size == 0) return {};
    // Pass 1, from the counters: which nodes are kept, and each node's kept children, in index order
    // (children have larger indices than their parents; siblings are numbered in order of first call).
    std::vector<std::uint32_t> parents(size, 0), kept(size, 0);
    std::vector<std::uint8_t> keep(size, 0);
    for (std::uint32_t i = 1; i < size; ++i) {
        const NodeRecord& record = *tree.at(i);
        parents[i] = record.parent;
        keep[i] = record.count.load(std::memory_order_relaxed) != 0 || record.dropped.load(std::memory_order_relaxed) != 0;
    }
    for (std::uint32_t i = size; i-- > 1;) {
        if (keep[i] == 0) continue;
        keep[parents[i]] = 1;
        ++kept[parents[i]];
    }
    std::vector<std::uint32_t> end(size, 0), order;  // node p's kept children: order[end[p] - kept[p] .. end[p])
    for (std::uint32_t i = 0, at = 0; i < size; ++i) end[i] = at, at += kept[i];
    order.resize(size);
    for (std::uint32_t i = 1; i < size; ++i)
        if (keep[i] != 0) order[end[parents[i]]++] = i;

    // Pass 2, depth first: a node's values, then its children's, then its total clamped to theirs.
    const auto fill = [&](Node& node, std::uint32_t i) {
        const NodeRecord& record = *tree.at(i);
        const InternedSite& site = interned(record.site);
        node.kind = site.kind == SiteKind::thrown ? NodeKind::thrown : NodeKind::call;
        node.name = site.name;
        node.file = site.file;
        node.line = site.line;
        node.count = record.count.load(std::memory_order_relaxed);
        node.throws = record.throws.load(std::memory_order_relaxed);
        node.dropped = record.dropped.load(std::memory_order_relaxed);
        if (node.kind == NodeKind::call && node.count != 0) {
            node.total = to_nanos(record.total.load(std::memory_order_relaxed), ratio);
            node.max = std::min(to_nanos(record.max.load(std::memory_order_relaxed), ratio), node.total);
            node.min = std::min(to_nanos(record.min.load(std::memory_order_relaxed), ratio), node.max);
        }
        if (node.kind == NodeKind::thrown && messages != nullptr) {
            const auto message = messages->find(i);
            if (message != messages->end()) node.message = message->second;
        }
        if (values != nullptr) {
            const auto watched = values->find(i);
            if (watched != values->end()) node.values = watched->second;
        }
    };
    struct Open {
        Node* node;
        std::uint32_t next, end;  // its children still to make: order[next .. end)
    };
    Node root;
    root.dropped = tree.at(0)->dropped.load(std::memory_order_relaxed);
    std::vector<Open> open;  // the path from the root: as deep as the tree, on the heap
    const auto descend = [&](Node& node, std::uint32_t i) {
        node.children.reserve(kept[i] + (i == 0 && root.dropped != 0));  // and the root's marker below
        open.push_back({&node, end[i] - kept[i], end[i]});
    };
    descend(root, 0);
    while (!open.empty()) {
        Open& top = open.back();
        if (top.next == top.end) {
            Node& node = *top.node;
            open.pop_back();
            if (open.empty()) break;  // the root
            if (node.count == 0 && node.dropped == 0 && node.children.empty()) {  // zeroed since pass 1: a reset
                open.back().node->children.pop_back();  // the newest child of its parent
                continue;
            }
            Nanos children_total{0};
            for (const Node& child : node.children) children_total += child.total;
            if (node.count != 0 && node.total < children_total) node.total = children_total;
            continue;
        }
        const std::uint32_t i = order[top.next++];
        Node& child = top.node->children.emplace_back();  // reserved: `top` and its node stay put
        fill(child, i);
        descend(child, i);
    }
    if (root.dropped != 0) {  // drops at the top level have no node to live on: keep them visible
        Node marker;
        marker.name = "(calls not recorded at the top level)";
        marker.dropped = root.dropped;
        root.children.push_back(std::move(marker));
    }
    return std::move(root.children);
}

// ---- a thread's state ---------------------------------------------------------------------------

struct SessionState;

struct Capture {  // one invocation being recorded for trace sessions, on its own tree
    std::unique_ptr<Tree> tree;
    const SiteInfo* root = nullptr;
    Tree* outer = nullptr;  // the tree it is folded into when it ends
    NodeRecord* outer_cur = nullptr;
    std::uint32_t outer_cur_index = 0;
    std::uint32_t mask = 0;
    std::vector<std::shared_ptr<SessionState>> sessions;  // kept after the capture: reused while the same
    std::uint32_t sessions_epoch = 0;  // the thread's session copy `sessions` was taken from
    std::uint64_t below = 0;           // fewer ticks than this are below every session's min_cost
    bool values = false;               // a session wants TRACETREE_WATCH values
    std::uint8_t outer_values = 0;     // the arena's wish for values before this capture
    const NodeRecord* deferred_from = nullptr;  // started late (begin()): its scope's node in `outer`
};

// A scope watched by stack, watch or monitor sessions, while it runs.
struct Frame {
    const SiteInfo* site = nullptr;
    const NodeRecord* node = nullptr;
    std::uint32_t mask = 0;
    std::uint32_t sessions_epoch = 0;
    std::vector<std::shared_ptr<SessionState>> sessions;  // kept after the scope: reused while the same
    std::vector<const SiteInfo*> chain;  // stack sessions: the open scopes at its start, innermost first
    std::vector<std::pair<std::string, std::string>> values;  // watch sessions: its TRACETREE_WATCH values
    std::uint8_t outer_values = 0;
    const NodeRecord* outer_value_node = nullptr;
    bool watch = false;  // a watch session wants its values
    bool chain_wanted = false;
};

struct RawSpan {
    const SiteInfo* site;
    std::uint64_t start, end;
    std::uint32_t depth;
    bool threw;
};

struct ThreadState {
    ThreadState(std::uint32_t thread_id, std::uint32_t max_nodes, ChunkPool& pool)
        : id(thread_id), main(new Tree(max_nodes, pool)) {}

    const std::uint32_t id;
    Arena arena;
    // Shared with snapshots, which copy it under the runtime's mutex: a thread that exits while one
    // reads it leaves it to that reader to free.
    std::shared_ptr<Tree> main;
    Tree* current = nullptr;     // main, or the innermost capture's tree
    NodeRecord overflow;         // entered by a scope past the node limit: what it calls is dropped with it
    // The arena's current node while a watched scope's capture is deferred (begin()): no call site
    // matches it and its index is no node's, so the first scope, throw or drop under that scope
    // reaches the runtime, which starts the capture first. `parent` is the scope's node's index.
    NodeRecord deferred;
    std::atomic<bool> in_overflow{false};
    std::atomic<bool> retired{false};
    std::atomic<std::uint32_t> max_depth{0};
    std::atomic<std::uint32_t> reset_requested{0}, reset_done{0};

    std::mutex mutex;  // what snapshots copy: the name, spans, throw messages
    std::string name;
    bool named = false;  // set_thread_name was called: stop following the OS name
    std::vector<RawSpan> spans;
    std::uint64_t spans_dropped = 0;

    // Owner only:
    std::vector<Capture> captures;  // a stack; entries past `capture_depth` keep their buffers for reuse
    std::uint32_t capture_depth = 0;
    std::uint32_t capturing = 0;    // sessions already being captured on this thread
    std::vector<Frame> frames;      // likewise
    std::uint32_t frame_depth = 0;
    // The sessions of one epoch, copied once per epoch: a watched scope takes no lock to find them.
    std::uint32_t sessions_epoch = 0;
    std::shared_ptr<SessionState> sessions[32];
    std::uint32_t capture_mask = 0;  // of those, the trace and recorder sessions
    std::vector<std::unique_ptr<Tree>> spare_trees;  // capture trees, kept with their nodes for reuse
    // Run-time names seen on this thread, in the order first seen (Arena::dynamic*).
    std::vector<DynamicSlot> dynamic_slots;
    std::vector<DynamicEntry> dynamic;
    std::vector<DynamicLink> dynamic_links;
    std::vector<std::pair<std::string, std::string>> annotations;
    std::uint32_t timeline_depth = 0;

    bool reset_pending() const noexcept { return reset_requested.load() != reset_done.load(); }
    // The depth limit reads 0 while the slow path must see every scope; re-checked after the store so
    // that a concurrent request is never lost.
    void restore_depth_limit() noexcept {
        const auto blocked = [&] { return reset_pending() || in_overflow.load() || retired.load(); };
        if (!blocked()) arena.depth_limit.store(max_depth.load());
        if (blocked()) arena.depth_limit.store(0);
    }
    std::string thread_name() {
        std::lock_guard<std::mutex> lock(mutex);
        return name;
    }
    void refresh_os_name() {  // owner only
        char buffer[64] = {};
        if (pthread_getname_np(pthread_self(), buffer, sizeof buffer) != 0) return;
        std::lock_guard<std::mutex> lock(mutex);
        if (!named) name = buffer;
    }
};

// ---- sessions ---------------------------------------------------------------------------------

enum class SessionKind : std::uint8_t { trace, stack, watch, monitor, recorder };

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

    std::atomic<std::uint64_t> reserved{0};
    std::atomic<int> slot{-1};  // written under the runtime's mutex; monitors read it while counting

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

// A monitored site's calls in the current interval, one cell per session slot. Many threads add to it.
struct MonitorCell {
    std::atomic<const SessionState*> owner{nullptr};
    std::atomic<std::uint64_t> calls{0}, failed{0}, total{0}, min{~std::uint64_t{0}}, max{0};
};
struct MonitorCells {
    MonitorCell cells[32];
};

inline constexpr int kMaxSessions = 32;
inline constexpr std::uint8_t kCaptureRoot = 1;  // Scope::slow_ bits
inline constexpr std::uint8_t kFakeClock = 2;
inline constexpr std::uint8_t kTimelineSpan = 4;
inline constexpr std::uint8_t kFrame = 8;
inline constexpr std::uint8_t kDeferredCapture = 16;
// The arena's current index while a deferred capture waits (ThreadState::deferred): no node's.
inline constexpr std::uint32_t kDeferredIndex = 0xFFFFFFFEu;
inline constexpr std::size_t kMaxValuesPerScope = 64;  // TRACETREE_WATCH values kept per scope and invocation
inline constexpr std::size_t kRetiredKept = 16;  // exited threads' states kept before they are freed

// Whether the arena is where the end of `scope` expects it: at the scope's node; for a deferred
// capture, at the guard while it waits, or at the scope's node in the capture's tree once started.
inline bool at_innermost(const Scope& scope) noexcept {
    const Arena& arena = *scope.arena_;
    if (arena.cur == scope.node_) return true;
    if ((scope.slow_ & kDeferredCapture) == 0) return false;
    const auto& state = *static_cast<const ThreadState*>(arena.state);
    if (arena.cur == &state.deferred) return state.current->at(state.deferred.parent) == scope.node_;
    return state.capture_depth != 0 && state.captures[state.capture_depth - 1].deferred_from == scope.node_ &&
           arena.cur->parent == 0 && arena.cur->site == scope.node_->site;
}


inline const SessionState*& callback_session() noexcept {  // whose callback this thread is running
    static thread_local const SessionState* session = nullptr;
    return session;
}

// ---- the recorder -------------------------------------------------------------------------------

class RuntimeImpl : public Recorder {
public:
    // `throw_hook`: why throws are not seen, or empty (detail/throw_hook.hpp, check_throw_hook()).
    explicit RuntimeImpl(std::string throw_hook)
        : throw_hook_(std::move(throw_hook)), module_(module_of(reinterpret_cast<void*>(&install_fork_handlers))),
          anchor_tick_(ticks()), anchor_ns_(steady_ns()) {
        if (pthread_key_create(&thread_key_, [](void* state) {
                auto* thread = static_cast<ThreadState*>(state);
                static_cast<RuntimeImpl*>(thread->arena.recorder)->retire(*thread);
            }) != 0)
            throw std::runtime_error("tracetree: no thread-specific key left for the recorder");
    }
    virtual ~RuntimeImpl() { pthread_key_delete(thread_key_); }  // only one that another copy's beat is destroyed

    // ---- Recorder: the slow paths of every copy's scopes (this copy's code runs them) ----

    Arena* join_thread() noexcept override {
        if (auto* known = static_cast<ThreadState*>(pthread_getspecific(thread_key_)))
            return known->retired.load() ? nullptr : &known->arena;
        try {
            std::shared_ptr<ThreadState> state;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                state = std::make_shared<ThreadState>(next_thread_id_++, limits_.max_nodes, chunks_);
            }
            if (!prepare_tree(*state->main)) return nullptr;
            Arena& arena = state->arena;
            arena.recorder = this;
            arena.state = state.get();
            arena.uncaught = uncaught_counter();
            arena.dynamic_slots = &kNoDynamicSlot;
            state->current = state->main.get();
            point_at(arena, *state->main, 0);
            state->refresh_os_name();  // before any snapshot can see the thread
            {
                std::lock_guard<std::mutex> lock(mutex_);
                arena.max_name_length.store(limits_.max_name_length, std::memory_order_relaxed);
                state->max_depth.store(limits_.max_depth);
                arena.flags.store(flags_locked());
                arena.epoch_word.store(std::uint64_t{epoch_} << 32);
                state->restore_depth_limit();
                live_.push_back(state);
            }
            pthread_setspecific(thread_key_, state.get());
            return &arena;
        } catch (...) {  // out of memory: this thread records nothing
            return nullptr;
        }
    }

    NodeRecord* enter_limited(Arena& arena, Site* site, const SiteInfo* info) noexcept override {
        ThreadState& state = state_of(arena);
        if (state.retired.load()) return nullptr;
        if (arena.cur == &state.deferred) start_deferred_capture(state);
        if (arena.cur == &state.overflow) return drop(arena, 1);  // inside a scope cut by the node limit
        if (state.in_overflow.load()) {  // that scope has ended
            state.in_overflow.store(false);
            state.restore_depth_limit();
        }
        apply_pending_reset(state);
        if (arena.depth >= state.max_depth.load(std::memory_order_relaxed)) {
            bump(state.current->dropped_depth);
            bump_saturating(arena.cur->dropped);
            return nullptr;
        }
        return find_or_add(arena, site, info);
    }

    NodeRecord* add(Arena& arena, Site* site, const SiteInfo* info) noexcept override {
        return find_or_add(arena, site, info);
    }

    void begin(Scope& scope, Arena& arena, Site* site, const SiteInfo* info) noexcept override {
        ThreadState& state = state_of(arena);
        if (state.retired.load()) return;  // a thread-exit destructor that runs after the recorder's
        if (arena.cur == &state.deferred) start_deferred_capture(state);
        const std::uint8_t flags = arena.flags.load(std::memory_order_relaxed);
        if (state.reset_pending()) apply_pending_reset(state);  // before a capture, which is folded into this tree later
        std::uint8_t slow = 0;
        // A site never seen, with the tree full, is not interned (find_or_add drops it): nothing to watch.
        const bool known = info->interned || state.current->nodes() < state.current->capacity;
        if (known && (info = registered(site, info)) == nullptr) return;
        std::uint32_t framed = 0, captured = 0;
        if (known && (flags & kSessions) != 0 && arena.cur != &state.overflow) {
            std::uint32_t epoch = 0;
            const std::uint32_t mask = watch_mask(*info, epoch);
            if (mask != 0 && current_sessions(state, epoch)) {
                // An invocation nested in one a trace already captures is part of that capture.
                captured = mask & state.capture_mask & ~state.capturing;
                if (captured != 0 && !prepare_capture(state, info, captured)) captured = 0;
                framed = mask & ~state.capture_mask;
            }
        }
        // The capture waits for the first thing recorded under the scope, so that an invocation with
        // nothing below it costs the checks only; not when values are kept (by node of the capture's
        // tree, or of the frame's node).
        const bool defer = captured != 0 && framed == 0 && !state.captures[state.capture_depth].values &&
                           (arena.values & kValuesOfAll) == 0;
        if (captured != 0 && !defer) {
            enter_capture(state);
            slow |= kCaptureRoot;
        }
        NodeRecord* node = arena.enter(site, info);
        if (node == nullptr || node == &state.overflow) framed = 0;
        if (node == nullptr) {
            if ((slow & kCaptureRoot) != 0) end_capture(state, 0, false);
            return;
        }
        if (defer && node != &state.overflow) {
            state.capturing |= captured;
            state.deferred.parent = arena.cur_index;
            arena.cur = &state.deferred;
            arena.cur_index = kDeferredIndex;
            slow |= kDeferredCapture;
        }
        if (framed != 0 && push_frame(state, arena, info, node, framed)) slow |= kFrame;
        if ((flags & kSlow) != 0) {  // a test clock or the timeline
            if (test_clock_.load(std::memory_order_relaxed) != nullptr) slow |= kFakeClock;
            if (timeline_on_.load(std::memory_order_relaxed)) {
                slow |= kTimelineSpan;
                ++state.timeline_depth;
            }
        }
        scope.node_ = node;
        scope.arena_ = &arena;
        scope.slow_ = slow;
        scope.uncaught_ = *arena.uncaught;
        scope.start_ = now((slow & kFakeClock) != 0);
    }

    void end(Scope& scope) noexcept override {
        Arena& arena = *scope.arena_;
        ThreadState& state = state_of(arena);
        const std::uint64_t end = now((scope.slow_ & kFakeClock) != 0);
        const std::uint64_t elapsed = end - scope.start_;
        const bool threw = *arena.uncaught > scope.uncaught_;
        NodeRecord* node = scope.node_;
        bool captured = (scope.slow_ & kCaptureRoot) != 0;
        if ((scope.slow_ & kDeferredCapture) != 0) {
            if (arena.cur == &state.deferred) {  // nothing was recorded under the scope
                if (wanted(state.captures[state.capture_depth], elapsed)) start_deferred_capture(state);
                else state.capturing &= ~state.captures[state.capture_depth].mask;
            }
            // Started, the arena is at the scope's node in the capture's tree; else at `node` or deferred.
            captured = arena.cur != &state.deferred && arena.cur != node;
            if (captured) node = arena.cur;
        }
        arena.leave(node, elapsed, scope.uncaught_);
        if ((scope.slow_ & kTimelineSpan) != 0) {
            --state.timeline_depth;
            try {
                std::lock_guard<std::mutex> lock(state.mutex);
                if (node->site != nullptr && state.spans.size() < timeline_limit_.load(std::memory_order_relaxed))
                    state.spans.push_back(RawSpan{node->site, scope.start_, end, state.timeline_depth, threw});
                else
                    ++state.spans_dropped;
            } catch (...) {  // out of memory: the span is lost, the program goes on
            }
        }
        if ((scope.slow_ & kFrame) != 0) pop_frame(state, elapsed, threw);
        if (captured) end_capture(state, elapsed, true);
    }

    // TRACETREE_WATCH: to the innermost watched scope, and to the capture that asked for values.
    void value(Arena& arena, const char* name, const char* text, std::size_t size, bool cut) noexcept override {
        try {
            add_value(arena, name, std::string(text, size) + (cut ? "..." : ""));
        } catch (...) {  // out of memory: the value is lost
        }
    }
    void value(Arena& arena, const char* name, double number) noexcept override {
        try {
            add_value(arena, name, java_double(number));
        } catch (...) {
        }
    }
    void value(Arena& arena, const char* name, void (*print)(std::ostream&, const void*), const void* object) noexcept override {
        try {
            std::ostringstream out;
            print(out, object);
            std::string text = out.str();
            if (text.size() > ValueWriter::kCapacity) text.replace(ValueWriter::kCapacity, std::string::npos, "...");
            add_value(arena, name, std::move(text));
        } catch (...) {  // out of memory, or the user's operator<< threw: the value is lost
        }
    }

    // What an interned run-time name holds: its key, its two names, its file and the site itself.
    static std::uint64_t held_bytes(const std::string& key, std::size_t size, const std::string& file) noexcept {
        return key.size() + 2 * size + file.size() + sizeof(InternedSite);
    }
    const SiteInfo* dynamic_site(Arena& arena, Site& origin_site, const char* name, std::size_t size) noexcept override {
        ThreadState& state = state_of(arena);
        if (state.retired.load()) return nullptr;  // a thread-exit destructor that runs after the recorder's
        if (arena.cur == &state.deferred) start_deferred_capture(state);
        const SiteInfo* origin = registered(&origin_site, origin_site.info.load(std::memory_order_acquire));
        if (origin == nullptr) return nullptr;
        const InternedSite* site = nullptr;
        try {
            std::string key(1, 'd');
            key.append(reinterpret_cast<const char*>(&origin), sizeof origin).append(name, size);
            std::lock_guard<std::mutex> lock(sites_mutex_);
            const auto found = sites_.find(key);
            // A name never seen needs a new node: with the tree full it is dropped without being kept.
            if (found != sites_.end()) {
                site = found->second.get();
            } else if (name_bytes_ + held_bytes(key, size, interned(origin).file) <= max_name_bytes_.load() &&
                       state.current->nodes() < state.current->capacity) {
                auto made = std::make_unique<InternedSite>();
                made->kind = SiteKind::dynamic;
                made->name.assign(name, size);
                made->match_name = made->name;
                made->file = interned(origin).file;
                made->line = interned(origin).line;
                made->origin = origin;
                made->SiteInfo::name = made->name.data();
                made->name_size = static_cast<std::uint32_t>(size);
                made->interned = true;
                const std::uint64_t bytes = held_bytes(key, size, made->file);
                const InternedSite* kept = made.get();
                sites_.emplace(std::move(key), std::move(made));  // may throw: then `made` is freed
                site = kept;
                name_bytes_ += bytes;
            }
        } catch (...) {  // out of memory: as over the budget
        }
        if (site == nullptr) {
            if (state.current->nodes() < state.current->capacity) dropped_names_.fetch_add(1, std::memory_order_relaxed);
            drop(arena, 1);
            return nullptr;
        }
        remember_dynamic(state, arena, site);
        return site;
    }

    // ---- owner-only operations for the other copies (virtual, so this copy's code runs them) ----

    // Made by this copy: a session outlives the library that asked for it while a thread delivers to it.
    virtual std::shared_ptr<SessionState> make_session(SessionKind kind, const std::string& pattern, PatternSyntax syntax) {
        return std::make_shared<SessionState>(kind, pattern, syntax);
    }

    virtual void start_session(const std::shared_ptr<SessionState>& session) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            int free = 0;
            while (free < kMaxSessions && sessions_[free]) ++free;
            if (free == kMaxSessions) throw std::invalid_argument("tracetree: too many sessions (at most 32 at once)");
            sessions_[free] = session;
            session->slot.store(free, std::memory_order_relaxed);
            session->interval_start = std::chrono::steady_clock::now();
            session->interval_wall_start = std::chrono::system_clock::now();
            sessions_changed_locked();
        }
        notify_listeners();
    }

    virtual void stop_session(SessionState& session) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            const int slot = session.slot.load(std::memory_order_relaxed);
            if (slot < 0 || sessions_[slot].get() != &session) return;
            sessions_[slot].reset();
            session.slot.store(-1, std::memory_order_relaxed);
            sessions_changed_locked();
        }
        notify_listeners();
    }

    // For instrumentation that patches code on demand (xray.hpp): called, on the thread that started
    // or stopped a session, after the set of sessions changed; running_sessions() says what it is now.
    using Listener = void (*)(void* context);
    virtual void listen(Listener listener, void* context) {
        std::lock_guard<std::mutex> lock(listeners_mutex_);
        listeners_.emplace_back(listener, context);
    }
    virtual void unlisten(Listener listener, void* context) {
        std::lock_guard<std::mutex> lock(listeners_mutex_);
        listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), std::make_pair(listener, context)),
                         listeners_.end());
    }
    std::vector<std::shared_ptr<const SessionState>> running_sessions() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<std::shared_ptr<const SessionState>> running;
        for (const auto& session : sessions_)
            if (session) running.push_back(session);
        return running;
    }

    // Records `type` thrown while the innermost open scope of this thread is the current node.
    virtual void record_throw(void* object, const std::type_info* type) noexcept {
        auto* state = static_cast<ThreadState*>(pthread_getspecific(thread_key_));
        if (state == nullptr || state->retired.load()) return;
        Arena& arena = state->arena;
        const char* file = arena.throw_file;
        const std::uint32_t line = arena.throw_line;
        arena.throw_file = nullptr;
        arena.throw_line = 0;
        // A session's callback runs inside the traced program's scopes; what it throws is tracetree's.
        if (callback_session() != nullptr || out_of_memory(object, type)) return;
        if ((arena.flags.load() & kRecording) == 0 || arena.depth == 0 || arena.cur == &state->overflow) return;
        if (arena.cur == &state->deferred) start_deferred_capture(*state);
        try {
            const InternedSite* site = intern(SiteKind::thrown, type_name(type), file != nullptr ? file : "", line, nullptr);
            std::uint32_t index = arena.find(arena.cur_index, site);
            if (index == 0) index = add_node(arena, *state->current, arena.cur_index, site);
            if (index == 0) return;
            NodeRecord& node = *arena.at(index);
            bump(node.count);
            const std::optional<std::string> message = what(object, type);
            std::lock_guard<std::mutex> lock(state->mutex);
            if (message) state->current->messages[index] = message->substr(0, limits_.max_name_length);
            else state->current->messages.erase(index);
        } catch (...) {  // out of memory: the throw is counted as before, without its node
        }
    }

    // ---- snapshots and control (any copy may run these: they only read and lock) ----

    // Measured between the anchor and now, so it sharpens as the process runs; remeasured at most every
    // 2^28 ticks (about 0.1 s), which keeps a clock read off every capture's end.
    double ns_per_tick() const noexcept {
        if (test_clock_.load(std::memory_order_relaxed) != nullptr) return 1.0;
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

    // `tree` is the state's main tree, copied under mutex_ with the state.
    ThreadProfile thread_profile(ThreadState& state, const Tree* tree, double ratio) {
        ThreadProfile profile;
        profile.thread_name = state.thread_name();
        profile.thread_id = state.id;
        if (tree == nullptr || state.reset_pending()) return profile;  // logically empty until the owner clears it
        profile.dropped_depth = tree->dropped_depth.load(std::memory_order_relaxed);
        profile.dropped_nodes = tree->dropped_nodes.load(std::memory_order_relaxed);
        std::unordered_map<std::uint32_t, std::string> messages;
        {
            std::lock_guard<std::mutex> lock(state.mutex);
            messages = tree->messages;
        }
        profile.roots = to_values(*tree, ratio, &messages);
        return profile;
    }

    Profile profile() {
        Profile result;
        result.taken = std::chrono::system_clock::now();
        const double ratio = ns_per_tick();
        std::vector<std::pair<std::shared_ptr<ThreadState>, std::shared_ptr<Tree>>> live;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (const auto& state : live_) live.emplace_back(state, state->main);
            result.threads = exited_;
        }
        for (const auto& [state, tree] : live) result.threads.push_back(thread_profile(*state, tree.get(), ratio));
        std::sort(result.threads.begin(), result.threads.end(),
                  [](const ThreadProfile& a, const ThreadProfile& b) { return a.thread_id < b.thread_id; });
        return result;
    }

    void reset() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& state : live_) {
            state->reset_requested.fetch_add(1);
            state->arena.depth_limit.store(0);  // the owner clears its tree at its next scope
        }
        exited_.clear();
        exited_nodes_ = 0;
        ++resets_;
    }

    void set_flag(std::uint8_t flag, bool on) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (on) flags_ |= flag;
        else flags_ = static_cast<std::uint8_t>(flags_ & ~flag);
        mirror_locked();
    }
    bool enabled() {
        std::lock_guard<std::mutex> lock(mutex_);
        return (flags_ & kRecording) != 0;
    }
    void set_clock(ClockFunction clock) {
        test_clock_.store(clock);
        std::lock_guard<std::mutex> lock(mutex_);
        mirror_locked();
    }

    void set_limits(const Limits& limits) {
        const auto check = [](const char* field, std::uint64_t value, std::uint64_t low, std::uint64_t high) {
            if (value < low || value > high)
                throw std::invalid_argument("tracetree: " + std::string(field) + " must be between " + std::to_string(low) +
                                            " and " + std::to_string(high) + ", got " + std::to_string(value));
        };
        check("max_depth", limits.max_depth, 1, 4096);  // renderers and Node's destructor recurse per level
        check("max_nodes", limits.max_nodes, 16, 1u << 24);
        check("max_total_nodes", limits.max_total_nodes, 256, std::uint64_t{1} << 40);
        check("max_name_length", limits.max_name_length, 1, 65536);
        check("max_name_bytes", limits.max_name_bytes, 1024, std::uint64_t{1} << 40);
        check("max_exited_threads", limits.max_exited_threads, 1, 1u << 20);
        std::lock_guard<std::mutex> lock(mutex_);
        limits_ = limits;
        max_total_nodes_.store(limits.max_total_nodes);
        max_name_bytes_.store(limits.max_name_bytes);
        for (const auto& state : live_) {
            state->max_depth.store(limits.max_depth);
            state->arena.max_name_length.store(limits.max_name_length, std::memory_order_relaxed);
            state->restore_depth_limit();
        }
    }
    Limits limits() {
        std::lock_guard<std::mutex> lock(mutex_);
        return limits_;
    }

    ThreadState* this_thread() noexcept {
        if (Arena* arena = tls_arena()) return &state_of(*arena);
        Arena* arena = join_thread();
        return arena != nullptr ? &state_of(*arena) : nullptr;
    }

    void start_timeline(std::size_t max_spans) {
        if (max_spans < 1 || max_spans > (std::size_t{1} << 24))
            throw std::invalid_argument("tracetree: max_spans_per_thread must be between 1 and 16777216, got " +
                                        std::to_string(max_spans));
        std::lock_guard<std::mutex> lock(mutex_);
        timeline_limit_.store(max_spans);
        exited_timelines_.clear();
        for (const auto& state : live_) {
            std::lock_guard<std::mutex> spans_lock(state->mutex);
            state->spans.clear();
            state->spans_dropped = 0;
        }
        timeline_on_.store(true);
        mirror_locked();
    }
    void stop_timeline() {
        std::lock_guard<std::mutex> lock(mutex_);
        timeline_on_.store(false);
        mirror_locked();
    }
    ThreadTimeline thread_timeline(ThreadState& state, double ratio) {
        ThreadTimeline result;
        result.thread_name = state.thread_name();
        result.thread_id = state.id;
        // With the test clock, ticks are nanoseconds since the clock's own zero.
        const std::uint64_t origin = test_clock_.load() != nullptr ? 0 : anchor_tick_;
        std::lock_guard<std::mutex> lock(state.mutex);
        result.dropped = state.spans_dropped;
        result.spans.reserve(state.spans.size());
        for (const RawSpan& raw : state.spans) {
            const InternedSite& site = interned(raw.site);
            Span span;
            span.name = site.name;
            span.file = site.file;
            span.line = site.line;
            span.start = to_nanos(raw.start > origin ? raw.start - origin : 0, ratio);
            span.duration = to_nanos(raw.end > raw.start ? raw.end - raw.start : 0, ratio);
            span.depth = raw.depth;
            span.threw = raw.threw;
            result.spans.push_back(std::move(span));
        }
        return result;
    }
    Timeline timeline() {
        Timeline result;
        result.process_id = static_cast<std::uint32_t>(getpid());
        const double ratio = ns_per_tick();
        if (test_clock_.load() == nullptr) {
            const auto since_anchor = Nanos(steady_ns() - anchor_ns_);
            result.origin = std::chrono::system_clock::now() -
                            std::chrono::duration_cast<std::chrono::system_clock::duration>(since_anchor);
        }
        std::vector<std::shared_ptr<ThreadState>> live;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            live = live_;
            result.threads = exited_timelines_;
        }
        for (const auto& state : live) result.threads.push_back(thread_timeline(*state, ratio));
        std::sort(result.threads.begin(), result.threads.end(),
                  [](const ThreadTimeline& a, const ThreadTimeline& b) { return a.thread_id < b.thread_id; });
        return result;
    }

    RecorderInfo info() {
        RecorderInfo result;
        result.version = std::to_string(TRACETREE_VERSION_MAJOR) + "." + std::to_string(TRACETREE_VERSION_MINOR) + "." +
                         std::to_string(TRACETREE_VERSION_PATCH);
        result.module = module_;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            result.threads = live_.size();
        }
        result.nodes = chunks_.nodes.load();
        result.spare_nodes = std::uint64_t{chunks_.spare_chunks()} << kChunkBits;
        {
            std::lock_guard<std::mutex> lock(sites_mutex_);
            result.name_bytes = name_bytes_;
        }
        result.dropped_names = dropped_names_.load();
        result.throw_hook = throw_hook_.empty();
        result.throw_hook_note = throw_hook_;
        add_anchors(result);
        return result;
    }

    // Called once, by the copy whose runtime was chosen, right after its anchors hold it.
    void started() {
        // From now on every copy's slow paths run this object's virtual functions, and the thread-exit
        // and fork handlers run this copy's code: keep both modules loaded.
        pin_module(*reinterpret_cast<void* const* const*>(this)[0]);  // the vtable's first entry
        pin_module(reinterpret_cast<void*>(&install_fork_handlers));
        install_fork_handlers();
    }

    std::mutex mutex_;  // threads, sessions, flags, limits
    std::shared_ptr<SessionState> sessions_[kMaxSessions];

private:
    // Recorders of other versions or standard-library ABIs: anchors with another name.
    void add_anchors(RecorderInfo& result) const {
        const void* mine = static_cast<const Recorder*>(this);
        std::vector<std::pair<std::string, const void*>> seen;
        walk_modules([&](const ModuleSymbols& module) {
            module.each(kAnchorPrefix, [&](const char* name, void* address) {
                const void* recorder = static_cast<std::atomic<void*>*>(address)->load(std::memory_order_acquire);
                if (recorder == mine) result.exported = true;
                else if (recorder != nullptr) seen.emplace_back(name + sizeof kAnchorPrefix - 1, recorder);
            });
            return false;
        });
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        for (const auto& other : seen) result.others.push_back(other.first);
    }

    static std::string module_of(void* code) {
        Dl_info where{};
        return dladdr(code, &where) != 0 && where.dli_fname != nullptr ? where.dli_fname : "";
    }
    static void pin_module(void* code) {
        const std::string module = module_of(code);
        if (!module.empty()) dlopen(module.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    }

    static inline const DynamicSlot kNoDynamicSlot{};  // the index of a thread with no run-time name

    static ThreadState& state_of(const Arena& arena) noexcept { return *static_cast<ThreadState*>(arena.state); }

    static const unsigned int* uncaught_counter() noexcept {
        // The Itanium C++ ABI (2.2.2) lays the per-thread exception globals out as the caught-exception
        // stack followed by the uncaught count: a pointer taken once per thread makes the check two loads.
        struct EhGlobals {
            void* caught_exceptions;
            unsigned int uncaught_exceptions;
        };
        return &reinterpret_cast<const EhGlobals*>(abi::__cxa_get_globals())->uncaught_exceptions;
    }

    std::uint64_t now(bool fake) const noexcept {
        if (fake) {
            const ClockFunction clock = test_clock_.load(std::memory_order_relaxed);
            return clock != nullptr ? clock() : 0;
        }
        return ticks();
    }

    std::uint8_t flags_locked() const noexcept {
        std::uint8_t flags = flags_;
        if (std::any_of(std::begin(sessions_), std::end(sessions_), [](const auto& s) { return s != nullptr; }))
            flags |= kSessions;
        if (test_clock_.load() != nullptr || timeline_on_.load()) flags |= kSlow;
        return flags;
    }
    void mirror_locked() noexcept {
        const std::uint8_t flags = flags_locked();
        for (const auto& state : live_) {
            state->arena.flags.store(flags, std::memory_order_relaxed);
            state->arena.epoch_word.store(std::uint64_t{epoch_} << 32, std::memory_order_relaxed);
        }
    }
    void sessions_changed_locked() noexcept {
        if (++epoch_ == 0) ++epoch_;  // 0: never decided
        epoch_seen_.store(epoch_, std::memory_order_release);
        mirror_locked();
    }

    // ---- sites ----

    // Interned by content and, for a macro's site, by the site's address: each template instantiation
    // is its own call site, a library loaded again at the same address finds its old sites, and another
    // library loaded there does not (its content differs).
    const InternedSite* intern(SiteKind kind, const std::string& name, const char* file, std::uint32_t line,
                               const void* site) {
        std::string key(1, static_cast<char>('a' + static_cast<int>(kind)));
        key.append(reinterpret_cast<const char*>(&site), sizeof site)
            .append(reinterpret_cast<const char*>(&line), sizeof line)
            .append(file)
            .append(1, '\0')
            .append(name);
        std::lock_guard<std::mutex> lock(sites_mutex_);
        auto& slot = sites_[key];
        if (!slot) {
            auto made = std::make_unique<InternedSite>();
            made->kind = kind;
            made->name = kind == SiteKind::function ? name + "()" : name;
            made->match_name = name;
            made->file = file;
            made->line = line;
            made->interned = true;
            slot = std::move(made);
        }
        return slot.get();
    }

    // The interned info of a site seen for the first time (stored in the site for its next calls).
    const SiteInfo* registered(Site* site, const SiteInfo* info) noexcept {
        return info->interned ? info : intern_site(site);
    }
    TRACETREE_DETAIL_COLD const SiteInfo* intern_site(Site* site) noexcept {
        try {
            const SiteInfo* made = intern(site->kind, site->kind == SiteKind::function ? function_name(site->text) : site->text,
                                          site->file, site->line, site);
            site->info.store(made, std::memory_order_release);
            return made;
        } catch (...) {  // out of memory: not recorded
            return nullptr;
        }
    }

    static std::string type_name(const std::type_info* type) {
        int status = 0;
        char* demangled = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
        std::string name = status == 0 && demangled != nullptr ? demangled : type->name();
        free(demangled);
        return name;
    }

    // Out of memory gets no throw node: making one needs memory, and the runtime's own allocations
    // throw it while holding locks (the site table's, a thread's, the chunk pool's) that recording it
    // would take again. The scopes it leaves still count their calls as left by an exception.
    static bool out_of_memory(void* object, const std::type_info* type) noexcept {
        return type != nullptr && catches(bad_alloc_type_info, type, object);
    }
    // what() when the thrown type derives from std::exception: the check a `catch (std::exception&)` makes.
    static std::optional<std::string> what(void* object, const std::type_info* type) {
        if (type != nullptr && catches(exception_type_info, type, object))
            return std::string(static_cast<const std::exception*>(object)->what());
        return std::nullopt;
    }

    // ---- trees ----

    // Budget and first chunk (the root) of a new tree; false when the budget is spent.
    bool prepare_tree(Tree& tree) noexcept {
        if (!grow(tree)) return false;
        tree.size.store(1, std::memory_order_release);
        return true;
    }
    bool grow(Tree& tree) noexcept {  // one more chunk, within the process-wide node budget
        if (chunks_.nodes.fetch_add(kChunkMask + 1) + kChunkMask + 1 > max_total_nodes_.load()) {
            chunks_.nodes.fetch_sub(kChunkMask + 1);
            return false;
        }
        NodeRecord* chunk = chunks_.take();
        if (chunk == nullptr) {
            chunks_.nodes.fetch_sub(kChunkMask + 1);
            return false;
        }
        tree.chunk_table[tree.chunk_count++] = chunk;
        return true;
    }
    static void point_at(Arena& arena, const Tree& tree, std::uint32_t index) noexcept {
        arena.main_tree = &tree == static_cast<const ThreadState*>(arena.state)->main.get();
        arena.chunks = tree.chunk_table.get();
        arena.slots = tree.slots.data();
        arena.slot_mask = static_cast<std::uint32_t>(tree.slots.size() - 1);
        arena.cur = tree.at(index);
        arena.cur_index = index;
    }

    // A new child of `parent` in `tree` (the arena records into it); 0 when a limit is reached.
    std::uint32_t add_node(Arena& arena, Tree& tree, std::uint32_t parent_index, const SiteInfo* site) noexcept {
        const std::uint32_t index = tree.size.load(std::memory_order_relaxed);
        if (index >= tree.capacity) return 0;
        if ((index >> kChunkBits) == tree.chunk_count && !grow(tree)) return 0;
        try {
            if (2 * (index + 1) > tree.slots.size()) rehash(tree, 2 * tree.slots.size());
        } catch (...) {
            return 0;
        }
        NodeRecord* parent = tree.at(parent_index);
        NodeRecord* node = tree.at(index);
        node->site = site;
        node->parent = parent_index;
        if (parent->last_child == 0) {
            node->next_sibling = index;
        } else {  // after the newest in the ring, before the oldest
            node->next_sibling = tree.at(parent->last_child)->next_sibling;
            tree.at(parent->last_child)->next_sibling = index;
        }
        parent->last_child = index;
        insert_slot(tree, index);
        tree.size.store(index + 1, std::memory_order_release);
        if (arena.chunks == tree.chunk_table.get()) {
            arena.slots = tree.slots.data();
            arena.slot_mask = static_cast<std::uint32_t>(tree.slots.size() - 1);
        }
        return index;
    }
    static void insert_slot(Tree& tree, std::uint32_t index) noexcept {
        const auto mask = static_cast<std::uint32_t>(tree.slots.size() - 1);
        const NodeRecord* node = tree.at(index);
        std::uint32_t slot = child_slot(node->parent, node->site, mask);
        while (tree.slots[slot] != 0) slot = (slot + 1) & mask;
        tree.slots[slot] = index;
    }
    static void rehash(Tree& tree, std::size_t size) {
        tree.slots.assign(size, 0);
        for (std::uint32_t i = 1, n = tree.size.load(std::memory_order_relaxed); i < n; ++i) insert_slot(tree, i);
    }

    NodeRecord* descend(Arena& arena, std::uint32_t index) noexcept {
        arena.cur->hint = index;
        arena.cur = arena.at(index);
        arena.cur_index = index;
        ++arena.depth;
        return arena.cur;
    }

    NodeRecord* find_or_add(Arena& arena, Site* site, const SiteInfo* info) noexcept {
        ThreadState& state = state_of(arena);
        if (arena.cur == &state.deferred) start_deferred_capture(state);
        const bool full = state.current->nodes() >= state.current->capacity;
        if (!info->interned && full) return enter_overflow(state);  // a site never seen has no node here
        if ((info = registered(site, info)) == nullptr) return drop(arena, 1);
        std::uint32_t index = arena.find(arena.cur_index, info);
        if (index == 0) index = add_node(arena, *state.current, arena.cur_index, info);
        if (index == 0) return enter_overflow(state);
        return descend(arena, index);
    }

    NodeRecord* drop(Arena& arena, std::uint64_t calls) noexcept {  // counts calls not recorded
        ThreadState& state = state_of(arena);
        bump_saturating(arena.at(arena.cur_index)->dropped, calls);
        bump(state.current->dropped_nodes, calls);
        return nullptr;
    }

    // A scope past the node limit is entered as `overflow`, a node outside the tree, so that the calls
    // inside it are dropped with it instead of being filed under its parent. The depth limit reads 0
    // meanwhile: nested scopes come here, the fast path never sees `overflow`.
    NodeRecord* enter_overflow(ThreadState& state) noexcept {
        Arena& arena = state.arena;
        drop(arena, 1);
        state.overflow.parent = arena.cur_index;  // leave() goes back to the real parent from here
        arena.cur = &state.overflow;
        ++arena.depth;
        state.in_overflow.store(true);
        arena.depth_limit.store(0);
        return &state.overflow;
    }

    static void zero(Tree& tree) noexcept {
        for (std::uint32_t i = 0, n = tree.nodes(); i < n; ++i) {
            NodeRecord* node = tree.at(i);
            if (node->count.load(std::memory_order_relaxed) == 0 && node->dropped.load(std::memory_order_relaxed) == 0 &&
                node->throws.load(std::memory_order_relaxed) == 0)
                continue;  // never touched since the last zeroing
            node->throws.store(0, std::memory_order_relaxed);
            node->dropped.store(0, std::memory_order_relaxed);
            node->count.store(0, std::memory_order_relaxed);
            node->total.store(0, std::memory_order_relaxed);
            node->min.store(~std::uint64_t{0}, std::memory_order_relaxed);
            node->max.store(0, std::memory_order_relaxed);
        }
        tree.dropped_depth.store(0, std::memory_order_relaxed);
        tree.dropped_nodes.store(0, std::memory_order_relaxed);
    }

    void apply_pending_reset(ThreadState& state) noexcept {  // owner only
        if (!state.reset_pending()) return;  // (also checked by callers on their fast path)
        const std::uint32_t request = state.reset_requested.load();
        zero(*state.main);
        {
            std::lock_guard<std::mutex> lock(state.mutex);
            state.main->messages.clear();
        }
        state.reset_done.store(request);
        state.restore_depth_limit();
    }

    void remember_dynamic(ThreadState& state, Arena& arena, const SiteInfo* site) noexcept {
        // No more names than the thread has nodes: the table (170 bytes a name at most, entries and
        // slots grown by doubling) stays within three times the tree's memory, which max_total_nodes
        // bounds; the rest are looked up each time.
        const auto count = static_cast<std::uint32_t>(state.dynamic.size());
        if (count >= state.main->nodes()) return;
        const NameKey key = name_key(site->name, site->name_size, reinterpret_cast<std::uintptr_t>(site->origin));
        const auto place = [](std::vector<DynamicSlot>& slots, std::uint64_t hash, std::uint32_t entry) {
            const auto mask = static_cast<std::uint32_t>(slots.size() - 1);
            std::uint32_t slot = static_cast<std::uint32_t>(hash) & mask;
            while (slots[slot].entry != 0) slot = (slot + 1) & mask;
            slots[slot] = DynamicSlot{static_cast<std::uint32_t>(hash >> 32), entry + 1};
        };
        try {
            // Grown here, where a failure only loses this name: the appends below cannot throw.
            if (count == state.dynamic.capacity()) state.dynamic.reserve(count == 0 ? 64 : 2 * std::size_t{count});
            if (count == state.dynamic_links.capacity()) state.dynamic_links.reserve(state.dynamic.capacity());
            if (4 * (count + 1) > 3 * state.dynamic_slots.size()) {  // at most 3/4 full
                std::vector<DynamicSlot> bigger(state.dynamic_slots.empty() ? 64 : 2 * state.dynamic_slots.size());
                for (std::uint32_t i = 0; i < count; ++i) place(bigger, state.dynamic[i].hash, i);
                state.dynamic_slots.swap(bigger);
            }
        } catch (...) {  // out of memory: this name is looked up each time; the arrays that grew have moved
            arena.dynamic = state.dynamic.data();
            arena.dynamic_links = state.dynamic_links.data();
            return;
        }
        DynamicEntry& entry = state.dynamic.emplace_back();
        state.dynamic_links.emplace_back();
        entry.info = site;
        entry.origin = site->origin;
        entry.hash = key.hash;
        entry.size = site->name_size;
        std::copy(std::begin(key.head), std::end(key.head), std::begin(entry.head));
        place(state.dynamic_slots, key.hash, count);
        arena.dynamic_slots = state.dynamic_slots.data();
        arena.dynamic_mask = static_cast<std::uint32_t>(state.dynamic_slots.size() - 1);
        arena.dynamic = state.dynamic.data();
        arena.dynamic_links = state.dynamic_links.data();
    }

    // ---- sessions and captures ----

    // The sessions watching `site`, decided once per site and session epoch. `epoch` receives the
    // epoch the mask belongs to: a slot may be reused by another session later.
    std::uint32_t watch_mask(const SiteInfo& site, std::uint32_t& epoch) noexcept {
        const std::uint64_t cached = site.watch.load(std::memory_order_acquire);
        epoch = static_cast<std::uint32_t>(cached >> 32);
        if (epoch == epoch_seen_.load(std::memory_order_acquire)) return static_cast<std::uint32_t>(cached);
        return decide_watch(site, epoch);
    }
    TRACETREE_DETAIL_COLD std::uint32_t decide_watch(const SiteInfo& site, std::uint32_t& epoch) noexcept {
        std::shared_ptr<SessionState> watching[kMaxSessions];
        try {
            std::lock_guard<std::mutex> lock(mutex_);
            epoch = epoch_;
            std::copy(std::begin(sessions_), std::end(sessions_), std::begin(watching));
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
        const_cast<SiteInfo&>(site).watch.store((std::uint64_t{epoch} << 32) | mask, std::memory_order_release);
        return mask;
    }

    // The thread's copy of the sessions of `epoch`; false when the sessions have changed since.
    bool current_sessions(ThreadState& state, std::uint32_t epoch) noexcept {
        return state.sessions_epoch == epoch || copy_sessions(state, epoch);
    }
    TRACETREE_DETAIL_COLD bool copy_sessions(ThreadState& state, std::uint32_t epoch) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        if (epoch_ != epoch) return false;  // decided for sessions that are gone: not this call
        state.capture_mask = 0;
        for (int i = 0; i < kMaxSessions; ++i) {
            state.sessions[i] = sessions_[i];
            if (sessions_[i] && sessions_[i]->captures()) state.capture_mask |= 1u << i;
        }
        state.sessions_epoch = epoch;
        return true;
    }

    // Readies the capture slot for an invocation of `root` watched by `mask`: its sessions, the cost
    // below which none of them wants it, its tree; false when it cannot (out of memory).
    TRACETREE_DETAIL_INLINE bool prepare_capture(ThreadState& state, const SiteInfo* root, std::uint32_t mask) noexcept {
        try {
            if (state.capture_depth == state.captures.size()) state.captures.emplace_back();
            Capture& capture = state.captures[state.capture_depth];
            // The same sessions and root as this slot's last capture (a scope called in a loop): reuse
            // what it kept, without touching reference counts or allocating.
            if (capture.mask != mask || capture.sessions_epoch != state.sessions_epoch) {
                capture.sessions.clear();
                capture.values = false;
                Nanos least = Nanos::max();
                for (std::uint32_t rest = mask; rest != 0; rest &= rest - 1) {
                    capture.sessions.push_back(state.sessions[__builtin_ctz(rest)]);
                    capture.values = capture.values || capture.sessions.back()->with_values;
                    least = std::min(least, capture.sessions.back()->min_cost);
                }
                // In ticks, 2% short of it: the ratio of ticks to nanoseconds still sharpens at start-up.
                capture.below = static_cast<std::uint64_t>(static_cast<double>(least.count()) * 0.98 / ns_per_tick());
                capture.sessions_epoch = state.sessions_epoch;
                capture.mask = mask;
            }
            if (!capture.tree || capture.root != root) {
                if (capture.tree) keep_spare(state, std::move(capture.tree));
                capture.tree = spare_tree(state, root);
                if (!capture.tree) return false;
                capture.root = root;
            }
            return true;
        } catch (...) {  // out of memory: record the scope without a capture
            return false;
        }
    }

    // Records into the prepared capture's tree from here on, from its top.
    TRACETREE_DETAIL_INLINE void enter_capture(ThreadState& state) noexcept {
        Capture& capture = state.captures[state.capture_depth];
        Arena& arena = state.arena;
        capture.outer = state.current;
        capture.outer_cur = arena.cur;
        capture.outer_cur_index = arena.cur_index;
        capture.outer_values = arena.values;
        capture.deferred_from = nullptr;
        ++state.capture_depth;
        state.capturing |= capture.mask;
        state.current = capture.tree.get();
        point_at(arena, *state.current, 0);
        // A capture without values hides the values an outer one asked for: they would land on
        // nodes of a tree that is not that capture's.
        arena.values = static_cast<std::uint8_t>((arena.values & kValuesOfNode) | (capture.values ? kValuesOfAll : 0));
    }

    // The first thing recorded under a scope whose capture was deferred (begin()): the capture starts
    // as if at the scope's start, and the arena moves to the scope's node in the capture's tree.
    void start_deferred_capture(ThreadState& state) noexcept {
        Arena& arena = state.arena;
        const std::uint32_t own = state.deferred.parent;
        const NodeRecord* node = state.current->at(own);
        point_at(arena, *state.current, node->parent);
        enter_capture(state);
        std::uint32_t index = arena.find(0, node->site);
        if (index == 0) index = add_node(arena, *state.current, 0, node->site);
        if (index == 0) {  // the capture's tree is full: the invocation is recorded without it
            leave_capture(state);
            point_at(arena, *state.current, own);
            return;
        }
        arena.cur = arena.at(index);
        arena.cur_index = index;
        state.captures[state.capture_depth - 1].deferred_from = node;
    }

    // Starts watching this invocation for stack, watch and monitor sessions; false when it cannot.
    bool push_frame(ThreadState& state, Arena& arena, const SiteInfo* site, const NodeRecord* node, std::uint32_t mask) noexcept {
        try {
            if (state.frame_depth == state.frames.size()) state.frames.emplace_back();
            Frame& frame = state.frames[state.frame_depth];
            frame.site = site;
            frame.node = node;
            if (frame.mask != mask || frame.sessions_epoch != state.sessions_epoch) {
                frame.sessions.clear();
                frame.watch = frame.chain_wanted = false;
                for (std::uint32_t rest = mask; rest != 0; rest &= rest - 1) {
                    const std::shared_ptr<SessionState>& session = state.sessions[__builtin_ctz(rest)];
                    frame.sessions.push_back(session);
                    frame.watch = frame.watch || session->kind == SessionKind::watch;
                    frame.chain_wanted = frame.chain_wanted || session->kind == SessionKind::stack;
                }
                frame.mask = mask;
                frame.sessions_epoch = state.sessions_epoch;
            }
            if (frame.chain_wanted) collect_chain(state, frame.chain);
            frame.outer_values = arena.values;
            frame.outer_value_node = arena.value_node;
            if (frame.watch) {
                arena.values |= kValuesOfNode;
                arena.value_node = node;
            }
            ++state.frame_depth;
            return true;
        } catch (...) {  // out of memory: not watched
            return false;
        }
    }

    // The open scopes of this thread, innermost first, across the captures it is inside.
    void collect_chain(ThreadState& state, std::vector<const SiteInfo*>& chain) {
        chain.clear();
        const Tree* tree = state.current;
        std::uint32_t index = state.arena.cur_index;
        for (std::uint32_t capture = state.capture_depth;;) {
            for (; index != 0; index = tree->at(index)->parent) chain.push_back(tree->at(index)->site);
            if (capture == 0) return;
            const Capture& outer = state.captures[--capture];
            tree = outer.outer;
            index = outer.outer_cur_index;
        }
    }

    void pop_frame(ThreadState& state, std::uint64_t elapsed, bool threw) noexcept {
        Frame& frame = state.frames[--state.frame_depth];
        Arena& arena = state.arena;
        arena.values = frame.outer_values;
        arena.value_node = frame.outer_value_node;
        const std::uint64_t ticks_elapsed = elapsed;
        const Nanos cost = to_nanos(ticks_elapsed, ns_per_tick());
        for (const auto& session : frame.sessions) {
            try {
                switch (session->kind) {
                case SessionKind::stack: deliver_stack(state, *session, frame, cost, threw); break;
                case SessionKind::watch: deliver_watch(state, *session, frame, cost, threw); break;
                case SessionKind::monitor: count_call(*session, frame.site, ticks_elapsed, threw); break;
                default: break;
                }
            } catch (...) {  // out of memory while delivering: this invocation is lost, the program goes on
            }
        }
        frame.values.clear();
    }

    void add_value(Arena& arena, const char* name, std::string text) {
        ThreadState& state = state_of(arena);
        if ((arena.values & kValuesOfNode) != 0 && arena.value_node == arena.cur && state.frame_depth != 0) {
            Frame& frame = state.frames[state.frame_depth - 1];
            if (frame.node == arena.cur && frame.values.size() < kMaxValuesPerScope) frame.values.emplace_back(name, text);
        }
        if ((arena.values & kValuesOfAll) != 0 && state.capture_depth != 0 && state.current != state.main.get()) {
            std::lock_guard<std::mutex> lock(state.mutex);
            auto& values = state.current->values[arena.cur_index];
            if (values.size() < kMaxValuesPerScope) values.emplace_back(name, std::move(text));
        }
    }

    void notify_listeners() {
        // Serialised, so that a listener sees the changes in the order they happened.
        std::lock_guard<std::mutex> lock(listeners_mutex_);
        for (const auto& listener : listeners_) listener.first(listener.second);
    }

    // ---- delivery ----

    // One ticket of the session's limit, or false when it is reached.
    static bool ticket(SessionState& session, std::uint64_t& number) {
        number = session.reserved.fetch_add(1, std::memory_order_relaxed);
        return number < session.limit;
    }

    template <class Value>
    void deliver_value(SessionState& session, std::uint64_t number, Value value) {
        {
            std::lock_guard<std::mutex> lock(session.mutex);
            if (session.stopped) return;
            session.queue<Value>().push_back(std::move(value));
            ++session.delivered;
        }
        session.changed.notify_all();
        if (number + 1 == session.limit) stop_session(session);
    }

    void fill_header(ThreadState& state, std::string& thread_name, std::uint32_t& thread_id,
                     std::vector<std::pair<std::string, std::string>>& fields) {
        state.refresh_os_name();
        thread_name = state.thread_name();
        thread_id = state.id;
        fields = state.annotations;
    }
    // When an invocation that just ended after `cost` started, on the wall clock: read only for the
    // invocations delivered.
    static std::chrono::system_clock::time_point started(Nanos cost) {
        return std::chrono::system_clock::now() - std::chrono::duration_cast<std::chrono::system_clock::duration>(cost);
    }

    void deliver_stack(ThreadState& state, SessionState& session, const Frame& frame, Nanos cost, bool threw) {
        std::uint64_t number = 0;
        if (cost < session.min_cost || !ticket(session, number)) return;
        StackTrace stack;
        stack.start = started(cost);
        fill_header(state, stack.thread_name, stack.thread_id, stack.fields);
        stack.cost = cost;
        stack.threw = threw;
        for (const SiteInfo* site : frame.chain) {
            const InternedSite& s = interned(site);
            stack.frames.push_back(StackFrame{s.name, s.file, s.line});
        }
        deliver_value(session, number, std::move(stack));
    }

    void deliver_watch(ThreadState& state, SessionState& session, const Frame& frame, Nanos cost, bool threw) {
        std::uint64_t number = 0;
        if (cost < session.min_cost || !ticket(session, number)) return;
        WatchEvent event;
        event.start = started(cost);
        fill_header(state, event.thread_name, event.thread_id, event.fields);
        const InternedSite& site = interned(frame.site);
        event.scope = site.name;
        event.file = site.file;
        event.line = site.line;
        event.cost = cost;
        event.threw = threw;
        for (const auto& value : frame.values)
            if (session.value_names.empty() ||
                std::find(session.value_names.begin(), session.value_names.end(), value.first) != session.value_names.end())
                event.values.push_back(value);
        deliver_value(session, number, std::move(event));
    }

    static void count_call(SessionState& session, const SiteInfo* site, std::uint64_t elapsed, bool threw) noexcept {
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

    // A monitor that matched `site`: its cell is made (or taken over from a session that had the slot
    // before) and the site is added to what the monitor reports.
    void monitor_site(SessionState& session, const SiteInfo& site) {
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

    static void keep_spare(ThreadState& state, std::unique_ptr<Tree> tree) noexcept {
        try {
            if (state.spare_trees.size() >= 8) state.spare_trees.erase(state.spare_trees.begin());  // frees its nodes
            state.spare_trees.push_back(std::move(tree));
        } catch (...) {  // out of memory: the tree is freed
        }
    }

    // A capture tree for `root`: the one used for it before (its nodes are still there, zeroed), or a
    // new one. At most 8 are kept per thread besides the captures' own.
    std::unique_ptr<Tree> spare_tree(ThreadState& state, const SiteInfo* root) {
        auto& spares = state.spare_trees;
        auto same = std::find_if(spares.begin(), spares.end(), [&](const std::unique_ptr<Tree>& tree) {
            return tree->nodes() > 1 && tree->at(tree->at(0)->last_child)->site == root;
        });
        if (same == spares.end() && !spares.empty()) same = spares.begin();
        if (same != spares.end()) {
            std::unique_ptr<Tree> tree = std::move(*same);
            spares.erase(same);
            return tree;
        }
        auto tree = std::make_unique<Tree>(state.main->capacity, chunks_);
        if (!prepare_tree(*tree)) return nullptr;
        return tree;
    }

    // `elapsed`: the root scope's ticks. The capture's tree stays with its slot, zeroed, for the next one.
    TRACETREE_DETAIL_INLINE void end_capture(ThreadState& state, std::uint64_t elapsed, bool deliverable) noexcept {
        Capture& capture = leave_capture(state);
        Arena& arena = state.arena;
        Tree& tree = *capture.tree;
        try {
            if (deliverable && wanted(capture, elapsed)) {  // cheap invocations skip building values
                const Nanos cost = to_nanos(elapsed, ns_per_tick());
                std::vector<Node> roots;
                {
                    std::lock_guard<std::mutex> lock(state.mutex);
                    roots = to_values(tree, ns_per_tick(), &tree.messages, &tree.values);
                }
                if (!roots.empty()) {
                    Trace trace;
                    trace.start = started(cost);
                    trace.root = std::move(roots.front());
                    state.refresh_os_name();
                    trace.thread_name = state.thread_name();
                    trace.thread_id = state.id;
                    trace.fields = state.annotations;
                    for (const auto& session : capture.sessions) deliver_trace(*session, trace);
                }
            }
        } catch (...) {  // out of memory while delivering: this capture is lost, the program goes on
        }
        fold(arena, tree, *capture.outer, capture.outer_cur_index);
        zero(tree);
        if (!tree.messages.empty() || !tree.values.empty()) {  // only this thread adds to them
            std::lock_guard<std::mutex> lock(state.mutex);
            tree.messages.clear();
            tree.values.clear();
        }
    }

    // Back to the tree the innermost capture was started from, where it was started.
    Capture& leave_capture(ThreadState& state) noexcept {
        Capture& capture = state.captures[--state.capture_depth];
        Arena& arena = state.arena;
        state.capturing &= ~capture.mask;
        state.current = capture.outer;
        point_at(arena, *capture.outer, capture.outer_cur_index);
        arena.cur = capture.outer_cur;
        arena.values = capture.outer_values;
        return capture;
    }

    // Whether a session of `capture` wants an invocation that took `elapsed` ticks.
    bool wanted(const Capture& capture, std::uint64_t elapsed) const noexcept {
        if (elapsed < capture.below) return false;
        const Nanos cost = to_nanos(elapsed, ns_per_tick());
        return std::any_of(capture.sessions.begin(), capture.sessions.end(), [&](const auto& session) {
            return cost >= session->min_cost && session->reserved.load(std::memory_order_relaxed) < session->limit;
        });
    }

    // Adds a finished capture to the tree it was started from, as if it had been recorded there.
    // Each capture node remembers its counterpart, so a capture repeated at the same place costs a
    // pass over its nodes.
    TRACETREE_DETAIL_INLINE void fold(Arena& arena, Tree& from, Tree& into, std::uint32_t under) noexcept {
        const std::uint32_t size = from.nodes();
        if (from.folded_tree != &into || from.folded_under != under) from.folded_into.clear();
        if (from.folded_into.size() != size) {
            try {
                from.folded_into.resize(size, 0);
            } catch (...) {
                return;  // out of memory: the capture's counts are lost from the profile
            }
        }
        from.folded_tree = &into;
        from.folded_under = under;
        from.folded_into[0] = under;
        for (std::uint32_t i = 1; i < size; ++i) {
            const NodeRecord& source = *from.at(i);
            const std::uint64_t count = source.count.load(std::memory_order_relaxed);
            const std::uint32_t dropped = source.dropped.load(std::memory_order_relaxed);
            if (count == 0 && dropped == 0) continue;
            std::uint32_t& target_index = from.folded_into[i];
            const bool parent_folded = source.parent == 0 || from.folded_into[source.parent] != 0;
            if (target_index == 0 && parent_folded)
                target_index = into_child(arena, into, from.folded_into[source.parent], source.site);
            if (target_index == 0) {
                bump_saturating(into.at(nearest_folded(from, i))->dropped, count);
                bump(into.dropped_nodes, count);
                continue;
            }
            NodeRecord& target = *into.at(target_index);
            bump(target.count, count);
            bump(target.total, source.total.load(std::memory_order_relaxed));
            if (const std::uint32_t throws = source.throws.load(std::memory_order_relaxed)) bump_saturating(target.throws, throws);
            if (dropped != 0) bump_saturating(target.dropped, dropped);
            const std::uint64_t min = source.min.load(std::memory_order_relaxed), max = source.max.load(std::memory_order_relaxed);
            if (min < target.min.load(std::memory_order_relaxed)) target.min.store(min, std::memory_order_relaxed);
            if (max > target.max.load(std::memory_order_relaxed)) target.max.store(max, std::memory_order_relaxed);
            if (from.messages.empty()) continue;
            const auto message = from.messages.find(i);
            if (message != from.messages.end()) {
                std::lock_guard<std::mutex> lock(state_of(arena).mutex);
                try {
                    into.messages[target_index] = message->second;
                } catch (...) {
                }
            }
        }
        if (const std::uint64_t depth = from.dropped_depth.load(std::memory_order_relaxed)) bump(into.dropped_depth, depth);
        if (const std::uint64_t nodes = from.dropped_nodes.load(std::memory_order_relaxed)) bump(into.dropped_nodes, nodes);
    }
    std::uint32_t into_child(Arena& arena, Tree& into, std::uint32_t parent, const SiteInfo* site) noexcept {
        const std::uint32_t found = find_child(into.chunk_table.get(), into.slots.data(),
                                               static_cast<std::uint32_t>(into.slots.size() - 1), parent, site);
        return found != 0 ? found : add_node(arena, into, parent, site);
    }
    static std::uint32_t nearest_folded(const Tree& from, std::uint32_t index) noexcept {
        while (index != 0 && from.folded_into[index] == 0) index = from.at(index)->parent;
        return from.folded_into[index];
    }

    void deliver_trace(SessionState& session, const Trace& trace);

    // ---- threads ----

    // At thread exit (a pthread key destructor, after every thread_local destructor of the thread):
    // its profile joins the exited ones, its trees are freed (by the last snapshot reading them, if
    // any). The state itself is kept a while, since another copy's cached pointer may still be read
    // by a last key destructor of this thread.
    void retire(ThreadState& state) noexcept {
        std::optional<ThreadProfile> profile;
        ThreadTimeline timeline;
        std::uint64_t resets_before = 0;
        try {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                resets_before = resets_;
            }
            state.refresh_os_name();
            const double ratio = ns_per_tick();
            profile = thread_profile(state, state.main.get(), ratio);
            profile->exited = true;
            profile->exited_threads = 1;
            timeline = thread_timeline(state, ratio);
        } catch (...) {  // out of memory at thread exit: the thread's data is lost, the program is not
            profile.reset();
        }
        state.retired.store(true);
        state.restore_depth_limit();
        state.spare_trees.clear();
        state.current = nullptr;
        // Last: once in retired_, the state may be freed by another thread's retire().
        std::lock_guard<std::mutex> lock(mutex_);
        state.main.reset();
        try {
            if (profile) {
                if (resets_ != resets_before) profile->roots.clear();  // taken before a reset() that has run since
                fold_exited(std::move(*profile));
                if (!timeline.spans.empty() || timeline.dropped != 0) fold_exited(std::move(timeline));
            }
            auto self = std::find_if(live_.begin(), live_.end(), [&](const auto& p) { return p.get() == &state; });
            if (self != live_.end()) {
                retired_.push_back(std::move(*self));
                live_.erase(self);
            }
            while (retired_.size() > kRetiredKept) retired_.pop_front();
        } catch (...) {
        }
    }
    // Exited threads fold by name; past the limit, into one entry for all the others. Together they keep
    // at most max_total_nodes nodes: what an entry cannot keep is counted as not recorded.
    void fold_exited(ThreadProfile profile) {
        ThreadProfile& entry = exited_entry(std::move(profile));
        std::uint64_t nodes = count_nodes(entry.roots);
        const std::uint64_t limit = limits_.max_total_nodes;
        if (exited_nodes_ + nodes > limit) {
            entry.dropped_nodes += prune(entry.roots, limit > exited_nodes_ ? limit - exited_nodes_ : 0);
            nodes = count_nodes(entry.roots);
        }
        exited_nodes_ += nodes;
    }
    static std::uint64_t count_nodes(const std::vector<Node>& nodes) noexcept {
        std::uint64_t count = nodes.size();
        for (const Node& node : nodes) count += count_nodes(node.children);
        return count;
    }
    // Keeps nodes breadth first while `budget` lasts; a child cut is a call of its parent not recorded
    // (Node::dropped). Returns the calls cut (a root cut has no parent: the entry's dropped_nodes).
    static std::uint64_t prune(std::vector<Node>& roots, std::uint64_t budget) {
        std::uint64_t kept = 0, cut = 0;
        while (roots.size() > budget) {
            cut += roots.back().count;
            roots.pop_back();
        }
        kept = roots.size();
        std::vector<Node*> level, next;
        for (Node& root : roots) level.push_back(&root);
        while (!level.empty()) {
            next.clear();
            for (Node* node : level) {
                std::size_t keep = 0;
                while (keep < node->children.size() && kept < budget) ++keep, ++kept;
                for (std::size_t i = keep; i < node->children.size(); ++i) {
                    node->dropped += node->children[i].count;
                    cut += node->children[i].count;  // counted in the entry too, as the node limit counts them
                }
                if (keep < node->children.size()) {
                    node->children.resize(keep);
                    node->children.shrink_to_fit();
                }
                for (Node& child : node->children) next.push_back(&child);
            }
            level.swap(next);
        }
        return cut;
    }
    ThreadProfile& exited_entry(ThreadProfile profile) {
        auto same = std::find_if(exited_.begin(), exited_.end(),
                                 [&](const ThreadProfile& t) { return t.thread_name == profile.thread_name; });
        if (same == exited_.end() && exited_.size() >= limits_.max_exited_threads) {
            same = std::find_if(exited_.begin(), exited_.end(), [](const ThreadProfile& t) { return t.thread_id == 0; });
            if (same == exited_.end()) {
                ThreadProfile others;
                others.thread_name = "(other exited threads)";
                others.exited = true;
                exited_.push_back(std::move(others));
                same = exited_.end() - 1;
            }
        }
        if (same == exited_.end()) {
            exited_.push_back(std::move(profile));
            return exited_.back();
        }
        exited_nodes_ -= count_nodes(same->roots);
        for (const Node& root : profile.roots) merge_into(same->roots, root);
        same->dropped_depth += profile.dropped_depth;
        same->dropped_nodes += profile.dropped_nodes;
        same->exited_threads += profile.exited_threads;
        return *same;
    }
    void fold_exited(ThreadTimeline timeline) {
        auto same = std::find_if(exited_timelines_.begin(), exited_timelines_.end(),
                                 [&](const ThreadTimeline& t) { return t.thread_name == timeline.thread_name; });
        if (same == exited_timelines_.end()) {
            if (exited_timelines_.size() < limits_.max_exited_threads) exited_timelines_.push_back(std::move(timeline));
            return;
        }
        const std::size_t limit = timeline_limit_.load();  // the per-thread bound holds for the folded entry too
        for (Span& span : timeline.spans) {
            if (same->spans.size() < limit) same->spans.push_back(std::move(span));
            else ++same->dropped;
        }
        same->dropped += timeline.dropped;
    }

    // fork() copies only the calling thread: a lock held by another thread at that moment would never
    // be released in the child. So the locks are taken around fork(), and the child forgets the other
    // threads (their states are leaked, not destroyed: their own mutexes may be held).
    static void install_fork_handlers() noexcept {
        pthread_atfork(
            [] { static_cast<RuntimeImpl*>(find_recorder())->lock_for_fork(); },
            [] { static_cast<RuntimeImpl*>(find_recorder())->unlock_after_fork(false); },
            [] { static_cast<RuntimeImpl*>(find_recorder())->unlock_after_fork(true); });
    }
    void lock_for_fork() noexcept {  // lock order as everywhere: listeners, runtime, this thread's own, sites
        listeners_mutex_.lock();
        mutex_.lock();
        if (auto* self = static_cast<ThreadState*>(pthread_getspecific(thread_key_))) self->mutex.lock();
        sites_mutex_.lock();
        chunks_.lock();
    }
    void unlock_after_fork(bool child) noexcept {
        auto* self = static_cast<ThreadState*>(pthread_getspecific(thread_key_));
        if (child) {
            auto* orphans = new (std::nothrow) std::vector<std::shared_ptr<ThreadState>>;
            for (auto& state : live_)
                if (state.get() != self && orphans != nullptr) orphans->push_back(std::move(state));
            live_.erase(std::remove(live_.begin(), live_.end(), nullptr), live_.end());
        }
        chunks_.unlock();
        sites_mutex_.unlock();
        if (self != nullptr) self->mutex.unlock();
        mutex_.unlock();
        listeners_mutex_.unlock();
    }

    const std::string throw_hook_;  // why this process's throws are not recorded; empty: they are
    const std::string module_;      // the executable or library whose copy made this runtime
    const std::uint64_t anchor_tick_;  // ticks become nanoseconds against this, at snapshot time
    const std::int64_t anchor_ns_;
    mutable std::atomic<double> ratio_{1.0};  // ns_per_tick(), as last measured
    mutable std::atomic<std::uint64_t> ratio_tick_{0};
    std::atomic<ClockFunction> test_clock_{nullptr};
    std::atomic<bool> timeline_on_{false};
    std::atomic<std::size_t> timeline_limit_{65536};
    pthread_key_t thread_key_{};


    // Guarded by mutex_:
    std::uint8_t flags_ = kRecording;
    std::uint32_t epoch_ = 1;  // bumped when the set of sessions changes
    std::atomic<std::uint32_t> epoch_seen_{1};  // epoch_, read without the lock
    Limits limits_;
    std::uint32_t next_thread_id_ = 1;
    std::uint64_t resets_ = 0;  // an exiting thread's data taken before a reset must not come back after it
    std::vector<std::shared_ptr<ThreadState>> live_;
    std::deque<std::shared_ptr<ThreadState>> retired_;
    std::vector<ThreadProfile> exited_;
    std::uint64_t exited_nodes_ = 0;  // in exited_, at most max_total_nodes
    std::vector<ThreadTimeline> exited_timelines_;

    std::mutex listeners_mutex_;  // taken before mutex_ (a listener asks for running_sessions())
    std::vector<std::pair<Listener, void*>> listeners_;

    std::mutex sites_mutex_;
    std::unordered_map<std::string, std::unique_ptr<InternedSite>> sites_;
    std::uint64_t name_bytes_ = 0;
    std::atomic<std::uint64_t> max_name_bytes_{Limits{}.max_name_bytes};
    std::atomic<std::uint64_t> dropped_names_{0};
    ChunkPool chunks_;
    std::atomic<std::uint64_t> max_total_nodes_{Limits{}.max_total_nodes};
};

// A capture to a trace session (its callback, or its queue) or a flight recorder (its ring).
inline void RuntimeImpl::deliver_trace(SessionState& session, const Trace& trace) {
    if (trace.root.total < session.min_cost) return;
    if (session.kind == SessionKind::recorder) {
        std::size_t size = sizeof trace;
        const auto add = [&size](const Node& node, const auto& self) -> void {
            size += sizeof node + node.name.size() + node.file.size() + (node.message ? node.message->size() : 0);
            for (const auto& value : node.values) size += value.first.size() + value.second.size() + 64;
            for (const Node& child : node.children) self(child, self);
        };
        add(trace.root, add);
        {
            std::lock_guard<std::mutex> lock(session.mutex);
            if (session.stopped) return;
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
        }
        return;
    }
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
    std::uint64_t number = 0;
    if (!ticket(session, number)) return;
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
    if (number + 1 == session.limit) stop_session(session);
}

// ---- starting the recorder ----------------------------------------------------------------------

inline std::string check_throw_hook();  // detail/throw_hook.hpp

// The process's recorder: found, or started by this copy. Copies that start at once (plugins loaded
// by two threads) each make one; settle_recorder() keeps exactly one, the others are deleted.
TRACETREE_DETAIL_COLD inline RuntimeImpl& runtime() {
    const auto as_runtime = [](Recorder* recorder) -> RuntimeImpl& { return *static_cast<RuntimeImpl*>(recorder); };
    if (Recorder* found = find_recorder()) return as_runtime(found);
    static std::mutex starting;  // this copy's threads start one at a time
    std::lock_guard<std::mutex> lock(starting);
    if (Recorder* found = find_recorder()) return as_runtime(found);
    auto* fresh = new RuntimeImpl(check_throw_hook());
    auto* chosen = static_cast<Recorder*>(settle_recorder(static_cast<Recorder*>(fresh)));
    if (chosen == fresh) fresh->started();
    else delete fresh;
    return as_runtime(chosen);
}

// Files that control tracing start the recorder before main, so that it records from the start.
TRACETREE_DETAIL_LOCAL inline const bool g_runtime_started = [] {
    try {
        runtime();
        return true;
    } catch (...) {  // tried again at the first call of a control function, which then reports it
        return false;
    }
}();

}  // namespace detail
TRACETREE_END_NAMESPACE

// ---- control.hpp's functions --------------------------------------------------------------------

TRACETREE_BEGIN_NAMESPACE

inline void set_enabled(bool on) noexcept {
    try {
        detail::runtime().set_flag(detail::kRecording, on);
    } catch (...) {
    }
}
inline bool enabled() noexcept {
    try {
        return detail::runtime().enabled();
    } catch (...) {
        return false;
    }
}
inline void set_limits(const Limits& limits) { detail::runtime().set_limits(limits); }
inline Limits limits() { return detail::runtime().limits(); }

inline void set_thread_name(std::string_view name) {
    detail::ThreadState* state = detail::runtime().this_thread();
    if (state == nullptr) return;
    const std::string cut(name.substr(0, state->arena.max_name_length.load(std::memory_order_relaxed)));
    std::lock_guard<std::mutex> lock(state->mutex);
    state->name = cut;
    state->named = true;
}

inline void annotate(std::string_view key, std::string_view value) {
    detail::ThreadState* state = detail::runtime().this_thread();
    if (state == nullptr) return;
    const std::size_t cut = state->arena.max_name_length.load(std::memory_order_relaxed);
    const std::string k(key.substr(0, cut));
    auto& fields = state->annotations;  // owner only
    auto same = std::find_if(fields.begin(), fields.end(), [&](const auto& field) { return field.first == k; });
    if (value.empty()) {
        if (same != fields.end()) fields.erase(same);
    } else if (same != fields.end()) {
        same->second = std::string(value.substr(0, cut));
    } else if (fields.size() < 64) {  // a bound against keys made from data
        fields.emplace_back(k, std::string(value.substr(0, cut)));
    }
}
inline void clear_annotations() {
    if (detail::ThreadState* state = detail::runtime().this_thread()) state->annotations.clear();
}

inline void set_clock(ClockFunction now) noexcept {
    try {
        detail::runtime().set_clock(now);
    } catch (...) {
    }
}

inline RecorderInfo recorder_info() { return detail::runtime().info(); }
inline Profile profile() { return detail::runtime().profile(); }
inline void reset() { detail::runtime().reset(); }

// ---- sessions.hpp's functions --------------------------------------------------------------------

namespace detail {

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

inline TraceSession::TraceSession(const TraceRequest& request) {
    detail::check_limit(request.limit(), request.min_cost());
    state_ = detail::start(detail::SessionKind::trace, request, [&](detail::SessionState& s) {
        s.min_cost = request.min_cost();
        s.limit = request.limit() == 0 ? ~std::uint64_t{0} : request.limit();
        s.on_trace = request.on_trace();
        s.with_values = request.with_values();
    });
}

inline StackSession::StackSession(const StackRequest& request) {
    detail::check_limit(request.limit(), request.min_cost());
    state_ = detail::start(detail::SessionKind::stack, request, [&](detail::SessionState& s) {
        s.min_cost = request.min_cost();
        s.limit = request.limit() == 0 ? ~std::uint64_t{0} : request.limit();
    });
}

inline WatchSession::WatchSession(const WatchRequest& request) {
    detail::check_limit(request.limit(), request.min_cost());
    state_ = detail::start(detail::SessionKind::watch, request, [&](detail::SessionState& s) {
        s.min_cost = request.min_cost();
        s.limit = request.limit() == 0 ? ~std::uint64_t{0} : request.limit();
        s.value_names = request.values();
    });
}

inline Monitor::Monitor(const MonitorRequest& request) {
    if (request.interval() < std::chrono::milliseconds(1) || request.interval() > std::chrono::hours(24))
        throw std::invalid_argument("tracetree: a monitor's interval must be between 1 ms and 24 h");
    state_ = detail::start(detail::SessionKind::monitor, request, [&](detail::SessionState& s) {
        s.interval = request.interval();
        s.limit = ~std::uint64_t{0};
    });
}
inline Monitor& Monitor::operator=(Monitor&& other) noexcept {
    if (this != &other) {
        stop();
        state_ = std::move(other.state_);
    }
    return *this;
}
inline Monitor::~Monitor() { stop(); }
inline void Monitor::stop() {
    if (state_) detail::stop(*state_);
}

inline std::optional<MonitorInterval> Monitor::next() {
    if (!state_) return std::nullopt;
    detail::SessionState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mutex);
    const auto end = s.interval_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(s.interval);
    s.changed.wait_until(lock, end, [&] { return s.stopped; });
    if (s.stopped) return std::nullopt;
    MonitorInterval interval;
    interval.start = s.interval_wall_start;
    interval.end = std::chrono::system_clock::now();
    s.interval_start = std::chrono::steady_clock::now();
    s.interval_wall_start = interval.end;
    const double ratio = detail::runtime().ns_per_tick();
    for (const detail::SiteInfo* info : s.monitored) {
        const detail::InternedSite& site = detail::interned(info);
        detail::MonitorCells* cells = site.monitors.load(std::memory_order_acquire);
        const int slot = s.slot.load(std::memory_order_relaxed);
        if (cells == nullptr || slot < 0) continue;
        detail::MonitorCell& cell = cells->cells[slot];
        if (cell.owner.load() != &s) continue;
        MonitorRow row;
        row.calls = cell.calls.exchange(0, std::memory_order_relaxed);
        row.failed = cell.failed.exchange(0, std::memory_order_relaxed);
        row.total = detail::to_nanos(cell.total.exchange(0, std::memory_order_relaxed), ratio);
        const std::uint64_t min = cell.min.exchange(~std::uint64_t{0}, std::memory_order_relaxed);
        const std::uint64_t max = cell.max.exchange(0, std::memory_order_relaxed);
        if (row.calls == 0) continue;
        row.min = detail::to_nanos(min, ratio);
        row.max = std::max(row.min, detail::to_nanos(max, ratio));
        row.name = site.name;
        row.file = site.file;
        row.line = site.line;
        interval.rows.push_back(std::move(row));
    }
    return interval;
}

inline FlightRecorder::FlightRecorder(const RecorderRequest& request) {
    if (request.keep() < 1 || request.keep() > 100000)
        throw std::invalid_argument("tracetree: a flight recorder keeps between 1 and 100000 traces, asked " +
                                    std::to_string(request.keep()));
    if (request.max_bytes() < 4096) throw std::invalid_argument("tracetree: a flight recorder's max_bytes must be at least 4096");
    detail::check_limit(1, request.min_cost());
    state_ = detail::start(detail::SessionKind::recorder, request, [&](detail::SessionState& s) {
        s.min_cost = request.min_cost();
        s.limit = ~std::uint64_t{0};
        s.keep = request.keep();
        s.max_bytes = request.max_bytes();
    });
}
inline FlightRecorder& FlightRecorder::operator=(FlightRecorder&& other) noexcept {
    if (this != &other) {
        stop();
        state_ = std::move(other.state_);
    }
    return *this;
}
inline FlightRecorder::~FlightRecorder() {
    if (!state_) return;
    stop();
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->traces.clear();
}
inline void FlightRecorder::stop() {
    if (state_) detail::stop(*state_);
}
inline std::vector<Trace> FlightRecorder::recent() const {
    if (!state_) return {};
    std::lock_guard<std::mutex> lock(state_->mutex);
    return std::vector<Trace>(state_->traces.begin(), state_->traces.end());
}
inline std::uint64_t FlightRecorder::recorded() const {
    if (!state_) return 0;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->delivered;
}
inline std::uint64_t FlightRecorder::evicted() const {
    if (!state_) return 0;
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->evicted;
}

inline void start_timeline(std::size_t max_spans_per_thread) { detail::runtime().start_timeline(max_spans_per_thread); }
inline void stop_timeline() noexcept {
    try {
        detail::runtime().stop_timeline();
    } catch (...) {
    }
}
inline Timeline timeline() { return detail::runtime().timeline(); }

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_DETAIL_RUNTIME_HPP
