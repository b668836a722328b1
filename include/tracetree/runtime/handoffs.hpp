// tracetree hand-offs, the runtime's side: the path here() captures, entered by a Continue on another
// thread and left again, and a trace's capture kept until the work it handed off is done.
// SPDX-License-Identifier: MIT
//
// A path's nodes are shadows of its call sites (SiteTable::continued), so that the worker's calls
// land under them without counting calls made elsewhere; a `[queued]` node beside the worker's calls
// holds the wait. The public side is handoff.hpp; gather.hpp holds what a gathered trace keeps.
#ifndef TRACETREE_RUNTIME_HANDOFFS_HPP
#define TRACETREE_RUNTIME_HANDOFFS_HPP

#include "clock.hpp"
#include "gather.hpp"
#include "../core/handoff.hpp"
#include "sites.hpp"
#include "thread_state.hpp"
#include "tree.hpp"

#include <algorithm>  // std::copy, std::min
#include <atomic>
#include <chrono>  // PlaceLock's back-off
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>  // std::nothrow
#include <thread>  // std::this_thread::yield: fork() waits for the threads inside its gate
#include <utility>  // std::exchange
#include <vector>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// fork(): a Gather's lock is in no list a fork handler could walk, so no thread holds one across
// fork(): each is taken inside the gate, which waits while a fork is being prepared, and the prepare
// handler waits for the threads inside to leave. Nothing inside takes another lock or runs the
// program's code.
class ForkGate {
public:
    class Locked {  // a Gather's mutex, taken inside the gate
    public:
        Locked(ForkGate& gate, std::mutex& mutex, std::uint32_t thread) noexcept
            : mutex_(mutex), inside_(gate.inside_[thread % kStripes].count) {
            for (;;) {
                inside_.fetch_add(1, std::memory_order_seq_cst);
                if (!gate.forking_.load(std::memory_order_seq_cst)) break;
                inside_.fetch_sub(1, std::memory_order_release);
                std::lock_guard<std::mutex> wait(gate.closed_);  // held until fork() returns
            }
            mutex_.lock();
        }
        ~Locked() {
            mutex_.unlock();
            inside_.fetch_sub(1, std::memory_order_release);
        }
        Locked(const Locked&) = delete;
        Locked& operator=(const Locked&) = delete;

    private:
        std::mutex& mutex_;
        std::atomic<std::uint32_t>& inside_;
    };

