// The runtime's rooms on their own, without the process's recorder: the node pool's budget, a tree's
// nodes, folding and snapshot (runtime/tree.hpp), the site table's name budget (runtime/sites.hpp), the
// session word (core/recorder.hpp) and the clock's conversion (runtime/clock.hpp).
#include <tracetree/runtime/clock.hpp>
#include <tracetree/runtime/sites.hpp>
#include <tracetree/runtime/tree.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <mutex>
#include <string>

namespace rooms_test {

using namespace tracetree::detail;

// A call counted on `node` as the hot path counts it.
void count(NodeRecord& node, std::uint64_t ticks) {
    node.count.store(node.count.load() + 1);
    node.total.store(node.total.load() + ticks);
    if (ticks < node.min.load()) node.min.store(ticks);
    if (ticks > node.max.load()) node.max.store(ticks);
}

TEST_CASE("rooms: the chunk pool keeps the node budget") {
    ChunkPool pool;
    pool.max_total_nodes.store(kChunkMask + 1);  // one chunk
    Tree first(64, pool), second(64, pool);
    CHECK(first.prepare());
    CHECK_FALSE(second.prepare());
    CHECK(pool.nodes.load() == kChunkMask + 1);
}

TEST_CASE("rooms: a tree's children, folded into another tree, as values") {
    ChunkPool pool;
    SiteTable sites;
    const InternedSite* a = sites.intern(SiteKind::scope, "a", "f.cpp", 1, nullptr);
    const InternedSite* b = sites.intern(SiteKind::scope, "b", "f.cpp", 2, nullptr);
    CHECK(sites.intern(SiteKind::scope, "a", "f.cpp", 1, nullptr) == a);  // interned by content

    Arena arena;  // records into neither tree: only the trees change
    Tree capture(64, pool), into(64, pool);
    REQUIRE(capture.prepare());
    REQUIRE(into.prepare());
    const std::uint32_t node_a = capture.add(arena, 0, a);
    const std::uint32_t node_b = capture.add(arena, node_a, b);
    CHECK(capture.find(0, a) == node_a);
    CHECK(capture.find(node_a, b) == node_b);
    CHECK(capture.find(0, b) == 0);
    count(*capture.at(node_b), 10);
    count(*capture.at(node_a), 30);

    std::mutex messages;
    capture.fold_into(arena, into, 0, messages);
    capture.zero();
    count(*capture.at(node_a), 20);  // the same capture again: found where it was folded
    capture.fold_into(arena, into, 0, messages);
    CHECK(into.nodes() == 3);

    const auto roots = to_values(into, 1.0, nullptr);
    REQUIRE(roots.size() == 1);
    CHECK(roots[0].name == "a");
    CHECK(roots[0].count == 2);
    CHECK(roots[0].total == tracetree::Nanos(50));
    CHECK(roots[0].min == tracetree::Nanos(20));
    REQUIRE(roots[0].children.size() == 1);
    CHECK(roots[0].children[0].name == "b");
    CHECK(roots[0].children[0].count == 1);
}

TEST_CASE("rooms: run-time names stay within the byte budget") {
    SiteTable sites;
    const InternedSite* origin = sites.intern(SiteKind::scope, "origin", "f.cpp", 3, nullptr);
    sites.set_max_name_bytes(4096);  // one name of 1000 bytes (held twice, with its key), not two
    const std::string big(1000, 'x');
    const InternedSite* first = sites.dynamic(origin, big.data(), big.size(), true);
    REQUIRE(first != nullptr);
    CHECK(first->name == big);
    CHECK(sites.dynamic(origin, big.data(), big.size(), true) == first);  // known: no new bytes
    const std::string other(1000, 'y');
    CHECK(sites.dynamic(origin, other.data(), other.size(), true) == nullptr);
    CHECK(sites.dropped_names() == 1);
    CHECK(sites.dynamic(origin, "z", 1, false) == nullptr);  // no room for a node: not counted as a name dropped
    CHECK(sites.dropped_names() == 1);
}

TEST_CASE("rooms: the session word and the clock's conversion") {
    const std::uint64_t word = WatchWord::make(7, 0x5);
    CHECK(WatchWord::epoch(word) == 7);
    CHECK(WatchWord::mask(word) == 0x5);
    CHECK(WatchWord::make(7, 0) == std::uint64_t{7} << 32);
    CHECK(to_nanos(1000, 0.5) == tracetree::Nanos(500));
    CHECK(to_nanos(~std::uint64_t{0}, 1.0) == tracetree::Nanos::max());  // a clock that stepped back
}

// A fresh tree pays one lookup that misses per new node, so the child index must spread a parent's
// children whatever addresses the heap gave the sites. Sites 64 KiB apart (fake addresses, never read)
// at eight bases; a fan-out-10 tree of 4 levels, made depth-first as bench/snapshots.cpp makes it.
// A uniform hash at this load (11,111 nodes in 32,768 slots) finds a node in about 1.26 probes; the
// hash that shifted the parent up took 1.19 to 1.85, depending on the base (over 1.4 at three).
TEST_CASE("rooms: the child index spreads a tree's nodes wherever the sites are") {
    constexpr std::uintptr_t kStride = 65536;
    for (std::uintptr_t b = 0; b < 8; ++b) {
        const std::uintptr_t base = (0x555555554000u + b * 0x123456789000u) % (std::uintptr_t{1} << 47) & ~std::uintptr_t{0xfff};
        const auto site = [base](std::uintptr_t k) { return reinterpret_cast<const SiteInfo*>(base + kStride * k); };
        ChunkPool pool;
        Arena arena;
        Tree tree(11112, pool);
        REQUIRE(tree.prepare());
        const auto level = [&](const auto& self, std::uint32_t parent, std::uintptr_t depth) -> void {
            for (std::uintptr_t i = 0; i < 10; ++i) {
                const std::uint32_t node = tree.add(arena, parent, site(1 + depth * 10 + i));
                if (node != 0 && depth + 1 < 4) self(self, node, depth + 1);
            }
        };
        level(level, tree.add(arena, 0, site(0)), 0);
        REQUIRE(tree.nodes() == 11112);  // the root and 11,111 nodes: none refused
        std::uint64_t probes = 0, lost = 0;
        const std::uint32_t mask = tree.slot_mask();
        for (std::uint32_t i = 1; i < tree.nodes(); ++i) {
            std::uint32_t slot = child_slot(tree.at(i)->parent, tree.at(i)->site, mask);
            for (++probes; tree.slots()[slot] != i; slot = (slot + 1) & mask) ++probes;
            if (tree.find(tree.at(i)->parent, tree.at(i)->site) != i) ++lost;
        }
        INFO("base " << base << ", probes per node " << static_cast<double>(probes) / 11111.0);
        CHECK(lost == 0);
        CHECK(static_cast<double>(probes) / 11111.0 <= 1.4);
    }
}

}  // namespace rooms_test
