// The child lookup (core/recorder.hpp, Arena::enter): whatever the order in which a parent calls its
// call sites, each (parent, site) pair is one node and every call is counted on it, exactly.
//
// The sites are made at run time, as many as a test needs, each with its own name, and entered with
// detail::Scope, which is what TRACETREE_SCOPE expands to. Every test records on a thread of its own
// (a fresh tree) and reads that thread's profile before the thread ends. The real clock stays: a
// test clock would send every scope to the slow path and the fast lookup would go untested.
#include "support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pthread.h>

using test::find_thread;
using test::recorded_by;

namespace {

struct Sites {
    std::deque<std::string> names;  // the sites point into it; a deque never moves them
    std::deque<tracetree::detail::Site> sites;
    Sites(const std::string& prefix, int count) {
        for (int i = 0; i < count; ++i) {
            names.push_back(prefix + std::to_string(i));
            sites.emplace_back(names.back().c_str(), __FILE__, i + 1, tracetree::detail::SiteKind::scope);
        }
    }
    tracetree::detail::Site& operator[](int i) { return sites[static_cast<std::size_t>(i)]; }
};

const tracetree::Node* child_named(const std::vector<tracetree::Node>& nodes, const std::string& name) {
    for (const tracetree::Node& node : nodes)
        if (node.name == name) return &node;
    return nullptr;
}

// As child_named, for a test that reads the node: a missing one fails the test case, naming it.
const tracetree::Node& named(const std::vector<tracetree::Node>& nodes, const std::string& name) {
    const tracetree::Node* node = child_named(nodes, name);
    REQUIRE_MESSAGE(node != nullptr, "no node named '" << name << "'");
    return *node;
}

// Every site of `sites` has exactly one node among `nodes`, which counted calls[i]; nothing else is there.
void check_counts(const std::vector<tracetree::Node>& nodes, const Sites& sites, const std::vector<std::uint64_t>& calls) {
    std::size_t called = 0;
    for (std::size_t i = 0; i < calls.size(); ++i) {
        if (calls[i] == 0) continue;
        ++called;
        const tracetree::Node* node = child_named(nodes, sites.names[i]);
        INFO("site ", sites.names[i]);
        REQUIRE(node != nullptr);
        CHECK(node->count == calls[i]);
        CHECK(node->dropped == 0);
        CHECK(std::count_if(nodes.begin(), nodes.end(), [&](const tracetree::Node& n) { return n.name == node->name; }) == 1);
    }
    CHECK(nodes.size() == called);
}

std::vector<int> ascending(int count) {
    std::vector<int> order(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) order[static_cast<std::size_t>(i)] = i;
    return order;
}

}  // namespace

TEST_CASE("each site counts every call whatever the order: in order, reversed, shuffled, alternating") {
    constexpr int kSites = 50;
    Sites parents("order ", 4), sites("site ", kSites);
    std::vector<std::vector<std::uint64_t>> calls(4, std::vector<std::uint64_t>(kSites, 0));
    std::mt19937 random(12345);
    const auto thread = recorded_by("lookup-orders", [&] {
        for (int pass = 0; pass < 20; ++pass) {
            std::vector<int> in_order = ascending(kSites), reversed(in_order.rbegin(), in_order.rend()), shuffled = in_order;
            std::shuffle(shuffled.begin(), shuffled.end(), random);  // a new order every pass
            const std::vector<int>* orders[4] = {&in_order, &reversed, &shuffled, pass % 2 == 0 ? &in_order : &reversed};
            for (int p = 0; p < 4; ++p) {
                const tracetree::detail::Scope parent(parents[p]);
                for (const int i : *orders[p]) {
                    const tracetree::detail::Scope scope(sites[i]);
                    ++calls[static_cast<std::size_t>(p)][static_cast<std::size_t>(i)];
                }
            }
        }
        for (const int i : {7, 7, 7, 3, 7, 3, 3}) {  // repeats, straight under the thread's root
            const tracetree::detail::Scope scope(sites[i]);
        }
    });
    REQUIRE(thread.roots.size() == 4 + 2);
    for (int p = 0; p < 4; ++p) {
        INFO("order ", p);
        const tracetree::Node* parent = child_named(thread.roots, parents.names[static_cast<std::size_t>(p)]);
        REQUIRE(parent != nullptr);
        CHECK(parent->count == 20);
        check_counts(parent->children, sites, calls[static_cast<std::size_t>(p)]);
    }
    CHECK(named(thread.roots, "site 7").count == 4);
    CHECK(named(thread.roots, "site 3").count == 3);
    CHECK(thread.dropped_nodes == 0);
}

