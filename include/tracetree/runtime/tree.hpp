// tracetree tree: a call tree's storage, and its snapshot as values. SPDX-License-Identifier: MIT
//
// A thread records into its own Tree, or into a capture's while a trace session watches an
// invocation; the capture's tree is then folded into the tree it was started from. Nodes live in
// chunks from one process-wide pool that holds the node budget (max_total_nodes).
#ifndef TRACETREE_RUNTIME_TREE_HPP
#define TRACETREE_RUNTIME_TREE_HPP

#include "clock.hpp"
#include "sites.hpp"
#include "../values.hpp"

#include <algorithm>      // std::min
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>            // std::nothrow
#include <string>
#include <unordered_map>  // throw messages and watched values by node
#include <utility>
#include <vector>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// The chunks of nodes of every tree in the process. `nodes` counts those trees hold, against
// max_total_nodes. A freed tree's chunks are kept for the next tree, up to kSpare: threads come and
// go in pools, and a fresh chunk's pages each cost a page fault, more than making its 256 nodes.
class ChunkPool {
public:
    static constexpr std::size_t kSpare = 256;  // 65,536 nodes, 4 MiB: a default thread's whole tree

    ChunkPool() = default;
    ChunkPool(const ChunkPool&) = delete;
    ChunkPool& operator=(const ChunkPool&) = delete;
    ~ChunkPool() {  // the recorder's lives for ever; a test's goes with its trees
        for (NodeRecord* chunk : spare_) delete[] chunk;
    }

    // A chunk within the node budget, or null.
    NodeRecord* take() noexcept {
        if (nodes.fetch_add(kChunkMask + 1) + kChunkMask + 1 > max_total_nodes.load()) {
            nodes.fetch_sub(kChunkMask + 1);
            return nullptr;
        }
        NodeRecord* chunk = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!spare_.empty()) {
                chunk = spare_.back();
                spare_.pop_back();
            }
        }
        if (chunk == nullptr) {
            chunk = new (std::nothrow) NodeRecord[kChunkMask + 1];
            if (chunk == nullptr) nodes.fetch_sub(kChunkMask + 1);
            return chunk;
        }
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
    std::atomic<std::uint64_t> max_total_nodes{Limits{}.max_total_nodes};

private:
    std::mutex mutex_;
    std::vector<NodeRecord*> spare_;
};

// Nodes in chunks that never move (snapshot readers index them while the owner appends), a child
// index for the owner, and what the limits cut. A thread's own tree, or a capture's.
class Tree {
public:
    Tree(std::uint32_t max_nodes, ChunkPool& chunk_pool)
        : capacity(max_nodes), chunk_table_(new NodeRecord*[(max_nodes + kChunkMask) >> kChunkBits]()),
          pool_(chunk_pool), slots_(64, 0) {}
    ~Tree() {
        for (std::uint32_t i = 0; i < chunk_count_; ++i) pool_.give(chunk_table_[i]);
        pool_.nodes.fetch_sub(std::uint64_t{chunk_count_} << kChunkBits);
    }
    Tree(const Tree&) = delete;
    Tree& operator=(const Tree&) = delete;

    NodeRecord* at(std::uint32_t index) const noexcept { return &chunk_table_[index >> kChunkBits][index & kChunkMask]; }
    std::uint32_t nodes() const noexcept { return size_.load(std::memory_order_acquire); }
    bool full() const noexcept { return nodes() >= capacity; }

    // Budget and first chunk (the root) of a new tree; false when the budget is spent.
    bool prepare() noexcept {
        if (!grow()) return false;
        size_.store(1, std::memory_order_release);
        return true;
    }

    // Where an arena recording into this tree reads its nodes and its child index.
    NodeRecord* const* chunks() const noexcept { return chunk_table_.get(); }
    const std::uint32_t* slots() const noexcept { return slots_.data(); }
    std::uint32_t slot_mask() const noexcept { return static_cast<std::uint32_t>(slots_.size() - 1); }
    std::uint32_t find(std::uint32_t parent, const SiteInfo* site) const noexcept {
        return find_child(chunks(), slots(), slot_mask(), parent, site);
    }

