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

TEST_CASE("every view takes a Trace, a Profile and a ThreadProfile alike") {
    // profile().merged() is a ThreadProfile: the README's write_folded(out, profile().merged()) compiles,
    // and a thread's view is its profile's, as if the profile held that thread alone.
    const tracetree::Profile profile = samples::hostile_profile();
    const tracetree::ThreadProfile merged = profile.merged();
    tracetree::Profile alone;
    alone.threads.push_back(merged);
    const tracetree::Trace trace = samples::buggy_request();
    const auto text = [](auto write) {
        std::ostringstream out;
        write(out);
        return out.str();
    };
    CHECK(text([&](std::ostream& o) { tracetree::write_folded(o, merged); }) == folded(profile));
    CHECK(text([&](std::ostream& o) { tracetree::write_folded(o, merged, {tracetree::FoldedValue::count, true}); }) ==
          folded(alone, {tracetree::FoldedValue::count, true}));
    CHECK(text([&](std::ostream& o) { tracetree::write_flamegraph_svg(o, merged); }) ==
          text([&](std::ostream& o) { tracetree::write_flamegraph_svg(o, alone); }));
    const tracetree::Profile loaded = tracetree::read_profile_json(text([&](std::ostream& o) { tracetree::write_json(o, merged); }));
    REQUIRE(loaded.threads.size() == 1);
    CHECK(loaded.threads[0].roots.size() == merged.roots.size());
    CHECK(tracetree::diff_to_string(merged, tracetree::ThreadProfile{}) == tracetree::diff_to_string(profile, tracetree::Profile{}));
    CHECK(text([&](std::ostream& o) { tracetree::write_diff_flamegraph_svg(o, merged, tracetree::ThreadProfile{}); }) ==
          text([&](std::ostream& o) { tracetree::write_diff_flamegraph_svg(o, profile, tracetree::Profile{}); }));
    CHECK_FALSE(tracetree::to_string(merged).empty());  // render and to_string took a ThreadProfile already
    // The same calls with a Trace, so that none of the three is left out of a view.
    CHECK_FALSE(text([&](std::ostream& o) { tracetree::write_folded(o, trace); }).empty());
    CHECK_FALSE(text([&](std::ostream& o) { tracetree::write_json(o, trace); }).empty());
    CHECK_FALSE(text([&](std::ostream& o) { tracetree::render_human(o, merged); }).empty());
    CHECK_FALSE(tracetree::diff_to_string(trace, samples::fixed_request()).empty());
}