TEST_CASE("new sites interleaved with known ones, 1,000 siblings, each with a child of the same site") {
    constexpr int kSites = 1000;
    Sites parent("parent ", 1), sites("sibling ", kSites), leaf("leaf ", 1);
    std::vector<std::uint64_t> calls(kSites, 0);
    std::mt19937 random(678);
    const auto thread = recorded_by("lookup-siblings", [&] {
        const tracetree::detail::Scope outer(parent[0]);
        for (int pass = 1; pass <= 100; ++pass) {  // pass p calls the first 10 p sites: 10 of them new, mixed in
            std::vector<int> order = ascending(10 * pass);
            std::shuffle(order.begin(), order.end(), random);
            for (const int i : order) {
                const tracetree::detail::Scope scope(sites[i]);
                ++calls[static_cast<std::size_t>(i)];
                if (i % 3 == 0) {  // one site under many parents: a node under each
                    const tracetree::detail::Scope below(leaf[0]);
                }
            }
        }
    });
    REQUIRE(thread.roots.size() == 1);
    const tracetree::Node& outer = thread.roots[0];
    check_counts(outer.children, sites, calls);
    for (const tracetree::Node& sibling : outer.children) {
        const int i = std::stoi(sibling.name.substr(sibling.name.find(' ') + 1));
        INFO("below ", sibling.name);
        if (i % 3 != 0) {
            CHECK(sibling.children.empty());
            continue;
        }
        REQUIRE(sibling.children.size() == 1);
        CHECK(sibling.children[0].name == "leaf 0");
        CHECK(sibling.children[0].count == sibling.count);
    }
    CHECK(thread.dropped_nodes == 0);
}

TEST_CASE("the node made after the current one, or after the child entered last, is taken only when it is a child") {
    Sites sites("made after ", 3);  // 0: the parent, 1: its child, 2: a site called in and out of it
    // The parent's node, then the root's node of site 2 right after it: inside the parent, the node
    // after the current one is of the site called there, under another parent.
    const auto after_current = recorded_by("lookup-after-current", [&] {
        { const tracetree::detail::Scope parent(sites[0]); }
        { const tracetree::detail::Scope outside(sites[2]); }
        const tracetree::detail::Scope parent(sites[0]);
        const tracetree::detail::Scope inside(sites[2]);
    });
    REQUIRE(after_current.roots.size() == 2);
    const tracetree::Node* first = child_named(after_current.roots, "made after 0");
    REQUIRE(first != nullptr);
    CHECK(first->count == 2);
    REQUIRE(first->children.size() == 1);
    CHECK(first->children[0].name == "made after 2");
    CHECK(first->children[0].count == 1);
    CHECK(named(after_current.roots, "made after 2").count == 1);
    // The parent's node and its child's, then the root's node of site 2: inside the parent, after its
    // child, the node after the child entered last is of the site called next, under another parent.
    const auto after_hint = recorded_by("lookup-after-hint", [&] {
        {
            const tracetree::detail::Scope parent(sites[0]);
            const tracetree::detail::Scope child(sites[1]);
        }
        { const tracetree::detail::Scope outside(sites[2]); }
        const tracetree::detail::Scope parent(sites[0]);
        { const tracetree::detail::Scope child(sites[1]); }
        const tracetree::detail::Scope inside(sites[2]);
    });
    REQUIRE(after_hint.roots.size() == 2);
    const tracetree::Node* second = child_named(after_hint.roots, "made after 0");
    REQUIRE(second != nullptr);
    CHECK(second->count == 2);
    check_counts(second->children, sites, {0, 2, 1});
    CHECK(named(after_hint.roots, "made after 2").count == 1);
}

