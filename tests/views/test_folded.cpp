#include <doctest/doctest.h>
#include <tracetree/all.hpp>

#include "../golden.hpp"
#include "samples.hpp"

#include <sstream>

namespace {

std::string folded(const tracetree::Trace& trace, tracetree::FoldedOptions options = {}) {
    std::ostringstream out;
    tracetree::write_folded(out, trace, options);
    return out.str();
}

std::string folded(const tracetree::Profile& profile, tracetree::FoldedOptions options = {}) {
    std::ostringstream out;
    tracetree::write_folded(out, profile, options);
    return out.str();
}

}  // namespace

TEST_CASE("folded stacks: self time in microseconds, one line per path with a value") {
    using samples::node;
    tracetree::Trace trace;
    trace.root = node("main()", 0, 1, tracetree::Nanos(10000), {
        node("a()", 1, 3, tracetree::Nanos(6000), {node("b()", 2, 2, tracetree::Nanos(1499))}),
        node("c()", 3, 1, tracetree::Nanos(3500)),
        node("idle()", 4, 1, tracetree::Nanos(499)),  // rounds to 0: left out
    });
    // main() spends 1 ns itself: 0 µs, no line.
    CHECK(folded(trace) == "main();a() 5\nmain();a();b() 1\nmain();c() 4\n");
    CHECK(folded(trace, {tracetree::FoldedValue::total_us, false}) ==
          "main() 10\nmain();a() 6\nmain();a();b() 1\nmain();c() 4\n");
    CHECK(folded(trace, {tracetree::FoldedValue::count, false}) ==
          "main() 1\nmain();a() 3\nmain();a();b() 2\nmain();c() 1\nmain();idle() 1\n");
    trace.thread_name = "worker";
    trace.thread_id = 4;
    CHECK(folded(trace, {tracetree::FoldedValue::count, true}).rfind("[worker tid=4];main() 1\n", 0) == 0);
}

TEST_CASE("folded stacks of a profile merge threads unless thread frames are asked for") {
    tracetree::Profile profile;
    for (std::uint32_t id : {1u, 2u}) {
        tracetree::ThreadProfile thread;
        thread.thread_name = "pool";
        thread.thread_id = id;
        thread.roots.push_back(samples::node("job()", 5, id, std::chrono::microseconds(10 * id)));
        profile.threads.push_back(thread);
    }
    CHECK(folded(profile) == "job() 30\n");
    CHECK(folded(profile, {tracetree::FoldedValue::count, true}) == "[pool tid=1];job() 1\n[pool tid=2];job() 2\n");
}

TEST_CASE("folded stacks: the Tomcat trace, golden") {
    golden::compare("buggy.folded", folded(samples::buggy_request()));
    golden::compare("buggy-count.folded", folded(samples::buggy_request(), {tracetree::FoldedValue::count, false}));
}

TEST_CASE("folded stacks survive any name: one frame per level, a number at the end") {
    const std::string text = folded(samples::hostile_profile(), {tracetree::FoldedValue::count, true});
    std::istringstream lines(text);
    std::string line;
    std::size_t count = 0;
    while (std::getline(lines, line)) {
        ++count;
        INFO(line);
        for (char c : line) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
        const std::size_t space = line.rfind(' ');
        REQUIRE(space != std::string::npos);
        CHECK(line.find_first_not_of("0123456789", space + 1) == std::string::npos);
        CHECK(space + 1 < line.size());
    }
    // Two lines per level of the hostile chain (the node and its sibling), the root, the second thread.
    CHECK(count == 1 + 2 * (samples::hostile_names().size() - 1) + 1);
    // The frame count of each line is its depth: `;` inside names must not add frames.
    CHECK(text.find("[thread \"name\"?\\ , tid=7];quote\"d \\back\\slash;ctrl????????? end;semi,colon,s and") !=
          std::string::npos);
}
