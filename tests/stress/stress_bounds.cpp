// Bounds: recursion far past the depth limit, call sites far past the node limit, and names of
// megabytes. Memory must stay bounded (counted in heap bytes), and what was not recorded must be
// counted and shown.
#include "stress.hpp"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <utility>

namespace stress {

// Runs `body` on a new thread (a fresh arena under the current limits) and waits for it.
template <class F>
void on_new_thread(F body) {
    std::thread(std::move(body)).join();
}

// Restores the default limits when a test case ends, whatever it set.
struct LimitsGuard {
    tracetree::Limits saved = tracetree::limits();
    ~LimitsGuard() { tracetree::set_limits(saved); }
};

int recurse(int n) {
    TRACETREE_FUNCTION();
    return n == 0 ? 0 : 1 + recurse(n - 1);
}

TEST_CASE("recursion far past the depth limit: a bounded chain, every deeper call counted") {
    LimitsGuard guard;
    tracetree::reset();
    constexpr std::uint32_t kLimit = 16;
    constexpr int kDepth = 1200;  // 75 times the limit (ASan at -O0 has big frames: 8 MiB stacks)
    constexpr int kCalls = 10;
    tracetree::set_limits({kLimit, tracetree::limits().max_nodes});
    std::int64_t growth = 0;
    on_new_thread([&] {
        tracetree::set_thread_name("deep");
        recurse(0);  // the thread's state now exists: what follows is the recursion alone
        const std::int64_t before = heap_live_bytes();
        for (int i = 0; i < kCalls; ++i) CHECK(recurse(kDepth - 1) == kDepth - 1);
        growth = heap_live_bytes() - before;
    });
    MESSAGE("heap growth for " << kCalls << " recursions " << kDepth << " deep: " << growth << " B");
    CHECK(growth <= 16 * 1024);  // one 16 KiB node chunk holds the whole 16-node chain

    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, "deep");
    REQUIRE(thread != nullptr);
    const std::uint64_t expected_dropped = std::uint64_t{kCalls} * (kDepth - kLimit);
    CHECK(thread->dropped_depth == expected_dropped);
    CHECK(thread->dropped_nodes == 0);
    REQUIRE(thread->roots.size() == 1);
    const tracetree::Node* node = &thread->roots.front();
    std::uint32_t depth = 1;
    while (!node->children.empty()) {
        CHECK(node->children.size() == 1);
        CHECK(node->dropped == 0);
        node = &node->children.front();
        ++depth;
    }
    CHECK(depth == kLimit);
    CHECK(node->name == "stress::recurse()");
    CHECK(node->count == kCalls + 0u);  // the deepest recorded level of each of the kCalls recursions
    CHECK(node->dropped == expected_dropped);
    const std::string text = tracetree::to_string(profile);
    CHECK(text.find("dropped_depth=" + std::to_string(expected_dropped)) != std::string::npos);
    CHECK(text.find("not recorded: " + std::to_string(expected_dropped) + " calls") != std::string::npos);
}

// A distinct call site per instantiation: the static Site in each is its own.
template <int N>
void site() {
    TRACETREE_SCOPE("site");
}
template <int... N>
void all_sites(std::integer_sequence<int, N...>) {
    // A table, not a fold expression: clang limits folds to 256 operands.
    static constexpr void (*sites[])() = {&site<N>...};
    for (auto* call : sites) call();
}
constexpr int kSites = 600;

TEST_CASE("call sites far past the node limit: bounded nodes, every other call counted") {
    LimitsGuard guard;
    tracetree::reset();
    constexpr std::uint32_t kNodes = 16;  // node 0 is the root: 15 call sites fit
    constexpr int kPasses = 3;
    tracetree::set_limits({tracetree::limits().max_depth, kNodes});
    // Sites are interned once per process, when a thread first records them: do that first, so
    // that what is measured below is the thread alone.
    on_new_thread([] {
        site<-1>();
        all_sites(std::make_integer_sequence<int, kSites>{});
    });
    tracetree::reset();
    std::int64_t growth = 0;
    on_new_thread([&] {
        tracetree::set_thread_name("wide");
        site<-1>();
        const std::int64_t before = heap_live_bytes();
        for (int pass = 0; pass < kPasses; ++pass) all_sites(std::make_integer_sequence<int, kSites>{});
        growth = heap_live_bytes() - before;
    });
    CHECK(growth <= 1024);  // the 16 nodes were allocated with the thread's first chunk

    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, "wide");
    REQUIRE(thread != nullptr);
    const std::uint64_t expected_dropped = std::uint64_t{kPasses} * (kSites + 1 - (kNodes - 1));
    CHECK(thread->dropped_nodes == expected_dropped);
    std::uint64_t recorded = 0, shown_dropped = 0;
    for (const auto& root : thread->roots) {
        recorded += root.count;
        shown_dropped += dropped_below(root);
    }
    CHECK(recorded == 1 + std::uint64_t{kPasses} * (kNodes - 2));  // site<-1> once, then 14 sites per pass
    CHECK(shown_dropped == expected_dropped);
    const std::string text = tracetree::to_string(profile);
    CHECK(text.find("dropped_nodes=" + std::to_string(expected_dropped)) != std::string::npos);
    CHECK(text.find("(calls not recorded at the top level)") != std::string::npos);
}