TEST_CASE("the node after the one left last is taken after a scope the runtime ended, and after a capture") {
    Sites sites("left last ", 4);  // 0: the parent, 1: a leaf traced below its min cost, 2: the next leaf, 3: in 2
    const auto call_all = [&](bool inside_next) {
        const tracetree::detail::Scope parent(sites[0]);
        { const tracetree::detail::Scope traced(sites[1]); }
        const tracetree::detail::Scope next(sites[2]);
        if (inside_next) const tracetree::detail::Scope inside(sites[3]);
    };
    const auto thread = recorded_by("lookup-left-last", [&] {
        call_all(false);  // the nodes side by side: 0, 1, 2
        {
            // Site 1 ends in the runtime, its capture given up (nothing under it), and site 2 is found
            // after it, its first child made: under site 2's node, not elsewhere.
            tracetree::TraceSession below(tracetree::TraceRequest("left last 1").min_cost(std::chrono::hours(1)));
            call_all(true);
            // Then a capture delivered (site 2 under site 1 this time, as a trace's root), and the
            // same calls again back in the thread's tree.
            tracetree::TraceSession traced(tracetree::TraceRequest("left last 1"));
            {
                const tracetree::detail::Scope parent(sites[0]);
                const tracetree::detail::Scope root(sites[1]);
                const tracetree::detail::Scope under(sites[2]);
            }
            call_all(true);
            CHECK(traced.collect(std::chrono::seconds(0)).size() == 1);
        }
        call_all(true);
    });
    REQUIRE(thread.roots.size() == 1);
    const tracetree::Node& parent = thread.roots[0];
    CHECK(parent.count == 5);
    check_counts(parent.children, sites, {0, 5, 4, 0});
    const tracetree::Node* next = child_named(parent.children, "left last 2");
    REQUIRE(next != nullptr);
    check_counts(next->children, sites, {0, 0, 0, 3});
    const tracetree::Node* traced = child_named(parent.children, "left last 1");
    REQUIRE(traced != nullptr);
    check_counts(traced->children, sites, {0, 0, 1, 0});
    CHECK(thread.dropped_nodes == 0);
}

TEST_CASE("after a capture the node left last is the current one, not a node of the capture's tree") {
    Sites sites("after capture ", 3);  // 0: the parent, 1: traced, 2: called in 1 and right after it
    std::vector<tracetree::Trace> traces;
    const auto thread = recorded_by("lookup-after-capture", [&] {
        tracetree::TraceSession traced(tracetree::TraceRequest("after capture 1").limit(3));
        for (int i = 0; i < 3; ++i) {
            const tracetree::detail::Scope parent(sites[0]);
            {
                const tracetree::detail::Scope root(sites[1]);
                const tracetree::detail::Scope inside(sites[2]);
            }
            // Entered right after the capture ended, with no scope left in between: in the capture's
            // tree, the node after its last one is site 2's, its parent index the same as the parent's.
            const tracetree::detail::Scope after(sites[2]);
        }
        traces = traced.collect(std::chrono::seconds(0));
    });
    REQUIRE(traces.size() == 3);
    for (const tracetree::Trace& trace : traces) {
        CHECK(trace.root.count == 1);
        REQUIRE(trace.root.children.size() == 1);
        CHECK(trace.root.children[0].count == 1);
    }
    REQUIRE(thread.roots.size() == 1);
    check_counts(thread.roots[0].children, sites, {0, 3, 3});
}

