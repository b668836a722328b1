// tracetree hand-offs, the runtime's side: the path here() captures, entered by a Continue on another
// thread and left again, and a trace's capture kept until the work it handed off is done.
// SPDX-License-Identifier: MIT
//
// A path's nodes are shadows of its call sites (SiteTable::continued), so that the worker's calls
// land under them without counting calls made elsewhere; a `[queued]` node beside the worker's calls
// holds the wait. The public side is handoff.hpp; gather.hpp holds what a gathered trace keeps.
#ifndef TRACETREE_DETAIL_HANDOFFS_HPP
#define TRACETREE_DETAIL_HANDOFFS_HPP

#include "clock.hpp"
#include "gather.hpp"
#include "handoff.hpp"
#include "sites.hpp"
#include "thread_state.hpp"
#include "tree.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>  // std::nothrow
#include <vector>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

class Handoffs {
public:
    Handoffs(const Clock& clock, SiteTable& sites, ChunkPool& chunks) : clock_(clock), sites_(sites), chunks_(chunks) {}

    // here(): the thread's open scopes (the outermost kMaxDepth of them) and the time.
    void capture(ThreadState& state, HandoffPath& path) noexcept {
        if (state.retired.load()) return;
        // The outermost levels are kept: counted first, then the innermost ones past the limit skipped.
        std::uint32_t open = 0;
        state.open_scopes([&](const SiteInfo*) { ++open; });
        std::uint32_t skip = open > HandoffPath::kMaxDepth ? open - HandoffPath::kMaxDepth : 0;
        path.cut = skip != 0;
        path.depth = open - skip;
        std::uint32_t at = path.depth;
        state.open_scopes([&](const SiteInfo* site) {
            if (skip != 0) {
                --skip;
                return;
            }
            const InternedSite& known = interned(site);  // a path continued here is the original's
            path.sites[--at] = known.continues != nullptr ? known.continues : &known;
        });
        if ((state.capture_depth != 0 || state.capture_waits()) && !path.cut) gather_into(state, path);
        path.thread_id = state.id;
        path.fake_clock = clock_.is_test(std::memory_order_relaxed);
        path.tick = clock_.now(path.fake_clock);
        path.valid = true;
    }

    // Continue: the path entered in this thread's tree, the queue wait counted; false: nothing entered.
    bool enter(ThreadState& state, const HandoffPath& path, Continuation& saved) noexcept {
        Arena& arena = state.arena;
        if (state.retired.load()) return false;
        // Inside a captured invocation, a scope cut by the node limit, or another trace's continued work
        // (its own tree, which a second one would split the arena from), the work stays where it runs.
        if (state.capture_depth != 0 || state.capture_waits() || arena.cur == &state.overflow ||
            state.current != state.main.get())
            return false;
        state.apply_pending_reset();
        const InternedSite* queued = queued_site();
        if (queued == nullptr) return false;
        saved.arena = &arena;
        saved.cur = arena.cur;
        saved.cur_index = arena.cur_index;
        saved.depth = arena.depth;
        Tree* own = path.gather != nullptr ? gather_tree(state) : nullptr;  // for the trace it came from
        if (own != nullptr) {
            retain(path.gather);
            saved.gather = path.gather;
            saved.tree = own;
            state.current = own;
        }
        state.point_at(*state.current, 0);
        arena.depth = 0;
        const std::uint32_t max_depth = state.max_depth.load(std::memory_order_relaxed);
        // Levels that do not fit (the depth or node limit) are left off: the work lands higher up.
        for (std::uint32_t level = 0; level < path.depth && arena.depth + 1 < max_depth; ++level) {
            const InternedSite* shadow = sites_.continued(path.sites[level]);
            if (shadow == nullptr || !enter_node(state, shadow)) break;
        }
        std::uint32_t index = arena.find(arena.cur_index, queued);
        if (index == 0) index = state.current->add(arena, arena.cur_index, queued);
        if (index != 0) {
            const std::uint64_t now = clock_.now(path.fake_clock);
            const std::uint64_t waited = now > path.tick ? now - path.tick : 0;  // another core's counter may lag
            NodeRecord& node = *arena.at(index);
            bump(node.count);
            bump(node.total, waited);
            if (waited < node.min.load(std::memory_order_relaxed)) node.min.store(waited, std::memory_order_relaxed);
            if (waited > node.max.load(std::memory_order_relaxed)) node.max.store(waited, std::memory_order_relaxed);
        } else {
            state.drop(1);
        }
        return true;
    }

    // Continue's end: the arena put back; a gathered trace's part handed to it and folded here.
    void leave(Continuation& saved) noexcept {
        Arena& arena = *saved.arena;
        ThreadState& state = ThreadState::of(arena);
        std::unique_ptr<Tree> own(static_cast<Tree*>(saved.tree));
        if (state.retired.load()) return release(saved.gather);
        if (own) {  // the trace's copy, then into the thread's tree as if recorded there
            auto& gather = static_cast<Gather&>(*saved.gather);
            try {
                std::vector<Node> roots = to_values(*own, clock_.ns_per_tick(), &own->messages, nullptr, state.thread_name());
                std::lock_guard<std::mutex> lock(gather.mutex);
                for (Node& root : roots) gather.parts.push_back(std::move(root));
            } catch (...) {  // out of memory: the trace goes without this part
            }
            own->fold_into(arena, *state.main, 0, state.mutex);
            state.current = state.main.get();
            state.point_at(*state.main, saved.cur_index);
        }
        arena.cur = saved.cur;
        arena.cur_index = saved.cur_index;
        arena.depth = saved.depth;
        release(saved.gather);  // last: it may deliver the trace, whose callbacks may record here
    }

    // The last reference to a gathered capture is gone: its trace with the continued work grafted
    // under it; false when no session wanted the capture.
    static bool finish(Gather& gather) {
        if (!gather.wanted) return false;
        for (const Node& part : gather.parts) graft(gather.trace, part, gather.level);
        fit_totals(gather.trace.root);
        return true;
    }

private:
    // The child of the current node for `site`, made current; false when the tree is full.
    static bool enter_node(ThreadState& state, const SiteInfo* site) noexcept {
        Arena& arena = state.arena;
        std::uint32_t index = arena.find(arena.cur_index, site);
        if (index == 0) index = state.current->add(arena, arena.cur_index, site);
        if (index == 0) return false;
        arena.cur = arena.at(index);
        arena.cur_index = index;
        ++arena.depth;
        return true;
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
        retain(capture.gather);
        path.gather = capture.gather;
        path.gather_level = path.depth - inside;
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
    const InternedSite* queued_site() noexcept {
        if (const InternedSite* known = queued_.load(std::memory_order_acquire)) return known;
        try {
            const InternedSite* made = sites_.intern(SiteKind::scope, "[queued]", "", 0, nullptr);
            queued_.store(made, std::memory_order_release);
            return made;
        } catch (...) {
            return nullptr;
        }
    }

    const Clock& clock_;
    SiteTable& sites_;
    ChunkPool& chunks_;
    std::atomic<const InternedSite*> queued_{nullptr};  // the `[queued]` node's site
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_DETAIL_HANDOFFS_HPP
