// tracetree hand-off internals: a captured path and a continuation's saved arena. SPDX-License-Identifier: MIT
//
// here() copies the open scopes' sites (outermost first) and a tick into a pooled record that the
// Here points to; Continue enters that path in the worker's own tree and puts the arena back at the end. Both are calls into the runtime (one each
// way), so every copy in the process records a hand-off the same way; the hot path is untouched.
#ifndef TRACETREE_CORE_HANDOFF_HPP
#define TRACETREE_CORE_HANDOFF_HPP

#include "recorder.hpp"

#include <atomic>
#include <cstdint>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// A trace capture that work was handed off from (runtime/gather.hpp): it is delivered when the last
// Here and Continue referring to it, and the capture itself, are gone.
struct GatherRef {
    std::atomic<std::uint32_t> refs{1};  // the capture's own
};

// One here() taken in a trace (in its capture or its continued work), shared by that Here's copies:
// it holds one reference to the trace, kept while the Here may still be continued. Continued once
// and that Continue ended (unless made for many), or its last copy gone, the Here is spent and no
// longer holds the trace: an executor's idle copy of a finished task does not delay it.
struct HereHold {
    explicit HereHold(GatherRef* trace) noexcept : gather(trace) {}
    std::atomic<std::uint32_t> refs{1};   // the Here's copies and the running Continues: this memory
    std::atomic<std::uint32_t> keeps{1};  // 1 until spent, plus the running Continues: the reference
    std::atomic<bool> spent{false};
    bool many = false;  // here(for_many): only its last copy spends it
    GatherRef* const gather;
};

// Where here() was taken. Plain data: copied with the task, valid on any thread, for ever (sites are
// never freed), whether or not the thread that took it is still running.
struct HandoffPath {
    static constexpr std::uint32_t kMaxDepth = 8;  // deeper paths keep their outermost levels
    const SiteInfo* sites[kMaxDepth] = {};  // interned sites of the open scopes, outermost first
    std::uint32_t depth = 0;
    std::uint32_t thread_id = 0;  // of the thread that took it
    std::uint64_t tick = 0;       // when it was taken, on the clock below
    bool valid = false;           // false: taken while not recording (or compiled out): nothing to continue
    bool fake_clock = false;      // taken on the test clock
    bool cut = false;             // the thread was deeper than kMaxDepth
    HereHold* hold = nullptr;  // taken inside a trace: the trace waits for this path's work
    std::uint32_t gather_level = 0;  // the trace's root: sites[gather_level]
};

// One here() taken while recording, shared by that Here's copies (a Here is a pointer to it, so that
// a task that carries one stays small). The runtime's: taken from a pool, given back to it when the
// last copy is gone, so that a hand-off allocates nothing once the pool has records to spare.
struct HandoffRecord {
    std::atomic<std::uint32_t> refs{1};  // the Here's copies
    std::atomic<std::uint32_t> next{0};  // in the pool's free list: the next one's index (0: none)
    std::uint32_t index = 0;             // its own, from 1: the free list links indices, not pointers
    HandoffPath path;
};
inline constexpr HandoffPath kNoPath{};  // an empty Here's

struct CoroutineState;

// The worker's arena as a Continue (or a coroutine's resumption) found it, put back at its end.
struct Continuation {
    Arena* arena = nullptr;  // null: nothing was entered
    NodeRecord* cur = nullptr;
    std::uint32_t cur_index = 0;
    std::uint32_t depth = 0;
    HereHold* hold = nullptr;  // the work goes to that trace too: recorded in a tree of its own
    void* tree = nullptr;      // that tree (the runtime's)
    bool spends = false;       // a Continue (not a resumption): its end spends the Here
};

// Where a resumption sends the TRACETREE_WATCH values said directly in a watched co-scope's node: the
// runtime's frame of it and its number in the resumption's place, whose lock guards that frame (a
// frame is written only while the place still holds it as that number), and how many of the thread's
// own frames are below it (a plain watched scope opened inside comes first). With the watch wish it replaced (the
// arena's kValuesOfNode bit and value node), given back when the co-scope ends or the resumption
// suspends.
struct ValueRoute {
    void* frame = nullptr;  // null: none; the others are read only when it is set
    std::uint32_t serial;
    std::uint32_t frames_below;
    std::uint8_t node_values;
    const NodeRecord* value_node;
};

// A coroutine's resumption (Resumed): which coroutine, the one it was resumed inside, and what must be
// as it was for the arena to be put back (a plain scope left open across a suspension leaves it otherwise).
struct Resumption : Continuation {
    CoroutineState* coroutine = nullptr;
    CoroutineState* outer = nullptr;
    const void* outer_top = nullptr;  // the thread's coroutine_top in the outer one
    std::uint64_t number = 0;  // of the coroutine's resumptions
    std::uint32_t captures = 0;
    const void* recording_into = nullptr;  // the tree
    bool in_place = false;  // not recording, inside a capture or another trace's continued work: where it runs
    Resumption* outer_resumption = nullptr;  // the thread's resumption around this one
    ValueRoute route;  // set while it sends TRACETREE_WATCH values to a watched co-scope
};

