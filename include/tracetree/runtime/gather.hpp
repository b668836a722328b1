// tracetree gather: a trace capture that handed work to other threads, kept until that work is done.
// SPDX-License-Identifier: MIT
//
// here() inside a capture makes the capture's Gather (once) and refers to it; each Continue of that
// Here records into a tree of its own and adds its values here when it ends. The capture's end stores
// its trace instead of delivering it; the last reference (a Here, a running Continue, the capture)
// grafts the continued work under the trace's root and delivers it (RuntimeImpl::gathered).
#ifndef TRACETREE_RUNTIME_GATHER_HPP
#define TRACETREE_RUNTIME_GATHER_HPP

#include "../core/handoff.hpp"
#include "session_registry.hpp"
#include "../values.hpp"

#include <algorithm>  // std::min
#include <memory>
#include <mutex>
#include <vector>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

struct Gather : GatherRef {
    std::mutex mutex;
    std::uint32_t level = 0;  // the capture's root in the paths: HandoffPath::sites[level]
    bool wanted = false;  // the capture has ended, and a session wanted it: `trace` holds it
    Trace trace;
    std::vector<std::shared_ptr<SessionState>> sessions;
    std::vector<Node> parts;  // each Continue's roots (the path's first level), as it ended
    // A co-scope's trace (coroutine.hpp): the sessions of the slots in `mask` that it was started for,
    // and its root as each resumption recorded it, merged into one when delivered.
    bool co_scope = false;
    std::uint32_t mask = 0;
    std::vector<Node> own;
};

// A Continue's part, before it joins the trace: what ran under its path ran beside the calls that
// handed it off (a path's node stands for those calls), so it is marked parallel.
inline void mark_parallel(Node& node) {
    for (Node& child : node.children) {
        if (node.continued && !child.continued) child.parallel = true;
        mark_parallel(child);
    }
}

// A trace's totals after the graft: a call's total is its wall time, without the work continued under
// it on other threads (a further hop's path merged into it) and never below its children that ran in it.
inline Nanos wall_totals(Node& node) {
    if (!node.continued && node.continued_total.count() != 0) {
        node.total -= std::min(node.total, node.continued_total);
        node.continued_total = Nanos{0};
    }
    Nanos children{0};
    for (Node& child : node.children) {
        const Nanos total = wall_totals(child);
        if (!child.parallel) children += total;
    }
    if (node.kind == NodeKind::call && node.total < children) node.total = children;
    return node.total;
}

// Folds what a Continue recorded below the capture's root into the trace, as if recorded there.
inline void graft(Trace& trace, const Node& part, std::uint32_t level) {
    const Node* node = &part;
    for (std::uint32_t at = 0; at < level && node != nullptr; ++at) {
        const Node* next = nullptr;
        for (const Node& child : node->children)
            if (child.continued) next = &child;  // the path: one continued child a level
        node = next;
    }
    if (node == nullptr || !node->continued) return;
    merge_all(trace.root.children, node->children);
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_GATHER_HPP