    // A new child of `parent` (owner only); 0 when a limit is reached. `arena` records into some tree:
    // into this one, it follows the child index when that grows.
    std::uint32_t add(Arena& arena, std::uint32_t parent_index, const SiteInfo* site) noexcept {
        const std::uint32_t index = size_.load(std::memory_order_relaxed);
        if (index >= capacity) return 0;
        if ((index >> kChunkBits) == chunk_count_ && !grow()) return 0;
        try {
            if (2 * (index + 1) > slots_.size()) rehash(2 * slots_.size());
        } catch (...) {
            return 0;
        }
        NodeRecord* parent = at(parent_index);
        NodeRecord* node = at(index);
        node->site = site;
        node->parent = parent_index;
        node->index = index;
        parent->last_child = index;
        insert_slot(index);
        size_.store(index + 1, std::memory_order_release);
        if (arena.chunks == chunks()) {
            arena.slots = slots();
            arena.slot_mask = slot_mask();
        }
        return index;
    }

    // Every counter back to nothing; the nodes stay, for the calls to come.
    void zero() noexcept {
        for (std::uint32_t i = 0, n = nodes(); i < n; ++i) {
            NodeRecord* node = at(i);
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
        dropped_depth.store(0, std::memory_order_relaxed);
        dropped_nodes.store(0, std::memory_order_relaxed);
    }

    // Adds this finished capture's tree to `into` under node `under`, as if it had been recorded
    // there (owner only; `messages_lock` guards `into.messages`). Each node remembers its
    // counterpart, so a capture repeated at the same place costs a pass over its nodes.
    TRACETREE_DETAIL_INLINE void fold_into(Arena& arena, Tree& into, std::uint32_t under, std::mutex& messages_lock) noexcept {
        const std::uint32_t size = nodes();
        if (folded_tree_ != &into || folded_under_ != under) folded_into_.clear();
        if (folded_into_.size() != size) {
            try {
                folded_into_.resize(size, 0);
            } catch (...) {
                return;  // out of memory: the capture's counts are lost from the profile
            }
        }
        folded_tree_ = &into;
        folded_under_ = under;
        folded_into_[0] = under;
        for (std::uint32_t i = 1; i < size; ++i) {
            const NodeRecord& source = *at(i);
            const std::uint64_t count = source.count.load(std::memory_order_relaxed);
            const std::uint32_t dropped = source.dropped.load(std::memory_order_relaxed);
            // A hand-off's path (no calls of its own) is folded for what is below it; a node without
            // calls (a coroutine's co-scope still open) only when something below it has some.
            if (count == 0 && dropped == 0 && interned(source.site).continues == nullptr) continue;
            const std::uint32_t target_index = folded_into_[i] != 0 ? folded_into_[i] : fold_node(arena, into, i);
            if (target_index == 0) {
                bump_saturating(into.at(nearest_folded(i))->dropped, count);
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
            if (messages.empty()) continue;
            const auto message = messages.find(i);
            if (message != messages.end()) {
                std::lock_guard<std::mutex> lock(messages_lock);
                try {
                    into.messages[target_index] = message->second;
                } catch (...) {
                }
            }
        }
        if (const std::uint64_t depth = dropped_depth.load(std::memory_order_relaxed)) bump(into.dropped_depth, depth);
        if (const std::uint64_t cut = dropped_nodes.load(std::memory_order_relaxed)) bump(into.dropped_nodes, cut);
    }

    const std::uint32_t capacity;

private:
    bool grow() noexcept {  // one more chunk, within the process-wide node budget
        NodeRecord* chunk = pool_.take();
        if (chunk == nullptr) return false;
        chunk_table_[chunk_count_++] = chunk;
        return true;
    }
    void insert_slot(std::uint32_t index) noexcept {
        const std::uint32_t mask = slot_mask();
        const NodeRecord* node = at(index);
        std::uint32_t slot = child_slot(node->parent, node->site, mask);
        while (slots_[slot] != 0) slot = (slot + 1) & mask;
        slots_[slot] = index;
    }
    void rehash(std::size_t size) {
        // Allocated before the old index is let go: libc++'s assign() frees it first, so a failed
        // allocation left the arena reading freed slots (found by the out-of-memory test with libc++).
        std::vector<std::uint32_t> grown(size, 0);
        slots_.swap(grown);
        for (std::uint32_t i = 1, n = size_.load(std::memory_order_relaxed); i < n; ++i) insert_slot(i);
    }
    // Node i's node in `into`, made with those of its ancestors that were skipped; 0: `into` is full.
    std::uint32_t fold_node(Arena& arena, Tree& into, std::uint32_t i) noexcept {
        while (folded_into_[i] == 0) {
            std::uint32_t top = i;  // the outermost node on the way up that is not folded yet
            while (at(top)->parent != 0 && folded_into_[at(top)->parent] == 0) top = at(top)->parent;
            const std::uint32_t parent = at(top)->parent == 0 ? folded_under_ : folded_into_[at(top)->parent];
            std::uint32_t index = into.find(parent, at(top)->site);
            if (index == 0) index = into.add(arena, parent, at(top)->site);
            if (index == 0) return 0;
            folded_into_[top] = index;
        }
        return folded_into_[i];
    }
    std::uint32_t nearest_folded(std::uint32_t index) const noexcept {
        while (index != 0 && folded_into_[index] == 0) index = at(index)->parent;
        return folded_into_[index];
    }

    const std::unique_ptr<NodeRecord*[]> chunk_table_;
    std::uint32_t chunk_count_ = 0;
    ChunkPool& pool_;
    std::atomic<std::uint32_t> size_{0};
    std::vector<std::uint32_t> slots_;  // owner only: the child index (Arena::find); a power of two, never empty
    // A capture's tree: each node's counterpart in the tree it was last folded into.
    std::vector<std::uint32_t> folded_into_;
    const Tree* folded_tree_ = nullptr;
    std::uint32_t folded_under_ = 0;

public:  // last: what add() reads shares a cache line with `capacity`
    std::atomic<std::uint64_t> dropped_depth{0}, dropped_nodes{0};
    std::unordered_map<std::uint32_t, std::string> messages;  // throw nodes: what() of the last throw
    // TRACETREE_WATCH values by node, in captures that asked for them.
    std::unordered_map<std::uint32_t, std::vector<std::pair<std::string, std::string>>> values;
};

// An arena's nodes as values, children in order of first call. Nodes with no finished call and
// nothing finished below them (zeroed by a reset, or entered and still running) are left out.
// Counters are read while the owner writes them: totals are clamped so that a parent is never below
// its children, and min never above max.
//
// Each Node is made once, in its parent's `children`, reserved to size from the counters first: no
// Node is moved, and no scratch copy of the tree is allocated (fresh memory costs a page fault per
// page, which at 200 bytes a Node was most of a snapshot's time).
// `thread`: the name of the tree's thread, which the innermost node of a hand-off's path names.
inline std::vector<Node> to_values(const Tree& tree, double ratio,
                                   const std::unordered_map<std::uint32_t, std::string>* messages,
                                   const decltype(Tree::values)* values = nullptr, const std::string& thread = {}) {
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
        node.continued = site.continues != nullptr;
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
            bool path_below = false;
            for (const Node& child : node.children) {
                children_total += child.total;
                path_below = path_below || child.continued;
            }
            if ((node.count != 0 && node.total < children_total) || node.continued) node.total = children_total;
            if (node.continued && !path_below) node.continued_on = thread;
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

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_TREE_HPP
