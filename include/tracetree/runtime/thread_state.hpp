// tracetree thread state: what the runtime keeps per recording thread around its arena.
// SPDX-License-Identifier: MIT
//
// The thread's own tree, the captures it runs for trace sessions (a stack of trees folded back into
// the one they started from), the frames it runs for stack, watch and monitor sessions, its run-time
// names, and what snapshots copy (its name, spans, throw messages). Owner only, unless a member says.
#ifndef TRACETREE_RUNTIME_THREAD_STATE_HPP
#define TRACETREE_RUNTIME_THREAD_STATE_HPP

#include "clock.hpp"
#include "cpu_time.hpp"
#include "session_registry.hpp"
#include "sites.hpp"
#include "stack.hpp"
#include "tree.hpp"

#include <algorithm>  // std::find_if, std::min, std::copy
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#include <pthread.h>  // OS thread names
#include <sys/syscall.h>  // SYS_gettid: glibc before 2.30 has no gettid()
#include <unistd.h>       // syscall

TRACETREE_BEGIN_NAMESPACE
namespace detail {

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
    GatherRef* gather = nullptr;  // here() was taken inside it: delivered when that work is done (gather.hpp)
    // A resumption's part of a co-scope's trace (handoffs.hpp), ended when the coroutine suspends; `gather`
    // is that trace.
    const CoroutineState* segment = nullptr;
    // The thread CPU clock source only (cpu_time.hpp): the thread's CPU time and the monotonic clock
    // when the capture started recording.
    std::int64_t cpu_at_start = -1, monotonic_at_start = 0;
};

// A scope watched by stack, watch or monitor sessions, while it runs.
struct Frame {
    const SiteInfo* site = nullptr;
    const NodeRecord* node = nullptr;
    std::uint32_t mask = 0;
    std::uint32_t sessions_epoch = 0;
    std::vector<std::shared_ptr<SessionState>> sessions;  // kept after the scope: reused while the same
    std::vector<const SiteInfo*> chain;  // stack sessions: the open scopes at its start, innermost first
    std::vector<std::uintptr_t> pcs;     // stack sessions: the machine stack at its start (stack.hpp)
    std::vector<std::pair<std::string, std::string>> values;  // watch sessions: its TRACETREE_WATCH values
    std::uint8_t outer_values = 0;
    const NodeRecord* outer_value_node = nullptr;
    bool watch = false;  // a watch session wants its values
    bool chain_wanted = false;
};