TEST_CASE("under the node limit the sites that fit count exactly and every other call is a counted drop") {
    const tracetree::Limits saved = tracetree::limits();
    tracetree::Limits small = saved;
    small.max_nodes = 64;  // the root and 63 nodes; applies to trees started from now on
    tracetree::set_limits(small);
    constexpr int kSites = 100;
    Sites sites("limited ", kSites), inner("inner ", 1);
    std::vector<std::uint64_t> calls(kSites, 0);
    std::mt19937 random(9);
    const auto thread = recorded_by("lookup-limit", [&] {
        for (int pass = 0; pass < 5; ++pass) {  // the first pass fills the tree in order, the others are shuffled
            std::vector<int> order = ascending(kSites);
            if (pass > 0) std::shuffle(order.begin(), order.end(), random);
            for (const int i : order) {
                const tracetree::detail::Scope scope(sites[i]);
                ++calls[static_cast<std::size_t>(i)];
                if (i >= 63) {  // inside a scope past the limit: dropped with it
                    const tracetree::detail::Scope below(inner[0]);
                }
            }
        }
    });
    tracetree::set_limits(saved);
    std::vector<std::uint64_t> kept = calls;
    std::fill(kept.begin() + 63, kept.end(), 0);
    REQUIRE(thread.roots.size() == 63 + 1);  // and the marker of drops at the top level
    const tracetree::Node& marker = thread.roots.back();
    CHECK(marker.name == "(calls not recorded at the top level)");
    CHECK(marker.dropped == 5 * 37 * 2);
    CHECK(thread.dropped_nodes == 5 * 37 * 2);
    std::vector<tracetree::Node> nodes(thread.roots.begin(), thread.roots.end() - 1);
    check_counts(nodes, sites, kept);
}

TEST_CASE("run-time names are compared by every byte: NUL bytes included, in any order") {
    const std::string alice("user\0alice", 10), mallory("user\0mallory", 12);
    constexpr int kNames = 300;
    std::vector<std::string> names;
    for (int i = 0; i < kNames; ++i) names.push_back("GET /items/" + std::to_string(i));
    std::vector<std::uint64_t> calls(kNames, 0);
    std::mt19937 random(4242);
    const auto thread = recorded_by("lookup-names", [&] {
        for (int pass = 1; pass <= 10; ++pass) {
            for (int i = 0; i < 3; ++i) {
                TRACETREE_SCOPE_DYNAMIC(alice);
            }
            {
                TRACETREE_SCOPE_DYNAMIC(std::string_view(mallory));
            }
            {
                TRACETREE_SCOPE_DYNAMIC("user\0alice");  // a const char*: the name ends at the NUL
            }
            std::vector<int> order = ascending(30 * pass);  // 30 new names a pass, mixed with the known
            std::shuffle(order.begin(), order.end(), random);
            TRACETREE_SCOPE("names");
            for (const int i : order) {
                TRACETREE_SCOPE_DYNAMIC(names[static_cast<std::size_t>(i)]);
                ++calls[static_cast<std::size_t>(i)];
            }
        }
    });
    REQUIRE(thread.roots.size() == 4);
    const tracetree::Node* a = child_named(thread.roots, alice);
    const tracetree::Node* m = child_named(thread.roots, mallory);
    const tracetree::Node* user = child_named(thread.roots, "user");
    REQUIRE(a != nullptr);
    REQUIRE(m != nullptr);
    REQUIRE(user != nullptr);
    CHECK(a->count == 30);
    CHECK(m->count == 10);
    CHECK(user->count == 10);
    const tracetree::Node* parent = child_named(thread.roots, "names");
    REQUIRE(parent != nullptr);
    REQUIRE(parent->children.size() == kNames);
    for (int i = 0; i < kNames; ++i) {
        const tracetree::Node* node = child_named(parent->children, names[static_cast<std::size_t>(i)]);
        INFO("name ", names[static_cast<std::size_t>(i)]);
        REQUIRE(node != nullptr);
        CHECK(node->count == calls[static_cast<std::size_t>(i)]);
    }
}

// A run-time name remembers its node under the parent it was last called from (Arena::enter of a
// DynamicEntry). These tests move it between parents, trees and limits, and count every call.
namespace {
void named_a(const std::string& name) { TRACETREE_SCOPE_DYNAMIC(name); }
constexpr std::uint32_t kLineA = __LINE__ - 1;
void named_b(const std::string& name) { TRACETREE_SCOPE_DYNAMIC(name); }
constexpr std::uint32_t kLineB = __LINE__ - 1;

const tracetree::Node* child_on_line(const std::vector<tracetree::Node>& nodes, const std::string& name, std::uint32_t line) {
    for (const tracetree::Node& node : nodes)
        if (node.name == name && node.line == line) return &node;
    return nullptr;
}
}  // namespace

