// tracetree recorder: what every annotated file compiles. SPDX-License-Identifier: MIT
//
// Reading order: call sites (the static record each macro leaves), the per-thread call tree and its
// hot path (Arena::enter/leave), the process-wide recorder's interface, the scope guard (Scope).
// Everything slow (creating a thread's tree, new nodes, sessions, snapshots) sits behind the
// `Recorder` interface, implemented once per process by runtime/runtime.hpp and found through
// core/anchor.hpp; this file needs only <atomic> and C headers.
#ifndef TRACETREE_CORE_RECORDER_HPP
#define TRACETREE_CORE_RECORDER_HPP

#include "anchor.hpp"   // the namespace; where the process's recorder is found
#include "version.hpp"

#include <atomic>       // counters and flags shared with snapshot readers
#include <cstddef>      // std::size_t, std::nullptr_t
#include <cstdint>      // fixed-width counters
#include <iosfwd>       // std::ostream, declared only: TRACETREE_WATCH of a type printed with operator<<
#include <type_traits>  // TRACETREE_WATCH picks a formatter by type
#if (defined(__x86_64__) || defined(__aarch64__)) && (defined(__GNUC__) || defined(__clang__))
#define TRACETREE_DETAIL_COUNTER 1  // ticks() reads a counter; the runtime converts its ticks to nanoseconds
#elif defined(__unix__) || defined(__APPLE__)
#include <time.h>  // clock_gettime where there is no counter to read
#else
#error "tracetree: no clock: ticks() reads the x86-64 or aarch64 counter (g++, clang++) or POSIX clock_gettime"
#endif


static_assert(TRACETREE_VERSION_MAJOR == 0 && TRACETREE_VERSION_MINOR == 2, "core/abi.hpp names the version: update it too");

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// ---- the clock ------------------------------------------------------------------------------
// Ticks: the time-stamp counter on x86-64, the virtual counter on aarch64 (converted to nanoseconds
// only when a snapshot is taken), else monotonic nanoseconds. Fixed per platform, so every copy in a
// process agrees.

TRACETREE_DETAIL_INLINE std::uint64_t ticks() noexcept {
#if defined(TRACETREE_DETAIL_COUNTER) && defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(TRACETREE_DETAIL_COUNTER)
    // Without the isb the counter may be read before earlier instructions have finished (the Arm ARM
    // lets the read run ahead), so a scope's end could be read inside its body.
    std::uint64_t count;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(count) : : "memory");
    return count;
#else
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<std::uint64_t>(now.tv_sec) * 1000000000u + static_cast<std::uint64_t>(now.tv_nsec);
#endif
}

#if defined(TRACETREE_DETAIL_COUNTER) && defined(__aarch64__)
// The virtual counter's frequency in Hz, set by the firmware at boot (0 where it forgot).
inline std::uint64_t counter_frequency() noexcept {
    std::uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    return hz;
}
#endif

// ---- call sites -----------------------------------------------------------------------------

enum class SiteKind : std::uint8_t { scope, function, dynamic, thrown };

// A session epoch and a mask of session slots in one word, so that the fast path compares a site's
// sessions with the arena's epoch in one load (SiteInfo::watch, Arena::epoch_word: no slot).
struct WatchWord {
    static constexpr std::uint64_t make(std::uint32_t epoch, std::uint32_t mask) noexcept {
        return (std::uint64_t{epoch} << 32) | mask;
    }
    static constexpr std::uint32_t epoch(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word >> 32); }
    static constexpr std::uint32_t mask(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word); }
};

// What the recorder keeps of a call site, interned by content (kind, name, file, line) and never
// freed: nodes point here rather than at the macro's static record, so names outlive a library that
// is unloaded, and a reloaded library's scopes land on their old nodes. The runtime extends it.
struct SiteInfo {
    // Which trace sessions watch this site (a WatchWord), decided once per site and epoch; equal to
    // the arena's `epoch_word` when decided and watched by none.
    std::atomic<std::uint64_t> watch{0};
    const SiteInfo* origin = nullptr;  // run-time names: the info of the macro's own call site
    const char* name = nullptr;        // run-time names: the name's bytes (any bytes, NUL included)
    std::uint32_t name_size = 0;
    bool interned = false;             // false only for g_unregistered_site
};

// Every copy's sites start pointing here: it matches no node and no epoch, so a site's first scope
// takes the slow path, which interns the site and stores the real info.
TRACETREE_DETAIL_LOCAL inline SiteInfo g_unregistered_site;

// One per macro expansion, constant-initialised (no guard, no dynamic initialiser).
struct Site {
    const char* text;  // the scope name or the function signature (run-time names: "")
    const char* file;
    std::uint32_t line;
    SiteKind kind;
    std::atomic<const SiteInfo*> info{&g_unregistered_site};

    constexpr Site(const char* text_, const char* file_, int line_, SiteKind kind_) noexcept
        : text(text_), file(file_), line(static_cast<std::uint32_t>(line_)), kind(kind_) {}
};

// ---- the per-thread call tree ---------------------------------------------------------------