// A coroutine's place between its resumptions (coroutine.hpp); the runtime's, under its lock
// (runtime/handoffs.hpp, PlaceLock): a resumption may start on another thread before the end of the
// one before it has run.
struct CoroutineState {
    std::atomic<std::uint32_t> lock{0};
    const SiteInfo* open_sites[HandoffPath::kMaxDepth] = {};  // its co-scopes open now, outermost first
    std::uint32_t open = 0;  // how many (those past kMaxDepth are not entered again)
    std::uint64_t resumptions = 0;
    std::uint64_t suspended_at = 0;     // when the resumption numbered `suspended_after` ended
    std::uint64_t suspended_after = 0;
    bool fake_clock = false;
    // A trace of one of its co-scopes (open_sites[traced_level]), which each resumption records into
    // from that level on while it is open; one reference, given back when that co-scope ends.
    GatherRef* traced = nullptr;
    std::uint32_t traced_level = 0;
    // The runtime's frame of one of its co-scopes (open_sites[watched_level]) that a watch session
    // wants TRACETREE_WATCH values of: each resumption sends there the values said directly in it. The
    // place holds a reference to it until that co-scope ends in its coroutine, or until the place goes
    // (a co-scope that ended elsewhere could not give it back). Numbered: a frame made later at the
    // same address is not taken for it.
    void* watched = nullptr;
    std::uint32_t watched_level = 0;
    std::uint32_t watched_serial = 0;
    ~CoroutineState();
};

// TRACETREE_CO_SCOPE's record: nothing in it belongs to a thread, as it may end on another one.
struct SuspendableScope {
    const SiteInfo* entered = nullptr;  // the node's site; null: not recorded
    CoroutineState* coroutine = nullptr;  // the one it is open in, whose own scopes it is one of
    std::uint64_t start = 0;
    unsigned int uncaught = 0;  // exceptions in flight at its start, on the thread it started on
    bool fake_clock = false;
    GatherRef* trace = nullptr;  // the trace it started (a reference, given back at its end)
    void* frame = nullptr;       // the runtime's: what its stack, watch and monitor sessions want at its end
    std::uint32_t watched = 0;   // its number as its place's watched co-scope; 0: not that
};

inline void retain(GatherRef* gather) noexcept {
    if (gather != nullptr) gather->refs.fetch_add(1, std::memory_order_relaxed);
}
inline void release(GatherRef* gather) noexcept {
    if (gather != nullptr && gather->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) find_recorder()->gathered(*gather);
}

// A place destroyed while one of its co-scopes was traced (a frame destroyed elsewhere): the trace
// no longer waits for it.
inline CoroutineState::~CoroutineState() {
    release(traced);
    if (watched != nullptr) find_recorder()->let_go_frame(watched);
}

inline void retain(HandoffRecord* record) noexcept {
    if (record != nullptr) record->refs.fetch_add(1, std::memory_order_relaxed);
}
// The only reference needs no atomic decrement: no other thread can copy from it meanwhile.
inline void release(HandoffRecord* record) noexcept {
    if (record == nullptr) return;
    if (record->refs.load(std::memory_order_acquire) == 1 || record->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
        find_recorder()->recycle(tls_arena(), *record);
}

inline void retain(HereHold* hold) noexcept {
    if (hold != nullptr) hold->refs.fetch_add(1, std::memory_order_relaxed);
}
// One keep less; the last one gives the trace its reference back.
inline void drop_keep(HereHold& hold) noexcept {
    if (hold.keeps.fetch_sub(1, std::memory_order_acq_rel) == 1) release(hold.gather);
}
// A keep for a Continue, unless the Here is spent and its trace no longer waits (maybe gone).
inline bool take_keep(HereHold& hold) noexcept {
    std::uint32_t keeps = hold.keeps.load(std::memory_order_relaxed);
    while (keeps != 0)
        if (hold.keeps.compare_exchange_weak(keeps, keeps + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
    return false;
}
inline void spend(HereHold& hold) noexcept {
    if (!hold.spent.exchange(true, std::memory_order_acq_rel)) drop_keep(hold);
}
inline void release(HereHold* hold) noexcept {
    if (hold == nullptr || hold->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    spend(*hold);
    delete hold;
}

inline Arena* recording_arena() noexcept {
    Arena* arena = tls_arena();
    if (arena == nullptr && (arena = join_thread()) == nullptr) return nullptr;
    return (arena->flags.load(std::memory_order_relaxed) & kRecording) != 0 ? arena : nullptr;
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_CORE_HANDOFF_HPP