TEST_CASE("run-time names that differ in one byte, anywhere, or only in trailing NUL bytes are different names") {
    // Lengths around the 8-byte words the table compares and its 24-byte head: every name of each
    // length differs from the others in exactly one byte; and "z", "z\0", "z\0\0" differ in size only.
    std::vector<std::string> names;
    for (std::size_t size = 0; size <= 33; ++size) {
        const std::string base(size, 'q');
        names.push_back(base);
        for (std::size_t at = 0; at < size; ++at) {
            std::string changed = base;
            changed[at] = 'r';
            names.push_back(changed);
        }
    }
    for (std::size_t nuls = 0; nuls <= 2; ++nuls) names.push_back("z" + std::string(nuls, '\0'));
    std::vector<std::uint64_t> calls(names.size(), 0);
    std::vector<int> order;
    for (int i = 0; i < static_cast<int>(names.size()); ++i)
        for (int k = 0; k <= i % 3; ++k) order.push_back(i);
    std::mt19937 random(2024);
    const auto thread = recorded_by("lookup-one-byte", [&] {
        for (int pass = 0; pass < 2; ++pass) {
            std::shuffle(order.begin(), order.end(), random);
            for (const int i : order) {
                TRACETREE_SCOPE_DYNAMIC(names[static_cast<std::size_t>(i)]);
                ++calls[static_cast<std::size_t>(i)];
            }
        }
    });
    REQUIRE(thread.roots.size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
        const tracetree::Node* node = child_named(thread.roots, names[i]);
        INFO("name of ", names[i].size(), " bytes: ", names[i]);
        REQUIRE(node != nullptr);
        CHECK(node->count == calls[i]);
    }
}

TEST_CASE("a run-time name counts on its own node under each parent, from each call site, whatever the order") {
    std::vector<std::string> names;
    for (int i = 0; i < 12; ++i) names.push_back("n" + std::to_string(i));  // compared in the table entry
    for (int i = 0; i < 12; ++i)  // the same first 24 bytes, then different: compared at the interned name too
        names.push_back("/a/long/shared/prefix/of/24+/bytes/" + std::to_string(i));
    Sites parents("parent ", 3);
    constexpr std::size_t kNames = 24;
    // calls[parent][site][name]
    std::vector<std::vector<std::vector<std::uint64_t>>> calls(3, std::vector<std::vector<std::uint64_t>>(2, std::vector<std::uint64_t>(kNames, 0)));
    std::mt19937 random(77);
    const auto thread = recorded_by("lookup-moving-names", [&] {
        for (std::uint32_t call = 0; call < 20000; ++call) {
            // Runs of one parent and of one name, as loops make them, and jumps between them.
            const auto parent = static_cast<std::size_t>(random() % 8 == 0 ? random() % 3 : (call / 7) % 3);
            const auto site = static_cast<std::size_t>(random() % 2);
            const auto name = static_cast<std::size_t>(random() % 4 == 0 ? random() % kNames : (call / 3) % kNames);
            const tracetree::detail::Scope scope(parents[static_cast<int>(parent)]);
            (site == 0 ? named_a : named_b)(names[name]);
            ++calls[parent][site][name];
        }
    });
    REQUIRE(thread.roots.size() == 3);
    for (std::size_t p = 0; p < 3; ++p) {
        const tracetree::Node* parent = child_named(thread.roots, parents.names[p]);
        REQUIRE(parent != nullptr);
        std::size_t called = 0;
        for (std::size_t s = 0; s < 2; ++s)
            for (std::size_t n = 0; n < kNames; ++n) {
                if (calls[p][s][n] == 0) continue;
                ++called;
                const tracetree::Node* node = child_on_line(parent->children, names[n], s == 0 ? kLineA : kLineB);
                INFO("parent ", p, " site ", s, " name ", names[n]);
                REQUIRE(node != nullptr);
                CHECK(node->count == calls[p][s][n]);
            }
        CHECK(parent->children.size() == called);
    }
}