// One node per call site under one parent. The owner thread is the only writer; snapshot readers
// see `site` and `parent` (written before the node is published) and the relaxed counters.
struct NodeRecord {
    const SiteInfo* site = nullptr;  // null for the root
    std::uint32_t parent = 0;
    std::uint32_t index = 0;         // its own: Arena::enter takes the node after it only inside its chunk
    std::uint32_t last_child = 0;    // owner only: the newest child
    std::uint32_t hint = 0;          // owner only: the child last found through the child index
    std::atomic<std::uint32_t> throws{0};
    std::atomic<std::uint32_t> dropped{0};  // calls below not recorded: depth or node limit
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> total{0};
    std::atomic<std::uint64_t> min{~std::uint64_t{0}};
    std::atomic<std::uint64_t> max{0};
};
static_assert(sizeof(NodeRecord) <= 64, "a node must fit a cache line");

inline constexpr std::uint32_t kChunkBits = 8;  // 256 nodes, 16 KiB per chunk
inline constexpr std::uint32_t kChunkMask = (1u << kChunkBits) - 1;

template <class T>
TRACETREE_DETAIL_INLINE void bump(std::atomic<T>& counter, T by = 1) noexcept {  // single writer: no locked add
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}
// The 32-bit counters stop at their maximum instead of wrapping to a small number.
inline void bump_saturating(std::atomic<std::uint32_t>& counter, std::uint64_t by = 1) noexcept {
    const std::uint64_t sum = counter.load(std::memory_order_relaxed) + by;
    counter.store(sum > 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<std::uint32_t>(sum), std::memory_order_relaxed);
}

// Process-wide flags, mirrored into every thread's arena by the runtime.
inline constexpr std::uint8_t kRecording = 1;
inline constexpr std::uint8_t kSessions = 2;   // some site may be watched: check before the fast path
inline constexpr std::uint8_t kSlow = 4;       // test clock or timeline: every scope takes the slow path
inline constexpr std::uint8_t kValuesOfNode = 1;  // Arena::values bits
inline constexpr std::uint8_t kValuesOfAll = 2;