TEST_CASE("run-time names past the node limit: memory stays bounded") {
    // A server naming scopes after request paths must not grow without bound when clients send
    // endless distinct paths: past the node limit a new name has nowhere to be recorded.
    LimitsGuard guard;
    tracetree::reset();
    constexpr std::uint32_t kNodes = 64;
    constexpr int kNames = 20000;
    tracetree::set_limits({tracetree::limits().max_depth, kNodes});
    std::int64_t growth = 0;
    on_new_thread([&] {
        tracetree::set_thread_name("names");
        for (int i = 0; i < static_cast<int>(kNodes); ++i) {  // fill every node first
            TRACETREE_SCOPE_DYNAMIC("/warm/" + std::to_string(i));
        }
        const std::int64_t before = heap_live_bytes();
        std::string path(200, 'p');
        for (int i = 0; i < kNames; ++i) {
            path.replace(0, 12, std::to_string(1000000000000LL + i));
            TRACETREE_SCOPE_DYNAMIC(path);
        }
        growth = heap_live_bytes() - before;
    });
    MESSAGE("heap growth for " << kNames << " distinct names past the node limit: " << growth << " B");
    CHECK(growth <= 256 * 1024);  // ~13 bytes a name at most; one kept entry per name is 300+ bytes

    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, "names");
    REQUIRE(thread != nullptr);
    CHECK(thread->dropped_nodes == static_cast<std::uint64_t>(kNames) + 1);  // the 64th warm-up name too
}

TEST_CASE("names of megabytes are cut, and cost no more than the cut") {
    LimitsGuard guard;
    tracetree::reset();
    const std::string huge(4 << 20, 'n');  // 4 MiB
    std::int64_t growth = 0;
    std::size_t annotated = 0;
    on_new_thread([&] {
        tracetree::set_thread_name(huge);
        {
            TRACETREE_SCOPE("warm");
        }
        tracetree::TraceRequest request("big");
        tracetree::TraceSession session(request);
        const std::int64_t before = heap_live_bytes();
        for (int i = 0; i < 8; ++i) {
            std::string name = huge;
            name[0] = static_cast<char>('a' + i);  // eight distinct names, each 4 MiB
            TRACETREE_SCOPE_DYNAMIC(name);
            TRACETREE_SCOPE("big");
            tracetree::annotate(huge, huge);
        }
        const auto traces = session.collect(std::chrono::seconds(0));
        REQUIRE(traces.size() == 1);
        REQUIRE(traces.front().fields.size() == 1);
        annotated = traces.front().fields.front().first.size() + traces.front().fields.front().second.size();
        growth = heap_live_bytes() - before;
    });
    CHECK(annotated == 2 * tracetree::Limits{}.max_name_length);
    MESSAGE("heap growth for eight 4 MiB names: " << growth << " B");
    CHECK(growth <= 256 * 1024);

    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, std::string(tracetree::Limits{}.max_name_length, 'n'));
    REQUIRE(thread != nullptr);
    std::size_t long_names = 0;
    for (const auto& root : thread->roots) {
        if (root.name == "warm") continue;
        CHECK(root.name.size() == tracetree::Limits{}.max_name_length);
        ++long_names;
    }
    CHECK(long_names == 8);

    // A pattern of megabytes is refused, not compiled.
    tracetree::TraceRequest request(huge);
    CHECK_THROWS_AS(tracetree::TraceSession{request}, std::invalid_argument);
}

}  // namespace stress

namespace stress {

TEST_CASE("regex patterns with absurd repeat counts are refused, not compiled") {
        // Found by fuzz/fuzz_matcher.cpp (fuzz/regressions/matcher/regex-repeat-count-overflow):
    // libstdc++'s regex compiler computes repeat counts in a signed long without an overflow check
    // (undefined behaviour at 19 digits), and a large count builds one NFA state per repetition,
    // so a trace pattern typed at an admin endpoint could exhaust memory of the traced program.
    // fuzz/regressions/matcher/regex-backreference-overflow: the same overflow through "\\N".
    for (const char* pattern : {"a{2,3111111111111111111111}", "a{99999999999999999999}", "(ab){0,5000}",
                                "\\w\\666666666666666666666w*"}) {
        CAPTURE(pattern);
        tracetree::TraceRequest request(pattern);
        request.regex(true);
        CHECK_THROWS_AS(tracetree::TraceSession{request}, std::invalid_argument);
    }
    tracetree::TraceRequest fine("a{2,3}\\{99999\\}");  // ordinary counts, and an escaped brace, still compile
    fine.regex(true);
    CHECK_NOTHROW(tracetree::TraceSession{fine});
}

}  // namespace stress

namespace stress {

TEST_CASE("glob '*' also matches names that contain a literal '*'") {
    // Found by fuzz/fuzz_matcher.cpp (fuzz/regressions/matcher/glob-star-against-literal-star): the
    // glob compared a pattern's '*' with the name's character before treating it as a wildcard, so
    // "*" did not match "*x", and "operator*" did not match "X::operator*=".
    struct Case {
        const char* pattern;
        const char* name;
    };
    for (const Case c : {Case{"*", "*x"}, Case{"operator*", "X::operator*="}, Case{"a*b", "a*xb"}, Case{"*", "*"}}) {
        CAPTURE(c.pattern);
        CAPTURE(c.name);
        CHECK(tracetree::Pattern(c.pattern, tracetree::PatternSyntax::glob).matches(c.name));
    }
    CHECK_FALSE(tracetree::Pattern("a*b", tracetree::PatternSyntax::glob).matches("a*c"));
}

}  // namespace stress