namespace {
// The entries in the calling thread's table of run-time names (detail::Arena::dynamic).
std::size_t names_in_table() {
    const tracetree::detail::Arena* arena = tracetree::detail::tls_arena();
    std::size_t entries = 0;
    for (std::uint32_t slot = 0; slot <= arena->dynamic_mask; ++slot) entries += arena->dynamic[slot].info != nullptr ? 1 : 0;
    return entries;
}
}  // namespace

TEST_CASE("a run-time name seen before is found in the table, wherever the probe placed it: one entry per name and site") {
    // 1,500 names and sites, through several doublings of the table: many share a home slot and sit
    // further on. Seen again, in another order, every one must be found (no entry added) and counted.
    constexpr int kNames = 1000;
    std::vector<std::string> names;
    for (int i = 0; i < kNames; ++i) names.push_back("GET /api/items/" + std::to_string(i));
    std::vector<std::uint64_t> calls_a(kNames, 0), calls_b(kNames, 0);
    std::vector<int> order = ascending(kNames);
    std::vector<std::size_t> entries;
    std::mt19937 random(31);
    const auto thread = recorded_by("lookup-table", [&] {
        for (int pass = 0; pass < 3; ++pass) {
            std::shuffle(order.begin(), order.end(), random);
            for (const int i : order) {
                const auto n = static_cast<std::size_t>(i);
                named_a(names[n]), ++calls_a[n];
                if (i % 2 == 0) named_b(names[n]), ++calls_b[n];
            }
            entries.push_back(names_in_table());
        }
    });
    CHECK(entries == std::vector<std::size_t>(3, kNames + kNames / 2));
    REQUIRE(thread.roots.size() == kNames + kNames / 2);
    for (std::size_t i = 0; i < names.size(); ++i) {
        INFO("name ", names[i]);
        const tracetree::Node* a = child_on_line(thread.roots, names[i], kLineA);
        REQUIRE(a != nullptr);
        CHECK(a->count == calls_a[i]);
        if (i % 2 != 0) continue;
        const tracetree::Node* b = child_on_line(thread.roots, names[i], kLineB);
        REQUIRE(b != nullptr);
        CHECK(b->count == calls_b[i]);
    }
}

TEST_CASE("a run-time name counts in a watched invocation's trace and in the profile, in and out of it") {
    Sites watched_root("watched root", 1), plain_root("plain root", 1);
    const std::string hot = "GET /hot", cold = "GET /cold";
    constexpr int kInvocations = 40;
    tracetree::TraceRequest request("watched root0");
    request.min_cost(std::chrono::nanoseconds(0)).limit(kInvocations);
    tracetree::TraceSession session(request);
    const auto thread = recorded_by("lookup-watched-names", [&] {
        for (int i = 0; i < kInvocations; ++i) {
            {
                // The names' nodes in the thread's own tree, in the other order: other indices.
                const tracetree::detail::Scope scope(plain_root[0]);
                named_a(cold);
                named_a(hot);
            }
            const tracetree::detail::Scope scope(watched_root[0]);  // the same names, in the capture's tree
            for (int k = 0; k <= i % 3; ++k) named_a(hot);
            named_a(cold);
        }
    });
    const std::vector<tracetree::Trace> traces = session.collect(std::chrono::seconds(10));
    REQUIRE(traces.size() == kInvocations);
    for (int i = 0; i < kInvocations; ++i) {
        const tracetree::Node& root = traces[static_cast<std::size_t>(i)].root;
        INFO("invocation ", i);
        REQUIRE(root.children.size() == 2);
        CHECK(root.children[0].name == hot);
        CHECK(root.children[0].count == static_cast<std::uint64_t>(i % 3 + 1));
        CHECK(root.children[1].name == cold);
        CHECK(root.children[1].count == 1);
    }
    const tracetree::Node* outside = child_named(thread.roots, plain_root.names[0]);
    const tracetree::Node* inside = child_named(thread.roots, watched_root.names[0]);
    REQUIRE(outside != nullptr);
    REQUIRE(inside != nullptr);
    REQUIRE(outside->children.size() == 2);
    CHECK(outside->children[0].count == kInvocations);
    CHECK(outside->children[1].count == kInvocations);
    REQUIRE(inside->children.size() == 2);
    CHECK(inside->children[0].count == 14 * 1 + 13 * 2 + 13 * 3);  // i % 3 + 1 over 40 invocations
    CHECK(inside->children[1].count == kInvocations);
}

