// Big trees: how fast a thread makes new nodes, and what a snapshot (tracetree::profile()) and its
// rendering cost per node while the thread that owns the tree keeps recording into it.
//
// A tree is a root, then fan-out 10 over 4 levels (11,111 nodes) or 5 levels (111,111 nodes): each
// node has at most 9 older siblings. The sites are made at run time (the names of a level's sites
// are shared by every parent on that level), so the scopes are detail::Scope guards on them, as the
// macros expand to.
#include "kernels.hpp"

#include <tracetree/control.hpp>
#include <tracetree/render.hpp>

#include <algorithm>
#include <atomic>
#include <deque>
#include <future>
#include <ostream>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include <time.h>  // clock_gettime(CLOCK_THREAD_CPUTIME_ID)

namespace bench {
namespace {

using tracetree::detail::Scope;
using tracetree::detail::Site;

constexpr int kFanOut = 10;
constexpr int kMaxLevels = 5;
constexpr const char* kSnapshotRoot = "tree.snapshot";

struct Sites {
    std::deque<std::string> names;  // a deque: the sites point into it and it never moves them
    std::deque<Site> roots;         // tree.0 .. tree.4 for new nodes, then the snapshot trees' root
    std::deque<Site> levels;        // kMaxLevels * kFanOut
    Sites() {
        for (int t = 0; t < kMaxNewTrees; ++t) add(roots, "tree." + std::to_string(t));
        add(roots, kSnapshotRoot);
        for (int l = 0; l < kMaxLevels; ++l)
            for (int i = 0; i < kFanOut; ++i) add(levels, "L" + std::to_string(l) + "." + std::to_string(i));
    }
    void add(std::deque<Site>& into, std::string name) {
        names.push_back(std::move(name));
        into.emplace_back(names.back().c_str(), __FILE__, static_cast<int>(into.size()) + 1,
                          tracetree::detail::SiteKind::scope);
    }
};
Sites& sites() {
    static Sites s;
    return s;
}

void build_level(int level, int levels) {
    for (int i = 0; i < kFanOut; ++i) {
        const Scope scope(sites().levels[static_cast<std::size_t>(level * kFanOut + i)]);
        if (level + 1 < levels) build_level(level + 1, levels);
    }
}
// noinline: scripts/bench counts the instructions of this function alone for new nodes.
[[gnu::noinline]] void build_trees(std::size_t first_root, std::size_t roots, int levels) {
    for (std::size_t t = first_root; t < first_root + roots; ++t) {
        const Scope root(sites().roots[t]);
        build_level(0, levels);
    }
}
int levels_for(std::uint64_t nodes) { return nodes == kLargeTree ? 5 : 4; }

std::uint64_t g_new_trees[kMaxNewTrees] = {};  // new-node runs that built tree.t

// Nodes below and including `node`, and whether each of them counted exactly `count` calls.
std::uint64_t nodes_with_count(const tracetree::Node& node, std::uint64_t count, bool& all) {
    all = all && node.count == count && node.dropped == 0;
    std::uint64_t nodes = 1;
    for (const tracetree::Node& child : node.children) nodes += nodes_with_count(child, count, all);
    return nodes;
}
std::uint64_t nodes_in(const tracetree::Node& node) {
    std::uint64_t nodes = 1;
    for (const tracetree::Node& child : node.children) nodes += nodes_in(child);
    return nodes;
}
std::uint64_t nodes_in(const tracetree::Profile& p) {
    std::uint64_t nodes = 0;
    for (const tracetree::ThreadProfile& t : p.threads)
        for (const tracetree::Node& root : t.roots) nodes += nodes_in(root);
    return nodes;
}
bool tree_exact(const tracetree::Profile& p, const std::string& thread, std::size_t root, std::uint64_t nodes,
                std::uint64_t count) {
    const tracetree::Node* node = find_root(p, thread, sites().names[root]);
    bool all = node != nullptr;
    return node != nullptr && nodes_with_count(*node, count, all) == nodes && all;
}

}  // namespace

std::uint64_t kernel_new_nodes(std::uint64_t trees, Timer& timer) {
    trees = std::min<std::uint64_t>(std::max<std::uint64_t>(trees, 1), kMaxNewTrees);
    std::thread worker([&] {
        tracetree::set_thread_name("bench-new-node");  // makes the thread's tree before the clock starts
        timer.start();
        build_trees(0, trees, 4);
        timer.stop();
    });
    worker.join();
    for (std::uint64_t t = 0; t < trees; ++t) ++g_new_trees[t];
    return trees * kSmallTree;
}

namespace {

// Where render() writes in the benchmark: bytes counted, not kept, so that the figure is the
// renderer's and not the growth of a string holding megabytes (on this machine, fresh pages for a
// growing std::ostringstream cost more than the rendering itself).
class CountingBuffer : public std::streambuf {  // a 4 KiB buffer, as a file's stream has, emptied uncopied
public:
    CountingBuffer() { setp(buffer_, buffer_ + sizeof buffer_); }
    std::uint64_t bytes() const noexcept { return bytes_ + static_cast<std::uint64_t>(pptr() - pbase()); }

protected:
    int_type overflow(int_type c) override {
        bytes_ += static_cast<std::uint64_t>(pptr() - pbase());
        setp(buffer_, buffer_ + sizeof buffer_);
        if (!traits_type::eq_int_type(c, traits_type::eof())) sputc(traits_type::to_char_type(c));
        return traits_type::not_eof(c);
    }

private:
    char buffer_[4096];
    std::uint64_t bytes_ = 0;
};

}  // namespace

std::uint64_t thread_cpu_ns() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<std::uint64_t>(now.tv_sec) * 1000000000u + static_cast<std::uint64_t>(now.tv_nsec);
}