// A co-scope's frame (runtime.hpp, enter_watched): the co-scope's, and its place's while it is the
// place's watched one; either may outlive the other, the last reference deletes it.
struct CoScopeFrame {
    Frame frame;
    std::atomic<std::uint32_t> refs{1};
};
inline void release_frame(CoScopeFrame* co) noexcept {
    if (co != nullptr && co->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete co;
}

struct RawSpan {
    const SiteInfo* site;
    std::uint64_t start, end;
    std::uint32_t depth;
    bool threw;
};

inline constexpr std::size_t kMaxValuesPerScope = 64;  // TRACETREE_WATCH values kept per scope and invocation

// The calling thread's id in the kernel (top -H, perf, /proc/PID/task): a system call, so read when
// a thread joins the recorder or a forked child goes on, never per scope.
inline std::uint32_t current_os_thread_id() noexcept { return static_cast<std::uint32_t>(syscall(SYS_gettid)); }

class ThreadState {
public:
    ThreadState(std::uint32_t thread_id, std::uint32_t max_nodes, ChunkPool& pool)
        : id(thread_id), main(new Tree(max_nodes, pool)), pool_(pool) {}
    ThreadState(const ThreadState&) = delete;
    ThreadState& operator=(const ThreadState&) = delete;

    static ThreadState& of(const Arena& arena) noexcept { return *static_cast<ThreadState*>(arena.state); }

    const std::uint32_t id;
    // current_os_thread_id(), set by the owner before the thread joins and again in a forked child
    // (whose one thread has an id of its own); read by snapshots.
    std::uint32_t os_id = 0;
    Arena arena;
    // Shared with snapshots, which copy it under the threads' lock: a thread that exits while one
    // reads it leaves it to that reader to free.
    std::shared_ptr<Tree> main;
    Tree* current = nullptr;     // main, or the innermost capture's tree
    // Entered by a scope past the node limit: what it calls is dropped with it. Like the guard below,
    // followed by a node that matches nothing: Arena::enter reads the node after the current one
    // and after the one left last.
    NodeRecord overflow;
    // The arena's current node while a watched scope's capture is deferred (begin()): no call site
    // matches it and its index is no node's, so the first scope, throw or drop under that scope
    // reaches the runtime, which starts the capture first. `parent` is the scope's node's index.
    // The second stays empty.
    NodeRecord deferred_[2];
    NodeRecord& deferred() noexcept { return deferred_[0]; }
    const NodeRecord& deferred() const noexcept { return deferred_[0]; }
    std::atomic<bool> in_overflow{false};
    std::atomic<bool> retired{false};
    std::atomic<std::uint32_t> max_depth{0};         // any thread (set_limits)
    std::atomic<std::uint32_t> reset_requested{0};   // any thread (reset)

    std::mutex mutex;  // what snapshots copy: the name, spans, throw messages
    std::string name;
    bool named = false;  // set_thread_name was called: stop following the OS name
    std::vector<RawSpan> spans;
    std::uint64_t spans_dropped = 0;

    std::vector<Capture> captures;  // a stack; entries past `capture_depth` keep their buffers for reuse
    std::uint32_t capture_depth = 0;
    std::uint32_t capturing = 0;    // sessions already being captured on this thread
    std::uint32_t capture_mask = 0;  // of this epoch's sessions (current_sessions), the trace and recorder ones
    std::vector<std::pair<std::string, std::string>> annotations;
    std::uint32_t timeline_depth = 0;
    CoroutineState* coroutine = nullptr;  // the coroutine a Resumed runs here now (coroutine.hpp)
    Resumption* resumption = nullptr;  // the Resumed's own state, while it runs here
    // Where its code runs: its place, or its innermost co-scope open here. A co-scope opened anywhere
    // else (inside a plain scope: a coroutine resumed from there without a Resumed) starts no trace,
    // whose capture would stay on top of that scope's when it suspends.
    const NodeRecord* coroutine_top = nullptr;
    // The trace whose continued work this thread records now (in a tree of its own, handoffs.hpp), and
    // its root's level in the paths: here() links to it, so that each further hop is traced too.
    GatherRef* continuing = nullptr;
    std::uint32_t continuing_level = 0;
    // here() records this thread keeps for its next ones (handoffs.hpp): the first, and how many it
    // gave back to itself (at most a few dozen: a thread that only continues gives the rest to all).
    std::uint32_t spare_handoffs = 0;
    std::uint32_t spares_given = 0;
    ThreadCpu cpu;  // where its captures' off-CPU time comes from

    bool reset_pending() const noexcept { return reset_requested.load() != reset_done_.load(); }
    // The depth limit reads 0 while the slow path must see every scope; re-checked after the store so
    // that a concurrent request is never lost.
    void restore_depth_limit() noexcept {
        const auto blocked = [&] { return reset_pending() || in_overflow.load() || retired.load(); };
        if (!blocked()) arena.depth_limit.store(max_depth.load());
        if (blocked()) arena.depth_limit.store(0);
    }
    std::string thread_name() {  // any thread
        std::lock_guard<std::mutex> lock(mutex);
        return name;
    }
    void refresh_os_name() {
        char buffer[64] = {};
        if (pthread_getname_np(pthread_self(), buffer, sizeof buffer) != 0) return;
        std::lock_guard<std::mutex> lock(mutex);
        if (!named) name = buffer;
    }
    // What a delivered value (Trace, StackTrace, WatchEvent) says of the thread.
    template <class Value>
    void header(Value& value) {
        refresh_os_name();
        value.thread_name = thread_name();
        value.thread_id = id;
        value.os_thread_id = os_id;
        value.fields = annotations;
    }

    // ---- the tree being recorded into ----

    void point_at(const Tree& tree, std::uint32_t index) noexcept {
        arena.defer_site = nullptr;  // captures entered or left, or another tree: decided again (runtime.hpp)
        arena.main_tree = &tree == main.get();
        arena.chunks = tree.chunks();
        arena.slots = tree.slots();
        arena.slot_mask = tree.slot_mask();
        arena.cur = tree.at(index);
        arena.cur_index = index;
        arena.forget_last();
    }

    // The node of `info` under the current one, made current; null when not recorded.
    NodeRecord* find_or_add(const SiteInfo* info) noexcept {
        std::uint32_t index = arena.find(arena.cur_index, info);
        if (index == 0) index = current->add(arena, arena.cur_index, info);
        if (index == 0) return enter_overflow();
        arena.cur->hint = index;
        arena.cur = arena.at(index);
        arena.cur_index = index;
        ++arena.depth;
        return arena.cur;
    }

    NodeRecord* drop(std::uint64_t calls) noexcept {  // counts calls not recorded
        bump_saturating(arena.at(capture_waits() ? deferred().parent : arena.cur_index)->dropped, calls);
        bump(current->dropped_nodes, calls);
        return nullptr;
    }

    // A scope past the node limit is entered as `overflow`, a node outside the tree, so that the calls
    // inside it are dropped with it instead of being filed under its parent. The depth limit reads 0
    // meanwhile: nested scopes come here, the fast path never sees `overflow`.
    NodeRecord* enter_overflow() noexcept {
        drop(1);
        overflow.parent = arena.cur_index;  // leave() goes back to the real parent from here
        arena.cur = &overflow;
        ++arena.depth;
        in_overflow.store(true);
        arena.depth_limit.store(0);
        return &overflow;
    }

    void apply_pending_reset() noexcept {
        if (!reset_pending()) return;  // (also checked by callers on their fast path)
        const std::uint32_t request = reset_requested.load();
        main->zero();
        {
            std::lock_guard<std::mutex> lock(mutex);
            main->messages.clear();
        }
        reset_done_.store(request);
        restore_depth_limit();
    }

    // Whether the arena is where the end of a scope at `node` expects it: at that node; for a deferred
    // capture, at the guard while it waits, or at the scope's node in the capture's tree once started.
    bool at_innermost(const NodeRecord* node, bool deferred_capture) const noexcept {
        if (arena.cur == node) return true;
        if (!deferred_capture) return false;
        if (arena.cur == &deferred()) return current->at(deferred().parent) == node;
        return capture_depth != 0 && captures[capture_depth - 1].deferred_from == node && arena.cur->parent == 0 &&
               arena.cur->site == node->site;
    }

    // ---- run-time names ----

    void remember_dynamic(const SiteInfo* site) noexcept {
        // No more names than the thread has nodes: the table (at most half full, grown by doubling:
        // 256 bytes a name at most) stays within four times the tree's memory, which max_total_nodes
        // bounds; the rest are looked up each time.
        if (dynamic_count_ >= main->nodes()) return;
        const auto place = [](std::vector<DynamicEntry>& table, const DynamicEntry& entry) {
            const auto mask = static_cast<std::uint32_t>(table.size() - 1);
            const NameKey key = name_key(entry.info->name, entry.size, reinterpret_cast<std::uintptr_t>(entry.origin));
            std::uint32_t slot = static_cast<std::uint32_t>(key.hash) & mask;
            while (table[slot].info != nullptr) slot = (slot + 1) & mask;
            table[slot] = entry;
        };
        try {
            // Grown here, where a failure only loses this name.
            if (2 * (dynamic_count_ + 1) > dynamic_.size()) {
                std::vector<DynamicEntry> bigger(dynamic_.empty() ? 64 : 2 * dynamic_.size());
                for (const DynamicEntry& entry : dynamic_)
                    if (entry.info != nullptr) place(bigger, entry);
                dynamic_.swap(bigger);
            }
        } catch (...) {  // out of memory: this name is looked up each time
            return;
        }
        DynamicEntry entry;
        entry.info = site;
        entry.origin = site->origin;
        entry.size = site->name_size;
        const NameKey key = name_key(site->name, site->name_size, reinterpret_cast<std::uintptr_t>(site->origin));
        std::copy(std::begin(key.head), std::end(key.head), std::begin(entry.head));
        place(dynamic_, entry);
        ++dynamic_count_;
        arena.dynamic = dynamic_.data();
        arena.dynamic_mask = static_cast<std::uint32_t>(dynamic_.size() - 1);
    }

    // ---- sessions: captures and frames ----

    // The thread's copy of the sessions of `epoch`; false when the sessions have changed since.
    bool current_sessions(SessionRegistry& registry, std::uint32_t epoch) noexcept {
        return sessions_epoch_ == epoch || copy_sessions(registry, epoch);
    }

    // Readies the capture slot for an invocation of `root` watched by `mask`: its sessions, the cost
    // below which none of them wants it, its tree; false when it cannot (out of memory).
    TRACETREE_DETAIL_INLINE bool prepare_capture(const SiteInfo* root, std::uint32_t mask, const Clock& clock) noexcept {
        arena.defer_site = nullptr;  // the slot may change: the header's deferral was for it as it was
        try {
            if (capture_depth == captures.size()) captures.emplace_back();
            Capture& capture = captures[capture_depth];
            // The same sessions and root as this slot's last capture (a scope called in a loop): reuse
            // what it kept, without touching reference counts or allocating.
            if (capture.mask != mask || capture.sessions_epoch != sessions_epoch_) {
                capture.mask = 0;  // until the list is complete: a failure below leaves it to be made again
                capture.sessions.clear();
                capture.values = false;
                Nanos least = Nanos::max();
                for (std::uint32_t rest = mask; rest != 0; rest &= rest - 1) {
                    capture.sessions.push_back(sessions_[__builtin_ctz(rest)]);
                    capture.values = capture.values || capture.sessions.back()->with_values;
                    least = std::min(least, capture.sessions.back()->min_cost);
                }
                // In ticks, 2% short of it: the ratio of ticks to nanoseconds still sharpens at start-up.
                capture.below = static_cast<std::uint64_t>(static_cast<double>(least.count()) * 0.98 / clock.ns_per_tick());
                capture.sessions_epoch = sessions_epoch_;
                capture.mask = mask;
            }
            return prepare_tree(capture, root);
        } catch (...) {  // out of memory: record the scope without a capture
            return false;
        }
    }

    // Readies the capture slot for a resumption's part of a co-scope's trace, for the sessions it was
    // started for (whatever this thread's copy of the sessions is now).
    bool prepare_segment(const SiteInfo* root, std::uint32_t mask, const std::vector<std::shared_ptr<SessionState>>& sessions) noexcept {
        arena.defer_site = nullptr;
        try {
            if (capture_depth == captures.size()) captures.emplace_back();
            Capture& capture = captures[capture_depth];
            capture.mask = 0;
            capture.sessions = sessions;
            capture.values = false;
            capture.below = 0;
            capture.sessions_epoch = 0;  // no thread's copy: a plain capture in this slot makes its list again
            capture.mask = mask;
            return prepare_tree(capture, root);
        } catch (...) {
            return false;
        }
    }

    bool prepare_tree(Capture& capture, const SiteInfo* root) {
        if (!capture.tree || capture.root != root) {
            if (capture.tree) keep_spare(std::move(capture.tree));
            capture.tree = spare_tree(root);
            if (!capture.tree) return false;
            capture.root = root;
        }
        cpu.open();  // once per thread, before its first capture starts: the switches are recorded from now
        return true;
    }

    // Records into the prepared capture's tree from here on, from its top.
    TRACETREE_DETAIL_INLINE void enter_capture() noexcept {
        Capture& capture = captures[capture_depth];
        capture.outer = current;
        capture.outer_cur = arena.cur;
        capture.outer_cur_index = arena.cur_index;
        capture.outer_values = arena.values;
        capture.deferred_from = nullptr;
        capture.segment = nullptr;
        capture.cpu_at_start = -1;
        if (cpu.source() == CpuSource::thread_clock) {  // two system calls: only where the switches were refused
            capture.cpu_at_start = thread_cpu_ns();
            capture.monotonic_at_start = monotonic_ns();
        }
        ++capture_depth;
        capturing |= capture.mask;
        current = capture.tree.get();
        point_at(*current, 0);
        // A capture without values hides the values an outer one asked for: they would land on
        // nodes of a tree that is not that capture's.
        arena.values = static_cast<std::uint8_t>((arena.values & kValuesOfNode) | (capture.values ? kValuesOfAll : 0));
    }

    // Waits with the capture until something is recorded under the scope at the current node.
    void defer_capture(std::uint32_t mask) noexcept {
        capturing |= mask;
        deferred().parent = arena.cur_index;
        arena.cur = &deferred();
        arena.cur_index = kDeferredIndex;
    }
    bool capture_waits() const noexcept { return arena.cur == &deferred(); }

    // `site`, whose scope was just deferred in this state (begin()) for the sessions of `epoch`, may be
    // deferred by Scope itself (Arena::defer_site) until the state changes: its capture slot is the one
    // prepared here, and its scope is left without the runtime when nothing came under it, below the
    // slot's `below`.
    void defer_in_header(const SiteInfo* site, std::uint32_t epoch) noexcept {
        arena.defer_site = site;
        arena.defer_epoch = WatchWord::make(epoch, 0);
        arena.defer_below = captures[capture_depth].below;
    }

    // The first thing recorded under a scope whose capture was deferred: the capture starts as if at
    // the scope's start, and the arena moves to the scope's node in the capture's tree.
    void start_deferred_capture() noexcept {
        const std::uint32_t own = deferred().parent;
        const NodeRecord* node = current->at(own);
        point_at(*current, node->parent);
        enter_capture();
        std::uint32_t index = arena.find(0, node->site);
        if (index == 0) index = current->add(arena, 0, node->site);
        if (index == 0) {  // the capture's tree is full: the invocation is recorded without it
            leave_capture();
            point_at(*current, own);
            return;
        }
        arena.cur = arena.at(index);
        arena.cur_index = index;
        captures[capture_depth - 1].deferred_from = node;
    }

    // Back to the tree the innermost capture was started from, where it was started.
    Capture& leave_capture() noexcept {
        Capture& capture = captures[--capture_depth];
        capturing &= ~capture.mask;
        current = capture.outer;
        point_at(*capture.outer, capture.outer_cur_index);
        arena.cur = capture.outer_cur;
        arena.values = capture.outer_values;
        return capture;
    }

    // The capture's tree, folded into the tree it started from, then cleared for its next invocation.
    void fold_capture(Capture& capture) noexcept {
        Tree& tree = *capture.tree;
        tree.fold_into(arena, *capture.outer, capture.outer_cur_index, mutex);
        tree.zero();
        if (!tree.messages.empty() || !tree.values.empty()) {  // only this thread adds to them
            std::lock_guard<std::mutex> lock(mutex);
            tree.messages.clear();
            tree.values.clear();
        }
    }

    // Calls `visit(site)` for each open scope of this thread, innermost first, across the captures it
    // is inside (also while a capture waits, or inside a scope cut by the node limit).
    template <class Visit>
    void open_scopes(Visit&& visit) const {
        const Tree* tree = current;
        std::uint32_t index = capture_waits() ? deferred().parent : arena.cur_index;
        for (std::uint32_t capture = capture_depth;;) {
            for (; index != 0; index = tree->at(index)->parent) visit(tree->at(index)->site);
            if (capture == 0) return;
            const Capture& outer = captures[--capture];
            tree = outer.outer;
            index = outer.outer_cur_index;
        }
    }

    // Starts watching this invocation for stack, watch and monitor sessions; false when it cannot.
    // `boundary`: the machine frames at or below it are tracetree's own (stack.hpp).
    bool push_frame(const SiteInfo* site, const NodeRecord* node, std::uint32_t mask, std::uintptr_t boundary) noexcept {
        try {
            if (frame_depth_ == frames_.size()) frames_.emplace_back();
            Frame& frame = frames_[frame_depth_];
            fill_frame(frame, site, node, mask, boundary);
            frame.outer_values = arena.values;
            frame.outer_value_node = arena.value_node;
            if (frame.watch) {
                arena.values |= kValuesOfNode;
                arena.value_node = node;
            }
            ++frame_depth_;
            return true;
        } catch (...) {  // out of memory: not watched
            return false;
        }
    }
    // A frame's sessions (of this epoch's `mask`) and, for stack sessions, where the scope starts.
    // A co-scope's frame is kept with it, not on this stack: it may end on another thread.
    TRACETREE_DETAIL_INLINE void fill_frame(Frame& frame, const SiteInfo* site, const NodeRecord* node, std::uint32_t mask, std::uintptr_t boundary) {
        frame.site = site;
        frame.node = node;
        if (frame.mask != mask || frame.sessions_epoch != sessions_epoch_) {
            frame.sessions.clear();
            frame.watch = frame.chain_wanted = false;
            for (std::uint32_t rest = mask; rest != 0; rest &= rest - 1) {
                const std::shared_ptr<SessionState>& session = sessions_[__builtin_ctz(rest)];
                frame.sessions.push_back(session);
                frame.watch = frame.watch || session->kind == SessionKind::watch;
                frame.chain_wanted = frame.chain_wanted || session->kind == SessionKind::stack;
            }
            frame.mask = mask;
            frame.sessions_epoch = sessions_epoch_;
        }
        if (frame.chain_wanted) {
            collect_chain(frame.chain);
            unwind_stack(boundary, frame.pcs);
        }
    }
    std::uint32_t frame_depth() const noexcept { return frame_depth_; }
    // Whether a watch session is among this epoch's sessions of `mask` (current_sessions()).
    bool watches(std::uint32_t mask) const noexcept {
        for (std::uint32_t rest = mask; rest != 0; rest &= rest - 1)
            if (sessions_[__builtin_ctz(rest)]->kind == SessionKind::watch) return true;
        return false;
    }
    Frame& pop_frame() noexcept {
        Frame& frame = frames_[--frame_depth_];
        arena.values = frame.outer_values;
        arena.value_node = frame.outer_value_node;
        return frame;
    }

    // TRACETREE_WATCH: to the innermost watched scope, and to the capture that asked for values.
    void add_value(const char* value_name, std::string text) {
        if ((arena.values & kValuesOfNode) != 0 && arena.value_node == arena.cur && frame_depth_ != 0) {
            Frame& frame = frames_[frame_depth_ - 1];
            if (frame.node == arena.cur && frame.values.size() < kMaxValuesPerScope) frame.values.emplace_back(value_name, text);
        }
        if ((arena.values & kValuesOfAll) != 0 && capture_depth != 0 && current != main.get()) {
            std::lock_guard<std::mutex> lock(mutex);
            auto& values = current->values[arena.cur_index];
            if (values.size() < kMaxValuesPerScope) values.emplace_back(value_name, std::move(text));
        }
    }

    // At exit: the trees kept for captures go now (the state itself is freed later).
    void retire() noexcept {
        retired.store(true);
        restore_depth_limit();
        spare_trees_.clear();
        current = nullptr;
        cpu.close();
    }

private:
    TRACETREE_DETAIL_COLD bool copy_sessions(SessionRegistry& registry, std::uint32_t epoch) noexcept {
        arena.defer_site = nullptr;  // decided with the sessions copied before
        if (!registry.copy(epoch, sessions_, capture_mask)) return false;
        sessions_epoch_ = epoch;
        return true;
    }

    // The open scopes of this thread, innermost first, across the captures it is inside.
    void collect_chain(std::vector<const SiteInfo*>& chain) {
        chain.clear();
        open_scopes([&](const SiteInfo* site) { chain.push_back(site); });
    }

    void keep_spare(std::unique_ptr<Tree> tree) noexcept {
        try {
            if (spare_trees_.size() >= 8) spare_trees_.erase(spare_trees_.begin());  // frees its nodes
            spare_trees_.push_back(std::move(tree));
        } catch (...) {  // out of memory: the tree is freed
        }
    }

    // A capture tree for `root`: the one used for it before (its nodes are still there, zeroed), or a
    // new one. At most 8 are kept per thread besides the captures' own.
    std::unique_ptr<Tree> spare_tree(const SiteInfo* root) {
        auto same = std::find_if(spare_trees_.begin(), spare_trees_.end(), [&](const std::unique_ptr<Tree>& tree) {
            return tree->nodes() > 1 && tree->at(tree->at(0)->last_child)->site == root;
        });
        if (same == spare_trees_.end() && !spare_trees_.empty()) same = spare_trees_.begin();
        if (same != spare_trees_.end()) {
            std::unique_ptr<Tree> tree = std::move(*same);
            spare_trees_.erase(same);
            return tree;
        }
        auto tree = std::make_unique<Tree>(main->capacity, pool_);
        if (!tree->prepare()) return nullptr;
        return tree;
    }

    ChunkPool& pool_;
    std::atomic<std::uint32_t> reset_done_{0};
    std::vector<Frame> frames_;  // a stack; entries past `frame_depth_` keep their buffers for reuse
    std::uint32_t frame_depth_ = 0;
    // The sessions of one epoch, copied once per epoch: a watched scope takes no lock to find them.
    std::uint32_t sessions_epoch_ = 0;
    SessionSlots sessions_;
    std::vector<std::unique_ptr<Tree>> spare_trees_;  // capture trees, kept with their nodes for reuse
    // Run-time names seen on this thread: the table Arena::dynamic points at.
    std::vector<DynamicEntry> dynamic_;
    std::uint32_t dynamic_count_ = 0;
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_THREAD_STATE_HPP