// A run-time name's hash, and its first kHeadWords * 8 bytes as words (zero past its end), by the
// caller and by the table alike. What a call waits for between its two clock reads is the chain from
// the name's bytes to its node (the processor runs little of the next call ahead of it), so the hash
// is short: the words combined, one multiplication.
struct NameKey {
    static constexpr std::uint32_t kHeadWords = 3;
    std::uint64_t hash;
    std::uint64_t head[kHeadWords];
};
inline std::uint64_t load_word(const char* data) noexcept {
    std::uint64_t word;
    __builtin_memcpy(&word, data, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    word = __builtin_bswap64(word);  // the first byte lowest, as the tail's shifts and the short names' loop take it
#endif
    return word;
}
inline std::uint64_t rotate_left(std::uint64_t word, unsigned int bits) noexcept { return (word << bits) | (word >> (64 - bits)); }
inline NameKey name_key(const char* data, std::size_t size, std::uint64_t seed) noexcept {
    // The last partial word from the word that ends the name: no branch on its length (names of 16
    // and 17 bytes picked at random would mispredict one); byte by byte in a name under 8 bytes.
    const std::size_t words = size / 8, rest = size % 8;
    std::uint64_t tail = 0;
    if (words != 0) tail = (load_word(data + size - 8) >> 1) >> (63 - 8 * rest);
    else for (std::size_t i = 0; i < rest; ++i) tail |= std::uint64_t{static_cast<unsigned char>(data[i])} << (8 * i);
    NameKey key{seed ^ (size * 0x9E3779B97F4A7C15u), {0, 0, 0}};
    for (std::size_t i = 0; i < NameKey::kHeadWords; ++i) {  // each word at a fixed index: the key stays in registers
        key.head[i] = i < words ? load_word(data + 8 * i) : i == words ? tail : 0;
        key.hash ^= rotate_left(key.head[i], 21 * static_cast<unsigned int>(i) + 1);
    }
    for (std::size_t i = NameKey::kHeadWords; i <= words; ++i)  // past the head: chained
        key.hash = rotate_left(key.hash, 23) ^ ((i < words ? load_word(data + 8 * i) : tail) * 0xBF58476D1CE4E5B9u);
    // The product's upper bits, which every bit of the words reaches, as the slot's.
    key.hash = __builtin_bswap64(key.hash * 0x94D049BB133111EBu);
    return key;
}

// A run-time name seen on this thread, in the thread's table (open addressing on the name's hash, at
// most half full), with the node it had the last time: `child` under `parent` in the thread's own
// tree (indices and nodes there never move). One cache line, found from the hash alone: a call
// waits for one load after the hash for both the comparison and the node.
struct alignas(64) DynamicEntry {
    static constexpr std::uint32_t kNoParent = ~std::uint32_t{0};
    const SiteInfo* info = nullptr;    // null: an empty slot
    const SiteInfo* origin = nullptr;  // the macro's call site
    std::uint32_t size = 0;
    std::uint32_t parent = kNoParent;
    std::uint32_t child = 0;
    NodeRecord* node = nullptr;
    std::uint64_t head[NameKey::kHeadWords] = {};

    bool same(const SiteInfo* origin_, const char* name, std::uint32_t size_, const NameKey& key) const noexcept {
        constexpr std::uint32_t kHeadBytes = 8 * NameKey::kHeadWords;
        if (size != size_ || origin != origin_ || head[0] != key.head[0] || head[1] != key.head[1] || head[2] != key.head[2])
            return false;
        return size <= kHeadBytes || __builtin_memcmp(info->name + kHeadBytes, name + kHeadBytes, size - kHeadBytes) == 0;
    }
};
static_assert(sizeof(DynamicEntry) == 64, "a run-time name's entry is one cache line");

// The arena's current index while a deferred capture waits (the guard is current): no node's.
inline constexpr std::uint32_t kDeferredIndex = 0xFFFFFFFEu;

// A tree's child index: open addressing over (parent index, site) -> child index; 0 is an empty slot.
// The parent is multiplied before it meets the site: shifted up instead, it reached the slot only as
// parent * constant modulo the table size, so every parent's children fell in the same pattern, moved
// along by the parent; how long the runs of that pattern got then hung on how far apart the heap had
// put the sites (a fresh 11,111-node tree took 1.48 to 2.96 probes per lookup in three builds of
// one benchmark, against about 1.75 for a uniform hash). The product's upper 32 bits: 24 left half
// of a table for the largest trees (2^24 nodes, 2^25 slots) never a first probe.
inline std::uint32_t child_slot(std::uint32_t parent, const SiteInfo* info, std::uint32_t mask) noexcept {
    constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15u;
    const std::uint64_t key = reinterpret_cast<std::uintptr_t>(info) ^ (std::uint64_t{parent} * kGolden);
    return static_cast<std::uint32_t>((key * kGolden) >> 32) & mask;
}
inline std::uint32_t find_child(NodeRecord* const* chunks, const std::uint32_t* slots, std::uint32_t mask,
                                std::uint32_t parent, const SiteInfo* info) noexcept {
    for (std::uint32_t slot = child_slot(parent, info, mask);; slot = (slot + 1) & mask) {
        const std::uint32_t index = slots[slot];
        if (index == 0) return 0;
        const NodeRecord* node = &chunks[index >> kChunkBits][index & kChunkMask];
        if (node->site == info && node->parent == parent) return index;
    }
}

class Recorder;

// A thread's recorder state, as the hot path sees it. One per thread, made and owned by the runtime,
// never moved: every copy of this header in the process caches a pointer to it per thread. The tree
// it records into is the thread's own, or a trace capture's while one runs (the runtime swaps the
// tree fields and restores them).
struct Arena {
    // The tree being recorded into.
    NodeRecord* const* chunks = nullptr;  // a fixed table of chunk pointers: never reallocated
    const std::uint32_t* slots = nullptr;  // (parent, site) -> child index, open addressing; 0: empty
    std::uint32_t slot_mask = 0;
    NodeRecord* cur = nullptr;  // the innermost open scope's node (the root at depth 0; the runtime's guard while a capture waits)
    std::uint32_t cur_index = 0;
    std::uint32_t depth = 0;
    NodeRecord* last = nullptr;  // the node left last (or the current one, or the runtime's overflow node)
    // The nesting limit; 0 sends every scope to the runtime (a reset is pending, a scope past the node
    // limit is open, or the thread has exited) without a check of its own on the fast path.
    std::atomic<std::uint32_t> depth_limit{0};
    std::atomic<std::uint8_t> flags{0};
    std::atomic<std::uint64_t> epoch_word{0};  // WatchWord::make(session epoch, 0)
    const unsigned int* uncaught = nullptr;  // this thread's count of exceptions in flight
    Recorder* recorder = nullptr;
    // Run-time names seen on this thread: a table of dynamic_mask + 1 entries.
    DynamicEntry* dynamic = nullptr;
    std::uint32_t dynamic_mask = 0;
    bool main_tree = false;  // recording into the thread's own tree, not a capture's
    std::atomic<std::uint32_t> max_name_length{0};  // set_limits() changes it while the owner records
    // TRACETREE_THROW's site, read by the runtime's throw hook.
    const char* throw_file = nullptr;
    std::uint32_t throw_line = 0;
    // Who wants TRACETREE_WATCH values: kValuesOfNode (a watch session, for the scope whose node is
    // `value_node` while it is the innermost one), kValuesOfAll (a trace asked for them).
    std::uint8_t values = 0;
    const NodeRecord* value_node = nullptr;
    void* state = nullptr;  // the runtime's per-thread state around this arena
    // A watched site whose scopes Scope defers itself, as the runtime's begin() would: set by the
    // runtime when it deferred one, for the state it decided in (the sessions of one epoch, the
    // capture slot it prepared, no capture waiting); cleared when that state changes
    // (ThreadState::point_at, prepare_capture, copy_sessions); a new epoch does not match.
    const SiteInfo* defer_site = nullptr;
    std::uint64_t defer_epoch = 0;  // WatchWord::make(the epoch it was decided in, 0)
    std::uint64_t defer_below = 0;  // ticks below every session's min_cost (Capture::below)
    NodeRecord* guard = nullptr;    // the runtime's guard node (ThreadState::deferred())

    NodeRecord* at(std::uint32_t index) const noexcept { return &chunks[index >> kChunkBits][index & kChunkMask]; }

    // Whether a watched scope of `info` may be deferred by Scope, as the runtime decided (defer_site);
    // not while a capture waits: the runtime starts it first.
    bool defers(const SiteInfo* info) const noexcept {
        return info == defer_site && epoch_word.load(std::memory_order_relaxed) == defer_epoch && cur_index != kDeferredIndex;
    }

    // The hot path: the node for `site` under the current node, made current, and in `parent` the node
    // it was entered under, which leave() goes back to without looking it up; null: not recorded.
    // Tried inline: the node made right after the current one (a call nested in one that was new),
    // the node made right after the one left last (leaves called in order), the hint (a child found
    // before through the child index: calls that repeat). The first two need no load for their address: a load chained to the
    // last scope's (the current node, its hint, the chunk) costs more on Intel than the
    // instructions. A node after another is read only inside its chunk (a chunk of 257 would cost a
    // larger size class in most allocators); the runtime's guard node is followed by an empty one.
    // Everything else is one call out of line, shared by every site (enter_slowly).
    TRACETREE_DETAIL_INLINE NodeRecord* enter(Site* site, const SiteInfo* info, NodeRecord*& parent) noexcept {
        if (depth >= depth_limit.load(std::memory_order_relaxed)) return enter_elsewhere(site, info, parent);
        std::uint32_t index = cur_index + 1;
        NodeRecord* node = cur + 1;
        if ((index & kChunkMask) == 0 || node->site != info || node->parent != cur_index) {
            index = last->index + 1;
            node = last + 1;
            if ((index & kChunkMask) == 0 || node->site != info || node->parent != cur_index) {
                index = cur->hint;
                node = at(index);
                if (node->site != info) return enter_elsewhere(site, info, parent);
            }
        }
        ++depth;
        parent = cur;
        cur = node;
        cur_index = index;
        return node;
    }

    // The node of a run-time name: the one it had the last time, when the parent is the same and the
    // tree the thread's own; else as enter() finds it, remembered for next time.
    TRACETREE_DETAIL_INLINE NodeRecord* enter(DynamicEntry& name, NodeRecord*& parent) noexcept {
        if (name.parent == cur_index && main_tree && depth < depth_limit.load(std::memory_order_relaxed)) {
            ++depth;  // first, apart from cur_index: else g++ packs the two stores through a vector register
            parent = cur;
            cur_index = name.child;
            cur = name.node;
            return cur;
        }
        NodeRecord* node = enter(nullptr, name.info, parent);
        // A node of the thread's tree (not the overflow); its parent read from it, as the arena may have
        // moved on the way (a deferred capture that started, or was given up).
        if (node != nullptr && main_tree && node == at(cur_index)) name.parent = node->parent, name.child = cur_index, name.node = node;
        return node;
    }

    // Apart from the counters, nothing waits for the clock: the caller reads the exception count
    // before it. Depth first: beside cur_index, g++ packs the two stores through a vector register.
    TRACETREE_DETAIL_INLINE void leave(NodeRecord* node, NodeRecord* parent, std::uint64_t elapsed, bool threw) noexcept {
        --depth;
        bump(node->count);
        bump(node->total, elapsed);
        if (elapsed < node->min.load(std::memory_order_relaxed)) node->min.store(elapsed, std::memory_order_relaxed);
        if (elapsed > node->max.load(std::memory_order_relaxed)) node->max.store(elapsed, std::memory_order_relaxed);
        if (threw) bump_saturating(node->throws);
        last = node;
        cur_index = node->parent;
        cur = parent;
    }

    // The rest of enter(), out of line: the tree's child index, and the runtime for a new node or past
    // the depth limit. The node and its parent come back in registers: through a reference to the
    // scope's field, the compiler would keep every scope's fields in memory.
    struct Entered {
        NodeRecord* node;
        NodeRecord* parent;
    };
    TRACETREE_DETAIL_INLINE NodeRecord* enter_elsewhere(Site* site, const SiteInfo* info, NodeRecord*& parent) noexcept {
        const Entered entered = enter_slowly(site, info);
        parent = entered.parent;
        return entered.node;
    }
    TRACETREE_DETAIL_NOINLINE Entered enter_slowly(Site* site, const SiteInfo* info) noexcept {
        const std::uint32_t index = depth < depth_limit.load(std::memory_order_relaxed) ? find(cur_index, info) : 0;
        if (index == 0) return enter_new(site, info);
        NodeRecord* const parent = cur;
        ++depth;
        cur->hint = index;
        cur = at(index);
        cur_index = index;
        return {cur, parent};
    }
    TRACETREE_DETAIL_COLD Entered enter_new(Site* site, const SiteInfo* info) noexcept {
        return entered_at(depth >= depth_limit.load(std::memory_order_relaxed) ? enter_limited(site, info) : add(site, info));
    }
    // A node the runtime made: its parent looked up in the tree the arena records into now (it may sit
    // in another tree than the one it was asked under: a capture's).
    Entered entered_at(NodeRecord* node) const noexcept { return {node, node != nullptr ? at(node->parent) : nullptr}; }

    TRACETREE_DETAIL_INLINE void leave(NodeRecord* node, std::uint64_t elapsed, unsigned int uncaught_at_entry) noexcept {
        leave(node, at(node->parent), elapsed, *uncaught > uncaught_at_entry);
    }
    // The node left last, for the next enter(): the current one, when the arena moves to another tree.
    void forget_last() noexcept { last = cur; }

    std::uint32_t find(std::uint32_t parent, const SiteInfo* info) const noexcept {
        return find_child(chunks, slots, slot_mask, parent, info);
    }

    inline NodeRecord* enter_limited(Site* site, const SiteInfo* info) noexcept;  // defined below Recorder
    inline NodeRecord* add(Site* site, const SiteInfo* info) noexcept;
};

// ---- the process-wide recorder ----------------------------------------------------------------

class Scope;
class RuntimeImpl;
struct HandoffPath;   // core/handoff.hpp
struct HandoffRecord;
struct Continuation;
struct GatherRef;
struct SuspendableScope;
struct CoroutineState;
struct Resumption;

// The slow paths, implemented once per process (runtime/runtime.hpp). Every copy of this header (the
// executable, shared libraries, plugins) calls the same object, so one profile sees all of them.
class Recorder {
public:
    virtual Arena* join_thread() noexcept = 0;  // this thread's arena, made on first use; null when exited
    virtual NodeRecord* enter_limited(Arena& arena, Site* site, const SiteInfo* info) noexcept = 0;
    virtual NodeRecord* add(Arena& arena, Site* site, const SiteInfo* info) noexcept = 0;  // a new node
    virtual void begin(Scope& scope, Arena& arena, Site* site, const SiteInfo* info) noexcept = 0;
    virtual void end(Scope& scope) noexcept = 0;
    // A run-time name not yet in the thread's table: interned, added to it; null when over a budget.
    virtual const SiteInfo* dynamic_site(Arena& arena, Site& origin, const char* name, std::size_t size) noexcept = 0;
    // TRACETREE_WATCH, when someone wants the value: as text, a double, or printed by operator<<.
    virtual void value(Arena& arena, const char* name, const char* text, std::size_t size, bool cut) noexcept = 0;
    virtual void value(Arena& arena, const char* name, double number) noexcept = 0;
    virtual void value(Arena& arena, const char* name, void (*print)(std::ostream&, const void*), const void* object) noexcept = 0;
    // Hand-offs (core/handoff.hpp): where this thread is; continuing there on this thread, and back.
    virtual HandoffRecord* capture_here(Arena& arena) noexcept = 0;  // null: nothing to continue
    virtual void recycle(Arena* arena, HandoffRecord& record) noexcept = 0;  // its last Here is gone, on arena's thread
    virtual bool continue_at(Arena& arena, const HandoffPath& path, Continuation& saved) noexcept = 0;
    virtual void end_continue(Continuation& saved) noexcept = 0;
    virtual void gathered(GatherRef& gather) noexcept = 0;  // the last reference is gone: deliver
    // Coroutines (coroutine.hpp): a scope that may end on another thread; a coroutine's place entered
    // where it resumes, and left when it suspends.
    virtual void enter_suspendable(Arena& arena, Site* site, SuspendableScope& scope) noexcept = 0;
    virtual void leave_suspendable(Arena& arena, const SuspendableScope& scope) noexcept = 0;
    virtual bool resume(Arena& arena, const HandoffPath& origin, CoroutineState& coroutine, Resumption& saved) noexcept = 0;
    virtual void suspend(Resumption& saved) noexcept = 0;
    virtual void let_go_frame(void* frame) noexcept = 0;  // a place's reference to a watched co-scope's frame

protected:
    ~Recorder() = default;  // never destroyed: threads may record until the process ends
};

inline NodeRecord* Arena::enter_limited(Site* site, const SiteInfo* info) noexcept {
    return recorder->enter_limited(*this, site, info);
}
inline NodeRecord* Arena::add(Site* site, const SiteInfo* info) noexcept { return recorder->add(*this, site, info); }

// The process's recorder (of this ABI), or null: none has started yet.
inline Recorder* find_recorder() noexcept { return static_cast<Recorder*>(own_anchor().load(std::memory_order_acquire)); }

// This copy's pointer to the thread's arena. Trivially initialised and destroyed: no guard on the
// hot path, and nothing that would keep a library from being unloaded.
TRACETREE_DETAIL_LOCAL inline Arena*& tls_arena() noexcept {
    static thread_local Arena* arena = nullptr;
    return arena;
}

// A copy loaded after the recorder started, where the loader did not bind its anchor to the others (a
// plugin loaded RTLD_LOCAL), walks the modules for it once; a recorder started later writes every
// anchor loaded by then itself.
TRACETREE_DETAIL_COLD TRACETREE_DETAIL_LOCAL inline Recorder* find_recorder_loaded_before() noexcept {
    if (g_anchor_walked.load(std::memory_order_acquire)) return nullptr;
    auto* found = static_cast<Recorder*>(settle_recorder(nullptr));  // two threads may both walk: the same
    g_anchor_walked.store(true, std::memory_order_release);
    return found;
}

// A thread's first scope through this copy. With no recorder in the process (no file includes
// control.hpp), every scope comes here and leaves at once: two loads, no call outside.
TRACETREE_DETAIL_COLD TRACETREE_DETAIL_LOCAL inline Arena* join_thread() noexcept {
    Recorder* recorder = find_recorder();
    if (recorder == nullptr && (recorder = find_recorder_loaded_before()) == nullptr) return nullptr;
    Arena* arena = recorder->join_thread();
    tls_arena() = arena;
    return arena;
}

// ---- the scope guard --------------------------------------------------------------------------

// A name's bytes, from a `const char*` or anything with data() and size().
struct NameRef {
    const char* data;
    std::size_t size;
};
inline NameRef name_ref(const char* text) noexcept { return {text, text != nullptr ? __builtin_strlen(text) : 0}; }
template <class Text>
NameRef name_ref(const Text& text) noexcept {
    return {text.data(), static_cast<std::size_t>(text.size())};
}

class Scope {
public:
    // Every field set: in registers, as they are here, the compiler checks each path for them.
    TRACETREE_DETAIL_IN_CALLER explicit Scope(Site& site) noexcept : parent_(nullptr), arena_(nullptr), start_(0), uncaught_(0), slow_(0) {
        Arena* arena = tls_arena();
        if (arena == nullptr && (arena = join_thread()) == nullptr) return;
        begin(*arena, &site, site.info.load(std::memory_order_acquire));
    }
    // TRACETREE_SCOPE_DYNAMIC: the name is computed only when recording is on. A name seen on this
    // thread is found in its table: no allocation, no call into the runtime, the fields in registers
    // as above. A new one goes to the runtime, which interns it (or drops the call, over a budget)
    // and adds it.
    template <class MakeName>
    TRACETREE_DETAIL_IN_CALLER Scope(Site& site, MakeName&& make_name) : parent_(nullptr), arena_(nullptr), start_(0), uncaught_(0), slow_(0) {
        Arena* arena = tls_arena();
        if (arena == nullptr && (arena = join_thread()) == nullptr) return;
        if ((arena->flags.load(std::memory_order_relaxed) & kRecording) == 0) return;
        auto&& name = make_name();
        NameRef ref = name_ref(name);
        if (ref.data == nullptr) ref.data = "";  // a null `const char*`, an empty view: the empty name
        const std::uint32_t max_length = arena->max_name_length.load(std::memory_order_relaxed);
        if (ref.size > max_length) ref.size = max_length;  // as the recorder keeps it
        const SiteInfo* origin = site.info.load(std::memory_order_acquire);
        if (DynamicEntry* entry = find_name(*arena, origin, ref)) {
            begin(*arena, nullptr, entry->info, entry);
            return;
        }
        Scope filled;
        begin_new_name(filled, *arena, site, ref);
        take(filled);
    }
    TRACETREE_DETAIL_INLINE ~Scope() {
        if (node_ == nullptr) return;
        if (TRACETREE_DETAIL_LIKELY(slow_ == 0)) {
            const bool threw = *arena_->uncaught > uncaught_;
            arena_->leave(node_, parent_, ticks() - start_, threw);
            return;
        }
        end_slow(node_, parent_, arena_, start_, uncaught_, slow_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    // What the runtime must do at the end besides counting (bits of slow_).
    static constexpr std::uint8_t kCaptureRoot = 1;      // end the capture the scope started
    static constexpr std::uint8_t kFakeClock = 2;        // timed on the test clock
    static constexpr std::uint8_t kTimelineSpan = 4;     // add a timeline span
    static constexpr std::uint8_t kFrame = 8;            // deliver to stack, watch and monitor sessions
    static constexpr std::uint8_t kDeferredCapture = 16; // its capture waits for the first thing recorded under it
    static constexpr std::uint8_t kDeferredHere = 32;    // deferred by begin_deferred(), not the runtime

private:
    friend class RuntimeImpl;  // its slow paths fill these and read them at the end

    // The runtime's slow paths get a copy, never this object: once its address escaped, the compiler
    // would keep its fields in memory on the fast path too (a store and a load each, per scope).
    Scope() noexcept : parent_(nullptr), arena_(nullptr), start_(0), uncaught_(0), slow_(0) {}
    void take(Scope& from) noexcept {
        node_ = from.node_, parent_ = from.parent_, arena_ = from.arena_, start_ = from.start_, uncaught_ = from.uncaught_;
        slow_ = from.slow_;
        from.node_ = nullptr;
    }
    // Out of line, so that ~Scope does not contain a Scope's destruction (clang++ would not inline it).
    TRACETREE_DETAIL_COLD static void end_slow(NodeRecord* node, NodeRecord* parent, Arena* arena, std::uint64_t start,
                                               unsigned int uncaught, std::uint8_t slow) noexcept {
        // Deferred by begin_deferred(), with its guard still current: nothing was recorded under it (that
        // would have started its capture). Below every session's min_cost, no session wants it: left as
        // the runtime's end() would leave it. Else (and for every other slow scope) the runtime ends it.
        if (slow == (kDeferredCapture | kDeferredHere) && arena->cur_index == kDeferredIndex) {
            const bool threw = *arena->uncaught > uncaught;
            const std::uint64_t elapsed = ticks() - start;
            if (elapsed < arena->defer_below) return arena->leave(node, parent, elapsed, threw);
        }
        Scope ending;
        ending.node_ = node, ending.arena_ = arena, ending.start_ = start, ending.uncaught_ = uncaught, ending.slow_ = slow;
        arena->recorder->end(ending);
        ending.node_ = nullptr;
    }

    // Filled by begin() here or by the runtime's slow path; read by the runtime's end().
    NodeRecord* node_ = nullptr;  // null: not recorded, and nothing below is read
    NodeRecord* parent_;          // where the fast path's end goes back to (Arena::enter)
    Arena* arena_;
    std::uint64_t start_;
    unsigned int uncaught_;
    std::uint8_t slow_;  // 0: the destructor's fast path; else kCaptureRoot | ... bits

    // Unwatched sites go straight to the tree: with sessions running, a site decided for this epoch
    // and watched by none costs a load and a compare, not a match.
    TRACETREE_DETAIL_IN_CALLER void begin(Arena& arena, Site* site, const SiteInfo* info, DynamicEntry* name = nullptr) noexcept {
        const std::uint8_t flags = arena.flags.load(std::memory_order_relaxed);
        if (flags == kRecording ||
            (flags == (kRecording | kSessions) &&
             info->watch.load(std::memory_order_relaxed) == arena.epoch_word.load(std::memory_order_relaxed))) {
            node_ = name != nullptr ? arena.enter(*name, parent_) : arena.enter(site, info, parent_);
            if (node_ == nullptr) return;
            arena_ = &arena;
            slow_ = 0;
            uncaught_ = *arena.uncaught;
            start_ = ticks();
            return;
        }
        if ((flags & kRecording) == 0) return;
        if (name == nullptr && flags == (kRecording | kSessions) && arena.defers(info)) return begin_deferred(arena, site, info);
        Scope filled;
        arena.recorder->begin(filled, arena, site, info);
        take(filled);
    }

    // What the runtime's begin() does for a site watched only by trace captures it may defer, in the
    // state it decided that in (Arena::defer_site): the node entered and, unless it is the node limit's
    // overflow (a node of no site, recorded as a plain scope), the guard made current, so that the
    // first thing recorded under the scope reaches the runtime and starts the capture. The lookup is
    // out of line (enter_deferred), not copied into every scope's code a second time.
    TRACETREE_DETAIL_INLINE void begin_deferred(Arena& arena, Site* site, const SiteInfo* info) noexcept {
        const Arena::Entered entered = enter_deferred(arena, site, info);
        node_ = entered.node;
        if (node_ == nullptr) return;
        parent_ = entered.parent;
        arena_ = &arena;
        slow_ = entered.node->site == info ? kDeferredCapture | kDeferredHere : 0;
        uncaught_ = *arena.uncaught;
        start_ = ticks();
    }
    TRACETREE_DETAIL_COLD static Arena::Entered enter_deferred(Arena& arena, Site* site, const SiteInfo* info) noexcept {
        Arena::Entered entered{nullptr, nullptr};
        entered.node = arena.enter(site, info, entered.parent);
        if (entered.node != nullptr && entered.node->site == info) {
            arena.guard->parent = arena.cur_index;
            arena.cur = arena.guard;
            arena.cur_index = kDeferredIndex;
        }
        return entered;
    }

    // The entry of a name seen on this thread; null: not seen. Called, not inlined: as fast (the call
    // is not on the chain from the name to its node), and a quarter less code at each call site.
    TRACETREE_DETAIL_NOINLINE static DynamicEntry* find_name(const Arena& arena, const SiteInfo* origin, NameRef name) noexcept {
        const NameKey key = name_key(name.data, name.size, reinterpret_cast<std::uintptr_t>(origin));
        for (std::uint32_t slot = static_cast<std::uint32_t>(key.hash) & arena.dynamic_mask;; slot = (slot + 1) & arena.dynamic_mask) {
            DynamicEntry& entry = arena.dynamic[slot];
            if (entry.info == nullptr) return nullptr;
            if (entry.same(origin, name.data, static_cast<std::uint32_t>(name.size), key)) return &entry;
        }
    }
    TRACETREE_DETAIL_COLD static void begin_new_name(Scope& filled, Arena& arena, Site& site, NameRef name) noexcept {
        if (const SiteInfo* info = arena.recorder->dynamic_site(arena, site, name.data, name.size))
            filled.begin(arena, nullptr, info);
    }
};

// ---- watched values (TRACETREE_WATCH) and thrown exceptions (TRACETREE_THROW) ------------------

// TRACETREE_WATCH's value is evaluated only when a session wants it: one load and a compare otherwise.
template <class MakeValue>
TRACETREE_DETAIL_INLINE void watch(const char* name, MakeValue&& make_value) {
    Arena* arena = tls_arena();
    if (arena == nullptr || arena->values == 0) return;
    if ((arena->values & kValuesOfAll) == 0 && arena->value_node != arena->cur) return;
    record_value(*arena, name, make_value());
}

// TRACETREE_THROW: notes the line for the throw hook (runtime/throw_hook.hpp), then the exception is thrown.
template <class Exception>
Exception&& note_throw(const char* file, unsigned int line, Exception&& exception) noexcept {
    Arena* arena = tls_arena();
    if (arena == nullptr) arena = join_thread();
    if (arena != nullptr) {
        arena->throw_file = file;
        arena->throw_line = line;
    }
    return static_cast<Exception&&>(exception);
}

}  // namespace detail

// A value's text for TRACETREE_WATCH, cut at kCapacity bytes (a cut value ends in "...").
class ValueWriter {
public:
    static constexpr std::size_t kCapacity = 256;
    void append(const char* text, std::size_t size) noexcept {
        for (std::size_t i = 0; i < size; ++i) put(text[i]);
    }
    void append(const char* text) noexcept { append(text, __builtin_strlen(text)); }
    // "text" with `"`, `\` and control characters escaped.
    void quoted(const char* text, std::size_t size) noexcept {
        put('"');
        for (std::size_t i = 0; i < size; ++i) {
            const unsigned char c = static_cast<unsigned char>(text[i]);
            if (c == '"' || c == '\\') put('\\'), put(static_cast<char>(c));
            else if (c == '\n') put('\\'), put('n');
            else if (c < 0x20 || c == 0x7F) put('\\'), put('x'), put("0123456789abcdef"[c >> 4]), put("0123456789abcdef"[c & 15]);
            else put(static_cast<char>(c));
        }
        put('"');
    }
    void integer(unsigned long long magnitude, bool negative = false) noexcept {
        char digits[24];
        int count = 0;
        do digits[count++] = static_cast<char>('0' + magnitude % 10); while ((magnitude /= 10) != 0);
        if (negative) put('-');
        while (count > 0) put(digits[--count]);
    }
    const char* data() const noexcept { return text_; }
    std::size_t size() const noexcept { return size_; }
    bool cut() const noexcept { return cut_; }

private:
    void put(char c) noexcept {
        if (size_ < kCapacity) text_[size_++] = c;
        else cut_ = true;
    }
    char text_[kCapacity];
    std::size_t size_ = 0;
    bool cut_ = false;
};

namespace detail {

// How TRACETREE_WATCH formats a value, in order: bools, characters, integers, enums, floating point,
// null pointers, strings (quoted; a `const char*` or anything with data() and size() of char),
// pointers (hex); then a user's `tracetree_format(tracetree::ValueWriter&, const T&)` found by
// argument-dependent lookup; then `operator<<(std::ostream&, const T&)`.
template <class T, class = void>
struct has_data_size : std::false_type {};
template <class T>
struct has_data_size<T, std::enable_if_t<std::is_same<std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const T&>().data())>>, char>::value,
                                         decltype(void(std::declval<const T&>().size()))>> : std::true_type {};
template <class T, class = void>
struct has_user_format : std::false_type {};
template <class T>
struct has_user_format<T, decltype(tracetree_format(std::declval<ValueWriter&>(), std::declval<const T&>()))> : std::true_type {};
template <class T, class = void>
struct has_stream_output : std::false_type {};
template <class T>
struct has_stream_output<T, decltype(void(std::declval<std::ostream&>() << std::declval<const T&>()))> : std::true_type {};

template <class T>
void print_to_stream(std::ostream& out, const void* object) {
    out << *static_cast<const T*>(object);
}

template <class T>
void record_value(Arena& arena, const char* name, const T& value) {
    using U = std::decay_t<T>;
    ValueWriter text;
    if constexpr (std::is_array<T>::value) {  // a string literal: as the pointer it decays to
        const std::remove_extent_t<T>* pointer = value;
        record_value(arena, name, pointer);
        return;
    } else if constexpr (std::is_same<U, bool>::value) {
        text.append(value ? "true" : "false");
    } else if constexpr (std::is_same<U, char>::value) {
        text.quoted(&value, 1);
    } else if constexpr (std::is_integral<U>::value) {
        if constexpr (std::is_signed<U>::value)
            text.integer(value < 0 ? 0ull - static_cast<unsigned long long>(value) : static_cast<unsigned long long>(value), value < 0);
        else
            text.integer(value);
    } else if constexpr (std::is_enum<U>::value) {
        record_value(arena, name, static_cast<std::underlying_type_t<U>>(value));
        return;
    } else if constexpr (std::is_floating_point<U>::value) {
        arena.recorder->value(arena, name, static_cast<double>(value));
        return;
    } else if constexpr (std::is_same<U, std::nullptr_t>::value) {
        text.append("null");
    } else if constexpr (std::is_same<U, const char*>::value || std::is_same<U, char*>::value) {
        if (value == nullptr) text.append("null");
        else text.quoted(value, __builtin_strlen(value));
    } else if constexpr (has_data_size<U>::value) {
        text.quoted(value.data(), static_cast<std::size_t>(value.size()));
    } else if constexpr (std::is_pointer<U>::value) {
        const auto address = reinterpret_cast<std::uintptr_t>(value);
        text.append("0x");
        for (int shift = 60; shift >= 0; shift -= 4)
            if ((address >> shift) != 0 || shift == 0) text.append(&"0123456789abcdef"[(address >> shift) & 15], 1);
    } else if constexpr (has_user_format<U>::value) {
        tracetree_format(text, value);
    } else if constexpr (has_stream_output<U>::value) {
        arena.recorder->value(arena, name, &print_to_stream<U>, &value);
        return;
    } else {
        static_assert(has_stream_output<U>::value,
                      "TRACETREE_WATCH cannot format this type: declare "
                      "`void tracetree_format(tracetree::ValueWriter&, const T&)` next to it, or an operator<<");
    }
    arena.recorder->value(arena, name, text.data(), text.size(), text.cut());
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_CORE_RECORDER_HPP