std::uint64_t snapshot_limit() { return 131072; }  // a thread's max_nodes that holds the large tree

SnapshotRun run_snapshots(std::uint64_t nodes, std::uint64_t profiles, std::uint64_t renders, bool recording) {
    const int levels = levels_for(nodes);
    const std::string thread = "bench-snapshot-" + std::to_string(nodes);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> walks{0};
    std::promise<void> built, stopped, release;
    std::shared_future<void> released = release.get_future().share();
    std::thread worker([&] {
        tracetree::set_thread_name(thread);
        build_trees(kMaxNewTrees, 1, levels);
        walks.store(1);
        built.set_value();
        while (recording && !stop.load(std::memory_order_relaxed)) {  // records while the snapshots are taken
            build_trees(kMaxNewTrees, 1, levels);
            walks.fetch_add(1, std::memory_order_relaxed);
        }
        stopped.set_value();
        released.wait();  // a live thread: an exited one is kept as values, which a snapshot only copies
    });
    built.get_future().wait();

    SnapshotRun run;
    bool complete = true, rendered = true;
    for (std::uint64_t s = 0; s < profiles; ++s) {
        Timer timer;
        std::uint64_t cpu = thread_cpu_ns();
        timer.start();
        const tracetree::Profile p = tracetree::profile();
        timer.stop();
        run.profile_cpu_ns.push_back(static_cast<double>(thread_cpu_ns() - cpu));
        run.profile_ns.push_back(timer.ns());
        if (s == 0 || s + 1 == profiles) {  // not each: callgrind counts the check with the snapshot
            const tracetree::Node* root = find_root(p, thread, kSnapshotRoot);
            complete = complete && root != nullptr && nodes_in(*root) == nodes;
            if (s == 0) run.nodes = nodes_in(p);
        }
        for (std::uint64_t r = 0; r < renders; ++r) {
            CountingBuffer counted;
            std::ostream out(&counted);
            cpu = thread_cpu_ns();
            timer.start();
            tracetree::render(out, p, tracetree::RenderOptions().colour(tracetree::Colour::never));
            timer.stop();
            run.render_cpu_ns.push_back(static_cast<double>(thread_cpu_ns() - cpu));
            run.render_ns.push_back(timer.ns());
            rendered = rendered && out && counted.bytes() > 20 * nodes;
        }
    }
    stop.store(true);
    stopped.get_future().wait();
    const tracetree::Profile after = tracetree::profile();
    release.set_value();
    worker.join();
    tracetree::reset();  // forgets the exited thread's tree, which every later profile() would copy
    check(complete, thread + ": every snapshot holds the whole tree");
    check(rendered, thread + ": every render wrote a line per node");
    check(tree_exact(after, thread, kMaxNewTrees, nodes, walks.load()),
          thread + ": every node counted every walk of the tree, snapshots or not");
    return run;
}

bool check_snapshots(const tracetree::Profile& p) {
    bool ok = true;
    for (std::size_t t = 0; t < kMaxNewTrees; ++t)
        if (g_new_trees[t] != 0)
            ok &= check(tree_exact(p, "bench-new-node", t, kSmallTree, g_new_trees[t]),
                        "every scope of the new-node trees recorded, each node once per build");
    return ok;
}

}  // namespace bench