    void close() noexcept {  // before fork(): taken first, before any other lock of the recorder
        closed_.lock();
        forking_.store(true, std::memory_order_seq_cst);
        for (Stripe& stripe : inside_)
            while (stripe.count.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    }
    void open(bool child) noexcept {
        if (child)  // a thread that came in and backed off as fork() copied the process is not here
            for (Stripe& stripe : inside_) stripe.count.store(0, std::memory_order_relaxed);
        forking_.store(false, std::memory_order_seq_cst);
        closed_.unlock();
    }

private:
    static constexpr std::uint32_t kStripes = 16;  // threads counted apart, so that hand-offs share no line
    struct alignas(64) Stripe {
        std::atomic<std::uint32_t> count{0};
    };
    Stripe inside_[kStripes];
    std::atomic<bool> forking_{false};
    std::mutex closed_;
};

// A coroutine place's lock: one atomic read-modify-write per use, where a mutex inside the fork gate
// took four, most of what a resumption and a co-scope cost (each takes it twice). Its word holds the
// process's fork generation, twice, plus one while held. A fork() while another thread held it
// leaves it held in the child, where the generation, one more than the parent's, says it is free:
// what that thread was changing may be half done there, its coroutine's open co-scopes and counts
// (bounded, and a site not yet stored is skipped: a wrong node at worst) or a trace reference taken
// and not yet stored (that trace is then not delivered in the child). Held for a few stores, and for
// a test clock's function (set_clock), which is the only program code that runs under it.
class PlaceLock {
public:
    // Inline (g++ otherwise calls both): a resumption takes it twice, a co-scope twice.
    TRACETREE_DETAIL_INLINE PlaceLock(std::atomic<std::uint32_t>& word, const std::atomic<std::uint32_t>& generation) noexcept
        : word_(word), generation_(generation) {
        std::uint32_t seen = word_.load(std::memory_order_relaxed);
        for (std::uint32_t tries = 1;; ++tries) {
            // Read at each try: a fork() from a signal handler while this thread waited leaves it
            // waiting in the child, where the holder is gone.
            free_ = generation_.load(std::memory_order_relaxed) * 2;
            if (seen != free_ + 1) {
                if (word_.compare_exchange_weak(seen, free_ + 1, std::memory_order_acquire, std::memory_order_relaxed)) return;
                continue;
            }
            back_off(tries);
            seen = word_.load(std::memory_order_relaxed);
        }
    }
    TRACETREE_DETAIL_INLINE ~PlaceLock() {
        const std::uint32_t now = generation_.load(std::memory_order_relaxed) * 2;
        if (now == free_) {
            word_.store(free_, std::memory_order_release);
        } else {  // forked while this thread held it (a signal handler's fork(), or the test clock's):
                  // in the child, another thread may hold it now
            std::uint32_t held = free_ + 1;
            word_.compare_exchange_strong(held, now, std::memory_order_release, std::memory_order_relaxed);
        }
    }
    PlaceLock(const PlaceLock&) = delete;
    PlaceLock& operator=(const PlaceLock&) = delete;

private:
    TRACETREE_DETAIL_COLD static void back_off(std::uint32_t tries) noexcept {
        if (tries < 64) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else if (tries < 128) {
            std::this_thread::yield();  // its holder may have lost its core
        } else {
            // A real-time thread waiting for a holder of lower priority on its core: yield() would
            // never let that holder run.
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
    std::atomic<std::uint32_t>& word_;
    const std::atomic<std::uint32_t>& generation_;
    std::uint32_t free_ = 0;
};

// here()'s records, never freed (a Here may outlive anything): chunks made as needed. Each thread keeps
// a list of its own, taken from and given back to without atomics; a record let go on a thread whose
// list is long enough goes to the shared list instead, which a thread whose own list is empty takes
// whole. With no pop of one record from a shared list, a record taken and given back meanwhile cannot
// corrupt it (ABA).
class HandoffRecords {
public:
    HandoffRecord* take(ThreadState& state) noexcept {
        std::uint32_t& spare = state.spare_handoffs;
        if (spare == 0) spare = free_.exchange(0, std::memory_order_acquire);
        if (spare == 0) return grow(spare);
        HandoffRecord& record = at(spare);
        spare = record.next.load(std::memory_order_relaxed);
        if (state.spares_given != 0) --state.spares_given;
        record.refs.store(1, std::memory_order_relaxed);
        return &record;
    }
    // Let go on the thread of `state` (null: one that does not record, or an exiting one).
    void give_back(ThreadState* state, HandoffRecord& record) noexcept {
        if (state != nullptr && !state->retired.load(std::memory_order_relaxed) && state->spares_given < kKept) {
            ++state->spares_given;
            record.next.store(state->spare_handoffs, std::memory_order_relaxed);
            state->spare_handoffs = record.index;
            return;
        }
        std::uint32_t head = free_.load(std::memory_order_relaxed);
        do record.next.store(head, std::memory_order_relaxed);
        while (!free_.compare_exchange_weak(head, record.index, std::memory_order_release, std::memory_order_relaxed));
    }
    void exiting(ThreadState& state) noexcept {  // the thread's list to the shared one
        while (state.spare_handoffs != 0) {
            HandoffRecord& record = at(state.spare_handoffs);
            state.spare_handoffs = record.next.load(std::memory_order_relaxed);
            give_back(nullptr, record);
        }
        state.spares_given = 0;
    }

private:
    static constexpr std::uint32_t kChunk = 256;       // records made at a time
    static constexpr std::uint32_t kMaxChunks = 4096;  // a million Heres alive at once; past that, empty ones
    static constexpr std::uint32_t kKept = 64;         // records a thread gives back to itself, above those it took
    HandoffRecord& at(std::uint32_t index) noexcept {
        return chunks_[(index - 1) / kChunk].load(std::memory_order_acquire)[(index - 1) % kChunk];
    }
    // A chunk: its first record taken, the others the thread's list.
    HandoffRecord* grow(std::uint32_t& spare) noexcept {
        if (made_.load(std::memory_order_relaxed) >= kMaxChunks) return nullptr;
        const std::uint32_t number = made_.fetch_add(1, std::memory_order_relaxed);
        if (number >= kMaxChunks) return nullptr;
        auto* chunk = new (std::nothrow) HandoffRecord[kChunk];
        if (chunk == nullptr) return nullptr;  // out of memory: this chunk's number stays unused
        for (std::uint32_t i = 0; i < kChunk; ++i) {
            chunk[i].index = number * kChunk + i + 1;
            chunk[i].next.store(i + 1 < kChunk ? chunk[i].index + 1 : 0, std::memory_order_relaxed);
        }
        chunks_[number].store(chunk, std::memory_order_release);
        spare = chunk[1].index;
        return chunk;
    }
    std::atomic<std::uint32_t> free_{0};  // the shared list's first index (0: empty)
    std::atomic<std::uint32_t> made_{0};
    std::atomic<HandoffRecord*> chunks_[kMaxChunks] = {};
};

class Handoffs {
public:
    Handoffs(const Clock& clock, SiteTable& sites, ChunkPool& chunks) : clock_(clock), sites_(sites), chunks_(chunks) {}

    // here(): the thread's open scopes (the outermost kMaxDepth of them) and the time, in a record.
    HandoffRecord* capture(ThreadState& state) noexcept {
        if (state.retired.load()) return nullptr;
        HandoffRecord* record = records_.take(state);
        if (record == nullptr) {  // out of memory: a hand-off not recorded
            state.drop(1);
            return nullptr;
        }
        HandoffPath& path = record->path;
        // The outermost levels are kept: in one walk from the innermost, the last kMaxDepth seen.
        constexpr std::uint32_t kept = HandoffPath::kMaxDepth;
        const SiteInfo* last[kept];
        std::uint32_t open = 0;
        state.open_scopes([&](const SiteInfo* site) { last[open++ % kept] = site; });
        path.cut = open > kept;
        path.depth = path.cut ? kept : open;
        for (std::uint32_t level = 0; level < path.depth; ++level) {
            const InternedSite& known = interned(last[(open - 1 - level) % kept]);  // a path continued here is the original's
            path.sites[level] = known.continues != nullptr ? known.continues : &known;
        }
        if (state.capture_depth != 0 || state.capture_waits()) {
            if (!path.cut) gather_into(state, path);
        } else if (state.continuing != nullptr && state.continuing_level < path.depth) {
            // In a trace's continued work, entered from the same path's shadows: the trace's root is
            // at the same level, and the next hop's work is grafted under it as this one's is.
            link(path, state.continuing, state.continuing_level);
        }
        path.thread_id = state.id;
        path.fake_clock = clock_.is_test(std::memory_order_relaxed);
        path.tick = clock_.now(path.fake_clock);
        path.valid = true;
        return record;
    }
    // The last Here of a record is gone: the trace it was taken in no longer waits for it. (capture()
    // sets every other field that a Continue reads.)
    void recycle(ThreadState* state, HandoffRecord& record) noexcept {
        release(std::exchange(record.path.hold, nullptr));
        records_.give_back(state, record);
    }
    void exiting(ThreadState& state) noexcept { records_.exiting(state); }

    // Continue: the path entered in this thread's tree, the queue wait counted; false: nothing entered.
    bool enter(ThreadState& state, const HandoffPath& path, Continuation& saved) noexcept {
        if (!enter_path(state, path, saved)) return false;
        saved.spends = saved.hold != nullptr && !saved.hold->many;
        count_wait(state, queued_, "[queued]", path.tick, path.fake_clock);
        return true;
    }

    // A coroutine resumes: at its origin's path as a Continue would be (or where it runs, inside a
    // capture or another trace's continued work), then at its co-scopes still open, as real nodes:
    // their ends count the calls here. The wait beside them: `[suspended]`, or `[queued]` before its
    // first run. Not recording, nothing is entered, but its co-scopes are still followed (and those
    // opened when recording starts meanwhile are left at its end). False: nothing to do (this thread
    // runs it already, or has exited).
    bool resume(ThreadState& state, const HandoffPath& origin, CoroutineState& coroutine, Resumption& saved) noexcept {
        Arena& arena = state.arena;
        if (state.retired.load() || state.coroutine == &coroutine) return false;
        saved.outer_resumption = std::exchange(state.resumption, &saved);
        const bool recording = (arena.flags.load(std::memory_order_relaxed) & kRecording) != 0 && arena.cur != &state.overflow;
        if (recording && state.capture_waits()) state.start_deferred_capture();  // as for anything recorded under it
        if (!recording || !enter_path(state, origin, saved)) {
            static_cast<Continuation&>(saved) = Continuation{&arena, arena.cur, arena.cur_index, arena.depth};
            saved.in_place = true;
            if (recording) enter_in_capture(state, origin);
        }
        saved.coroutine = &coroutine;
        saved.outer = std::exchange(state.coroutine, &coroutine);
        saved.outer_top = std::exchange(state.coroutine_top, arena.cur);
        saved.captures = state.capture_depth;
        saved.recording_into = state.current;
        const SiteInfo* sites[HandoffPath::kMaxDepth];
        std::uint32_t open = 0;
        std::uint64_t since = 0;
        bool fake_clock = false;
        Gather* traced = nullptr;  // a reference of this call's while it is used
        std::uint32_t traced_level = 0;
        void* watched = nullptr;
        std::uint32_t watched_level = 0, watched_serial = 0;
        {
            PlaceLock lock = locked(coroutine);
            saved.number = ++coroutine.resumptions;
            if (!recording) return true;
            if (saved.number > 1) {
                open = std::min(coroutine.open, HandoffPath::kMaxDepth);
                std::copy(coroutine.open_sites, coroutine.open_sites + open, sites);
                // The resumption before may not have ended yet (it handed the coroutine on as it
                // suspended): then its wait is too short to tell.
                const bool ended = coroutine.suspended_after == saved.number - 1;
                since = ended ? coroutine.suspended_at : clock_.now(coroutine.fake_clock);
                fake_clock = coroutine.fake_clock;
                traced = static_cast<Gather*>(coroutine.traced);
                traced_level = coroutine.traced_level;
                retain(traced);
                watched = coroutine.watched;
                watched_level = coroutine.watched_level;
                watched_serial = coroutine.watched_serial;
            }
        }
        if (saved.number == 1) {
            if (origin.valid) count_wait(state, queued_, "[queued]", origin.tick, origin.fake_clock);
            return true;
        }
        const std::uint32_t max_depth = state.max_depth.load(std::memory_order_relaxed);
        // A site not yet stored: a fork() cut another thread's co-scope short (PlaceLock).
        for (std::uint32_t level = 0; level < open && arena.depth + 1 < max_depth && sites[level] != nullptr; ++level) {
            // The traced co-scope and what is below it go to its trace, in a capture of this resumption.
            if (traced != nullptr && level == traced_level) start_segment(state, *traced, sites[level], coroutine);
            if (!enter_node(state, sites[level])) break;
            if (watched != nullptr && level == watched_level) route_values(state, saved, watched, watched_serial);
        }
        state.coroutine_top = arena.cur;
        count_wait(state, suspended_, "[suspended]", since, fake_clock);
        release(traced);  // last: if the co-scope ended meanwhile, it delivers the trace, whose callbacks may record here
        return true;
    }

    // A coroutine suspends (or ends): the arena put back, unless a plain scope is still open across
    // the suspension (in a capture's tree maybe: the arena stays rather than free a tree that scope
    // will end in).
    void suspend(Resumption& saved) noexcept {
        ThreadState& state = ThreadState::of(*saved.arena);
        Arena& arena = state.arena;
        Ended ended;
        if (state.capture_depth > saved.captures) end_segments(state, saved.coroutine, ended);
        state.coroutine = saved.outer;
        state.coroutine_top = static_cast<const NodeRecord*>(saved.outer_top);
        {
            PlaceLock lock = locked(*saved.coroutine);
            if (saved.coroutine->resumptions == saved.number) {  // not resumed again meanwhile
                saved.coroutine->fake_clock = clock_.is_test(std::memory_order_relaxed);
                saved.coroutine->suspended_at = clock_.now(saved.coroutine->fake_clock);
                saved.coroutine->suspended_after = saved.number;
            }
        }
        if (saved.route.frame != nullptr) unroute_values(state, saved);
        state.resumption = saved.outer_resumption;
        const bool as_resumed = state.capture_depth == saved.captures && state.current == saved.recording_into &&
                                !state.capture_waits() && arena.cur != &state.overflow;
        if (saved.in_place) {
            if (as_resumed) arena.cur = saved.cur, arena.cur_index = saved.cur_index, arena.depth = saved.depth;
        } else if (as_resumed || state.retired.load()) {
            leave(saved);
        }
        // Last, with the thread put back: a trace whose co-scope ended in a resumption that started
        // meanwhile is delivered here, and its callbacks may record.
        for (std::uint32_t i = 0; i < ended.count; ++i) release(ended.traces[i]);
    }

    // TRACETREE_CO_SCOPE, in two steps around the runtime's look at its sessions: the site it records
    // (null: not recorded), then its node entered as a scope's is and kept among its coroutine's open
    // scopes; outside a Resumed (nothing would leave it) a dropped call.
    const SiteInfo* suspendable_site(ThreadState& state, Site* site) noexcept {
        Arena& arena = state.arena;
        if (state.retired.load() || arena.cur == &state.overflow) return nullptr;
        if (state.coroutine == nullptr) return state.drop(1), nullptr;
        if (state.capture_waits()) state.start_deferred_capture();
        state.apply_pending_reset();
        const SiteInfo* info = site->info.load(std::memory_order_acquire);
        if (!info->interned && state.current->full()) return state.drop(1), nullptr;
        if ((info = sites_.registered(site, info)) == nullptr) return nullptr;
        if (arena.depth >= state.max_depth.load(std::memory_order_relaxed)) {  // as a scope past the depth limit
            bump(state.current->dropped_depth);
            bump_saturating(arena.cur->dropped);
            return nullptr;
        }
        return info;
    }
    // A trace session wants this co-scope (the runtime prepared the capture slot for it): its trace is
    // made, and the capture entered, as each resumption will while the co-scope is open.
    bool trace_suspendable(ThreadState& state, SuspendableScope& scope) noexcept {
        const Capture& prepared = state.captures[state.capture_depth];
        auto* gather = new (std::nothrow) Gather();
        if (gather == nullptr) return false;
        try {
            gather->sessions = prepared.sessions;
            state.header(gather->trace);
        } catch (...) {
            delete gather;
            return false;
        }
        gather->co_scope = true;
        gather->mask = prepared.mask;
        state.open_scopes([&](const SiteInfo*) { ++gather->level; });  // here() below it: the paths' level
        scope.trace = gather;
        enter_segment(state, *gather, *state.coroutine);
        return true;
    }
    // Inline (g++ otherwise calls it): each co-scope's entry and end are one call out of its frame.
    TRACETREE_DETAIL_INLINE bool enter_suspendable(ThreadState& state, const SiteInfo* info, SuspendableScope& scope) noexcept {
        Arena& arena = state.arena;
        const bool top = scope.trace != nullptr || arena.cur == state.coroutine_top;  // a trace starts only there
        if (!enter_node(state, info)) return not_entered(state, scope);
        if (top) state.coroutine_top = arena.cur;
        {
            CoroutineState& coroutine = *state.coroutine;
            PlaceLock lock = locked(coroutine);
            if (scope.trace != nullptr && coroutine.traced == nullptr) {  // one traced co-scope at a time
                retain(scope.trace);
                coroutine.traced = scope.trace;
                coroutine.traced_level = coroutine.open;
            }
            // A frame set before entering wants values (runtime.hpp, enter_watched): one at a time.
            if (scope.frame != nullptr && coroutine.watched == nullptr) {
                static_cast<CoScopeFrame*>(scope.frame)->refs.fetch_add(1, std::memory_order_relaxed);
                coroutine.watched = scope.frame;
                coroutine.watched_level = coroutine.open;
                if (++coroutine.watched_serial == 0) ++coroutine.watched_serial;
                scope.watched = coroutine.watched_serial;
            }
            if (coroutine.open < HandoffPath::kMaxDepth) coroutine.open_sites[coroutine.open] = info;
            ++coroutine.open;
            scope.coroutine = &coroutine;
        }
        scope.entered = info;
        scope.uncaught = *arena.uncaught;
        scope.fake_clock = clock_.is_test(std::memory_order_relaxed);
        scope.start = clock_.now(scope.fake_clock);
        return true;
    }
    // Its end, on whichever thread the coroutine runs now: counted if the arena is at its node; `elapsed`
    // receives its wall time then. Its coroutine is touched only while running here (a frame destroyed
    // later may outlive its place). Its trace, if it started one, is let go: delivered when the last
    // resumption's part of it and the work handed off from it are done (the caller gives back the
    // co-scope's reference to it, after this).
    TRACETREE_DETAIL_INLINE bool leave_suspendable(ThreadState& state, const SuspendableScope& scope, std::uint64_t& elapsed) noexcept {
        Arena& arena = state.arena;
        if (state.retired.load()) return false;
        if (scope.coroutine != state.coroutine) return state.drop(1), false;  // a frame destroyed elsewhere
        {
            // Its own entry, the innermost one of its site: chains that share a place (Asio's awaitable
            // operators spawn on the parent's executor) close theirs in any order.
            CoroutineState& coroutine = *scope.coroutine;
            PlaceLock lock = locked(coroutine);
            const std::uint32_t innermost = coroutine.open - 1;
            if (coroutine.open > HandoffPath::kMaxDepth) {
                --coroutine.open;
            } else if (coroutine.open != 0 && coroutine.open_sites[innermost] == scope.entered && coroutine.traced == nullptr &&
                       coroutine.watched == nullptr) {
                coroutine.open = innermost;  // the usual order, nothing traced or watched: no search, nothing moves
            } else {
                std::uint32_t at = coroutine.open;
                // Not the traced or watched one's entry unless it is this: their levels must stay theirs.
                const auto others = [&](std::uint32_t level) {
                    return (coroutine.traced != nullptr && level == coroutine.traced_level && coroutine.traced != scope.trace) ||
                           (coroutine.watched != nullptr && level == coroutine.watched_level && coroutine.watched_serial != scope.watched);
                };
                while (at != 0 && (coroutine.open_sites[at - 1] != scope.entered || others(at - 1))) --at;
                if (at != 0) {
                    std::copy(coroutine.open_sites + at, coroutine.open_sites + coroutine.open, coroutine.open_sites + at - 1);
                    --coroutine.open;
                    // The traced one, above it, moved down with the others: resumptions find it there.
                    if (coroutine.traced != nullptr && at - 1 < coroutine.traced_level) --coroutine.traced_level;
                    if (coroutine.watched != nullptr && at - 1 < coroutine.watched_level) --coroutine.watched_level;
                }
            }
        }
        if (state.capture_waits() || arena.cur == &state.overflow || arena.cur->site != scope.entered)
            return state.drop(1), false;
        const bool top = arena.cur == state.coroutine_top;
        const std::uint64_t now = clock_.now(scope.fake_clock);
        elapsed = now > scope.start ? now - scope.start : 0;
        arena.leave(arena.cur, elapsed, scope.uncaught);
        if (scope.trace != nullptr) end_trace(state, *scope.trace, elapsed);
        if (top) state.coroutine_top = arena.cur;
        return true;
    }

    // Continue's end: the arena put back; a gathered trace's part handed to it and folded here.
    void leave(Continuation& saved) noexcept {
        Arena& arena = *saved.arena;
        ThreadState& state = ThreadState::of(arena);
        std::unique_ptr<Tree> own(static_cast<Tree*>(saved.tree));
        if (state.retired.load()) return let_go(saved);
        if (own) {  // the trace's copy, then into the thread's tree as if recorded there
            auto& gather = static_cast<Gather&>(*saved.hold->gather);
            try {
                std::vector<Node> roots = to_values(*own, clock_.ns_per_tick(), &own->messages, nullptr, state.thread_name());
                for (Node& root : roots) mark_parallel(root);
                ForkGate::Locked lock(gate, gather.mutex, state.id);
                merge_all(gather.parts, roots);  // a coroutine's many resumptions: one part
            } catch (...) {  // out of memory: the trace goes without this part
            }
            own->fold_into(arena, *state.main, 0, state.mutex);
            state.current = state.main.get();
            state.point_at(*state.main, saved.cur_index);
            state.continuing = nullptr;
        }
        arena.cur = saved.cur;
        arena.cur_index = saved.cur_index;
        arena.depth = saved.depth;
        let_go(saved);  // last: it may deliver the trace, whose callbacks may record here
    }

    // Before a traced co-scope's end: its coroutine's later resumptions no longer record for its trace.
    TRACETREE_DETAIL_COLD void untrace(ThreadState& state, const SuspendableScope& scope) noexcept {
        if (state.retired.load() || scope.coroutine != state.coroutine) return;  // not its coroutine's to touch
        GatherRef* traced = nullptr;
        {
            PlaceLock lock = locked(*scope.coroutine);
            if (scope.coroutine->traced == scope.trace) traced = std::exchange(scope.coroutine->traced, nullptr);
        }
        release(traced);
    }

    // TRACETREE_WATCH values said directly in a co-scope that a watch session wants them of go to its
    // frame, on whichever thread its coroutine runs: routed where it opens (once enter_suspendable()
    // made it its place's watched one) and in each resumption that enters it, given back when it ends
    // or the resumption suspends. One such co-scope per place.
    TRACETREE_DETAIL_COLD void route_opened(ThreadState& state, const SuspendableScope& scope) noexcept {
        if (scope.watched != 0 && state.resumption != nullptr)
            route_values(state, *state.resumption, scope.frame, scope.watched);
    }
    // Its end, before it is left (its frame is delivered after): its place lets its frame go and no
    // resumption sends values to it now. Not when it ended outside its coroutine, whose place is not
    // to be touched: the place then keeps its reference until it goes.
    TRACETREE_DETAIL_COLD void unwatch_values(ThreadState& state, const SuspendableScope& scope) noexcept {
        if (scope.coroutine != state.coroutine) return;
        bool held = false;
        {
            PlaceLock lock = locked(*scope.coroutine);
            if (scope.coroutine->watched == scope.frame && scope.coroutine->watched_serial == scope.watched) {
                scope.coroutine->watched = nullptr;
                held = true;
            }
        }
        if (held) release_frame(static_cast<CoScopeFrame*>(scope.frame));  // the co-scope's own reference is left
        if (state.resumption != nullptr && state.resumption->route.frame == scope.frame) unroute_values(state, *state.resumption);
    }
    // A value said here while a watched co-scope's node is the innermost one: to its frame, while its
    // place holds it (not if it ended meanwhile on another thread, in a resumption that started there
    // before this one was over). Built outside the lock; the frame's room is reserved (no allocation
    // under a lock that fork() does not take).
    TRACETREE_DETAIL_COLD void co_value(ThreadState& state, const char* name, const std::string& text) {
        if (state.resumption == nullptr) return;
        const ValueRoute& route = state.resumption->route;
        const Arena& arena = state.arena;
        if (route.frame == nullptr || state.frame_depth() != route.frames_below || (arena.values & kValuesOfNode) == 0 ||
            arena.value_node != arena.cur)
            return;
        std::pair<std::string, std::string> value(name, text);
        CoroutineState& place = *state.resumption->coroutine;
        PlaceLock lock = locked(place);
        auto* co = place.watched == route.frame && place.watched_serial == route.serial
                       ? static_cast<CoScopeFrame*>(route.frame)
                       : nullptr;
        if (co != nullptr && co->frame.values.size() < kMaxValuesPerScope) co->frame.values.push_back(std::move(value));
    }

    // The last reference to a gathered capture is gone: its trace with the continued work grafted
    // under it; false when no session wanted the capture.
    static bool finish(Gather& gather) {
        if (!gather.wanted) return false;
        if (gather.co_scope) {  // its root: the co-scope as its resumptions recorded it
            if (gather.own.empty()) return false;
            gather.trace.root = std::move(gather.own.front());
        }
        for (const Node& part : gather.parts) graft(gather.trace, part, gather.level);
        wall_totals(gather.trace.root);
        return true;
    }

private:
    // At the co-scope's node (arena.cur): values said there in this resumption go to `frame`.
    TRACETREE_DETAIL_COLD static void route_values(ThreadState& state, Resumption& resumption, void* frame, std::uint32_t serial) noexcept {
        if (resumption.route.frame != nullptr) unroute_values(state, resumption);  // one that ended elsewhere
        Arena& arena = state.arena;
        resumption.route = ValueRoute{frame, serial, state.frame_depth(), static_cast<std::uint8_t>(arena.values & kValuesOfNode),
                                      arena.value_node};
        arena.values |= kValuesOfNode;
        arena.value_node = arena.cur;
    }
    TRACETREE_DETAIL_COLD static void unroute_values(ThreadState& state, Resumption& resumption) noexcept {
        Arena& arena = state.arena;
        arena.values = static_cast<std::uint8_t>((arena.values & ~kValuesOfNode) | resumption.route.node_values);
        arena.value_node = resumption.route.value_node;
        resumption.route.frame = nullptr;
    }
    TRACETREE_DETAIL_COLD static void start_segment(ThreadState& state, Gather& gather, const SiteInfo* site,
                                                    const CoroutineState& coroutine) noexcept {
        // Not the sessions a capture open here takes already: its end, not this segment's, lets them go.
        const std::uint32_t mask = gather.mask & ~state.capturing;
        if (!state.capture_waits() && state.prepare_segment(site, mask, gather.sessions)) enter_segment(state, gather, coroutine);
    }
    // The traces whose parts a suspension ended, each with a reference it gives back once the thread is put back.
    struct Ended {
        GatherRef* traces[kMaxSessions];  // a segment per session at most: a capture's own sessions are not captured again
        std::uint32_t count = 0;
    };
    // The coroutine suspends: the parts of its trace this resumption recorded end.
    TRACETREE_DETAIL_COLD void end_segments(ThreadState& state, const CoroutineState* coroutine, Ended& ended) noexcept {
        while (state.capture_depth != 0 && state.captures[state.capture_depth - 1].segment == coroutine) {
            GatherRef* trace = state.captures[state.capture_depth - 1].gather;
            if (ended.count < kMaxSessions) retain(ended.traces[ended.count++] = trace);
            end_segment(state);
        }
    }
    // A resumption's part of a co-scope's trace: its capture (prepared) entered, holding the trace.
    static void enter_segment(ThreadState& state, Gather& gather, const CoroutineState& coroutine) noexcept {
        state.enter_capture();
        Capture& capture = state.captures[state.capture_depth - 1];
        retain(&gather);
        capture.gather = &gather;
        capture.segment = &coroutine;
    }
    // A co-scope whose trace it started could not be entered: that trace is let go at once.
    TRACETREE_DETAIL_COLD bool not_entered(ThreadState& state, SuspendableScope& scope) noexcept {
        state.drop(1);
        if (scope.trace != nullptr) end_segment(state);
        release(std::exchange(scope.trace, nullptr));
        return false;
    }
    // A traced co-scope has ended, at the top of its trace's capture in this resumption: the trace is
    // wanted if a session wants its wall time, and this resumption's part ends.
    TRACETREE_DETAIL_COLD void end_trace(ThreadState& state, GatherRef& trace, std::uint64_t elapsed) noexcept {
        if (state.arena.cur_index != 0 || state.capture_depth == 0 || state.captures[state.capture_depth - 1].gather != &trace)
            return;  // ended where its trace was not recorded: not delivered
        auto& gather = static_cast<Gather&>(trace);
        const Nanos cost = to_nanos(elapsed, clock_.ns_per_tick());
        const bool wanted = std::any_of(gather.sessions.begin(), gather.sessions.end(), [&](const auto& session) {
            return cost >= session->min_cost && session->reserved.load(std::memory_order_relaxed) < session->limit;
        });
        if (wanted) {
            ForkGate::Locked lock(gate, gather.mutex, state.id);
            gather.wanted = true;
            gather.trace.start = started_at(cost);
        }
        end_segment(state);
    }
    // Its end (the coroutine suspends, or the traced co-scope ends): what it recorded joins the trace,
    // and its tree is folded into the one it started from, as a capture's is.
    void end_segment(ThreadState& state) noexcept {
        Capture& capture = state.leave_capture();
        auto* gather = static_cast<Gather*>(std::exchange(capture.gather, nullptr));
        capture.segment = nullptr;
        try {
            std::vector<Node> roots;
            {
                std::lock_guard<std::mutex> lock(state.mutex);
                roots = to_values(*capture.tree, clock_.ns_per_tick(), &capture.tree->messages);
            }
            ForkGate::Locked lock(gate, gather->mutex, state.id);
            merge_all(gather->own, roots);
        } catch (...) {  // out of memory: the trace goes without this part
        }
        state.fold_capture(capture);
        release(gather);
    }

    // A resumption inside a captured invocation records in the capture's tree, at the coroutine's
    // place when its path passes through the captured scope (a coroutine spawned inside it, resumed
    // by an io_context run inside it): where it runs may be elsewhere, and a co-scope opened at its
    // place and ended there would be counted apart from its node.
    void enter_in_capture(ThreadState& state, const HandoffPath& path) noexcept {
        if (state.capture_depth == 0 || state.capture_waits() || state.arena.cur == &state.overflow) return;
        const Capture& capture = state.captures[state.capture_depth - 1];
        if (state.current != capture.tree.get()) return;
        // Levels open outside the capture's tree: its root is the path's level `outside`.
        std::uint32_t outside = 0, inside = 0;
        state.open_scopes([&](const SiteInfo*) { ++outside; });
        for (std::uint32_t index = state.arena.cur_index; index != 0; index = state.current->at(index)->parent) ++inside;
        outside -= inside;
        if (inside == 0 || outside >= path.depth || path.sites[outside] != original(capture.root)) return;
        Arena& arena = state.arena;
        const std::uint32_t root = arena.find(0, capture.root);  // the captured scope's node
        if (root == 0) return;
        arena.cur = state.current->at(root);
        arena.cur_index = root;
        arena.depth = outside + 1;
        const std::uint32_t max_depth = state.max_depth.load(std::memory_order_relaxed);
        // The path's own sites, not their shadows: this thread made those calls, in this very invocation.
        for (std::uint32_t level = outside + 1; level < path.depth && arena.depth + 1 < max_depth; ++level)
            if (!enter_node(state, path.sites[level])) break;
    }
    static const SiteInfo* original(const SiteInfo* site) noexcept {
        const InternedSite& known = interned(site);
        return known.continues != nullptr ? known.continues : &known;
    }

    // The path entered as shadows of its sites, from the root of this thread's tree (or of a tree of its
    // own for a trace the path was taken in); false: nothing entered.
    bool enter_path(ThreadState& state, const HandoffPath& path, Continuation& saved) noexcept {
        Arena& arena = state.arena;
        if (state.retired.load()) return false;
        // Inside a captured invocation, a scope cut by the node limit, or another trace's continued work
        // (its own tree, which a second one would split the arena from), the work stays where it runs.
        if (state.capture_depth != 0 || state.capture_waits() || arena.cur == &state.overflow ||
            state.current != state.main.get())
            return false;
        state.apply_pending_reset();
        saved.arena = &arena;
        saved.cur = arena.cur;
        saved.cur_index = arena.cur_index;
        saved.depth = arena.depth;
        // For the trace it came from, unless that Here is spent (the trace may be gone).
        HereHold* hold = path.hold != nullptr && take_keep(*path.hold) ? path.hold : nullptr;
        Tree* own = hold != nullptr ? gather_tree(state) : nullptr;
        if (own != nullptr) {
            retain(hold);
            saved.hold = hold;
            saved.tree = own;
            state.current = own;
            state.continuing = hold->gather;
            state.continuing_level = path.gather_level;
        } else if (hold != nullptr) {
            drop_keep(*hold);
        }
        state.point_at(*state.current, 0);
        arena.depth = 0;
        const std::uint32_t max_depth = state.max_depth.load(std::memory_order_relaxed);
        // Levels that do not fit (the depth or node limit) are left off: the work lands higher up.
        for (std::uint32_t level = 0; level < path.depth && arena.depth + 1 < max_depth; ++level) {
            const InternedSite* shadow = sites_.continued(path.sites[level]);
            if (shadow == nullptr || !enter_node(state, shadow)) break;
        }
        return true;
    }
    // A wait (`[queued]`, `[suspended]`) from `since`'s tick to now, under the current node.
    void count_wait(ThreadState& state, std::atomic<const InternedSite*>& known, const char* name, std::uint64_t since,
                    bool fake_clock) noexcept {
        Arena& arena = state.arena;
        const InternedSite* site = wait_site(known, name);
        std::uint32_t index = site != nullptr ? child(arena, site) : 0;
        if (site != nullptr && index == 0) index = add_node(state, site);
        if (index == 0) return (void)state.drop(1);
        const std::uint64_t now = clock_.now(fake_clock);
        const std::uint64_t waited = now > since ? now - since : 0;  // another core's counter may lag
        NodeRecord& node = *arena.at(index);
        bump(node.count);
        bump(node.total, waited);
        if (waited < node.min.load(std::memory_order_relaxed)) node.min.store(waited, std::memory_order_relaxed);
        if (waited > node.max.load(std::memory_order_relaxed)) node.max.store(waited, std::memory_order_relaxed);
    }
    // The current node's child for `site`, 0: none yet. First the node made right after it, as
    // Arena::enter tries it: a path's levels and its wait are made one after the other when it is
    // first entered, and so are a coroutine's co-scopes.
    static std::uint32_t child(const Arena& arena, const SiteInfo* site) noexcept {
        const std::uint32_t next = arena.cur_index + 1;
        const NodeRecord* node = arena.cur + 1;
        if ((next & kChunkMask) != 0 && node->site == site && node->parent == arena.cur_index) return next;
        return arena.find(arena.cur_index, site);
    }
    // The child of the current node for `site`, made current; false when the tree is full.
    // Inline, with the node's making out of line: a path's levels and a co-scope enter it each time.
    TRACETREE_DETAIL_INLINE static bool enter_node(ThreadState& state, const SiteInfo* site) noexcept {
        Arena& arena = state.arena;
        std::uint32_t index = child(arena, site);
        if (index == 0 && (index = add_node(state, site)) == 0) return false;
        arena.cur = arena.at(index);
        arena.cur_index = index;
        ++arena.depth;
        return true;
    }
    TRACETREE_DETAIL_COLD static std::uint32_t add_node(ThreadState& state, const SiteInfo* site) noexcept {
        return state.current->add(state.arena, state.arena.cur_index, site);
    }
    // here() inside a capture: the path refers to the capture's Gather (made once), which waits for it.
    static void gather_into(ThreadState& state, HandoffPath& path) noexcept {
        if (state.capture_waits()) state.start_deferred_capture();  // as for anything recorded under it
        if (state.capture_depth == 0) return;
        Capture& capture = state.captures[state.capture_depth - 1];
        std::uint32_t inside = 0;  // open scopes in the capture's tree: its root and those below
        for (std::uint32_t index = state.arena.cur_index; index != 0; index = state.current->at(index)->parent) ++inside;
        if (inside == 0 || inside > path.depth) return;
        if (capture.gather == nullptr) {
            auto* made = new (std::nothrow) Gather();
            if (made == nullptr) return;
            made->level = path.depth - inside;
            capture.gather = made;
        }
        if (static_cast<Gather*>(capture.gather)->level != path.depth - inside) return;
        link(path, capture.gather, path.depth - inside);
    }
    // The path holds the trace back (a HereHold of its own, with one reference to the trace).
    static void link(HandoffPath& path, GatherRef* gather, std::uint32_t level) noexcept {
        path.hold = new (std::nothrow) HereHold(gather);
        if (path.hold == nullptr) return;  // out of memory: the work is recorded, not traced
        retain(gather);
        path.gather_level = level;
    }
    // A Continue's (or a resumption's) end: its keep given back, the Here spent if it was a Continue's.
    static void let_go(Continuation& saved) noexcept {
        HereHold* hold = std::exchange(saved.hold, nullptr);
        if (hold == nullptr) return;
        if (saved.spends) spend(*hold);
        drop_keep(*hold);
        release(hold);
    }
    // A tree for a Continue whose work a trace waits for; null when out of memory or over the budget.
    Tree* gather_tree(ThreadState& state) noexcept {
        try {
            auto tree = std::make_unique<Tree>(state.main->capacity, chunks_);
            return tree->prepare() ? tree.release() : nullptr;
        } catch (...) {
            return nullptr;
        }
    }
    const InternedSite* wait_site(std::atomic<const InternedSite*>& known, const char* name) noexcept {
        if (const InternedSite* site = known.load(std::memory_order_acquire)) return site;
        return make_wait_site(known, name);
    }
    TRACETREE_DETAIL_COLD const InternedSite* make_wait_site(std::atomic<const InternedSite*>& known, const char* name) noexcept {
        try {
            const InternedSite* made = sites_.intern(SiteKind::scope, name, "", 0, nullptr);
            known.store(made, std::memory_order_release);
            return made;
        } catch (...) {
            return nullptr;
        }
    }

public:
    ForkGate gate;  // every Gather's lock is taken inside it
    void forked() noexcept {  // in the child: every place lock held across fork() is free
        generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

private:
    const Clock& clock_;
    SiteTable& sites_;
    ChunkPool& chunks_;
    HandoffRecords records_;
    std::atomic<const InternedSite*> queued_{nullptr};     // the `[queued]` node's site
    std::atomic<const InternedSite*> suspended_{nullptr};  // the `[suspended]` node's site
    std::atomic<std::uint32_t> generation_{0};               // fork()s this process descends from
    TRACETREE_DETAIL_INLINE PlaceLock locked(CoroutineState& coroutine) noexcept {  // g++ stops inlining it past a few callers
        return PlaceLock(coroutine.lock, generation_);
    }
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_HANDOFFS_HPP