TEST_CASE("a run-time name's remembered node obeys the depth limit and a reset") {
    Sites chain("depth ", 2);
    const tracetree::Limits saved = tracetree::limits();
    tracetree::ThreadProfile before_reset;
    const auto thread = recorded_by("lookup-limited-names", [&] {
        const auto call = [&] {
            const tracetree::detail::Scope outer(chain[0]);
            const tracetree::detail::Scope inner(chain[1]);
            named_a("deep");  // at depth 3
        };
        for (int i = 0; i < 5; ++i) call();
        tracetree::Limits shallow = saved;
        shallow.max_depth = 2;  // applies at once: "deep" is not recorded, though its node exists
        tracetree::set_limits(shallow);
        for (int i = 0; i < 4; ++i) call();
        tracetree::set_limits(saved);
        const tracetree::Profile profile = tracetree::profile();
        if (const tracetree::ThreadProfile* mine = find_thread(profile, "lookup-limited-names")) before_reset = *mine;
        tracetree::reset();  // applies at this thread's next scope: the counts start again
        for (int i = 0; i < 3; ++i) call();
    });
    REQUIRE(before_reset.roots.size() == 1);
    REQUIRE(before_reset.roots[0].children.size() == 1);
    const tracetree::Node& limited = before_reset.roots[0].children[0];
    CHECK(limited.count == 9);
    CHECK(limited.dropped == 4);
    REQUIRE(limited.children.size() == 1);
    CHECK(limited.children[0].count == 5);

    REQUIRE(thread.roots.size() == 1);
    const tracetree::Node& outer = thread.roots[0];
    REQUIRE(outer.children.size() == 1);
    const tracetree::Node& inner = outer.children[0];
    CHECK(inner.count == 3);
    CHECK(inner.dropped == 0);
    REQUIRE(inner.children.size() == 1);
    CHECK(inner.children[0].name == "deep");
    CHECK(inner.children[0].count == 3);
}

TEST_CASE("a null or empty run-time name is the empty name") {
    const char* none = nullptr;
    const auto thread = recorded_by("lookup-empty-names", [&] {
        for (int i = 0; i < 3; ++i) {
            { TRACETREE_SCOPE_DYNAMIC(std::string_view{}); }
            { TRACETREE_SCOPE_DYNAMIC(none); }
        }
    });
    REQUIRE(thread.roots.size() == 2);  // one node per call site
    for (const tracetree::Node& node : thread.roots) {
        CHECK(node.name.empty());
        CHECK(node.count == 3);
    }
}

namespace {
pthread_key_t g_late_key;
void late_scopes(void*) {
    TRACETREE_SCOPE_DYNAMIC(std::string("a name first seen after its thread retired"));
    TRACETREE_SCOPE("a site first run after its thread retired");
}
}  // namespace

TEST_CASE("scopes in a thread-exit destructor that runs after the recorder's are not recorded") {
    // A session makes every site not yet decided go through the runtime's begin().
    tracetree::TraceSession session(tracetree::TraceRequest("no.such.scope"));
    REQUIRE(pthread_key_create(&g_late_key, late_scopes) == 0);  // after the recorder's key: destroyed later
    std::thread([] {
        tracetree::set_thread_name("lookup-late-destructor");
        { TRACETREE_SCOPE("before exit"); }
        pthread_setspecific(g_late_key, &g_late_key);
    }).join();
    pthread_key_delete(g_late_key);
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, "lookup-late-destructor");
    REQUIRE(thread != nullptr);
    REQUIRE(thread->roots.size() == 1);
    CHECK(thread->roots[0].name == "before exit");
}
