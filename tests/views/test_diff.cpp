#include <doctest/doctest.h>
#include <tracetree/all.hpp>

#include "../golden.hpp"
#include "samples.hpp"

#include <cstdio>
#include <sstream>

namespace {

std::string diff_svg(const tracetree::Trace& before, const tracetree::Trace& after,
                     tracetree::FlameGraphOptions options = {}) {
    std::ostringstream out;
    tracetree::write_diff_flamegraph_svg(out, before, after, options);
    return out.str();
}

// The fill of the first frame whose tooltip starts with `name`, "" when not drawn.
std::string fill_of(const std::string& svg, const std::string& name) {
    const std::size_t title = svg.find("<title>" + name);
    if (title == std::string::npos) return "";
    const std::size_t fill = svg.find("fill=\"", title) + 6;
    return svg.substr(fill, svg.find('"', fill) - fill);
}

}  // namespace

TEST_CASE("diff of two traces: both sides, the change, one-sided nodes marked, largest change first") {
    const std::string text = tracetree::diff_to_string(samples::buggy_request(), samples::fixed_request());
    golden::compare("buggy-fixed.diff.txt", text);
    CHECK(text.rfind("diff before -> after: 120ms -> 46.3ms (-74.1ms), largest change first\n"
                     "`---[120ms -> 46.3ms (-74.1ms), count 1 -> 1] Http11Processor::service()\n",
                     0) == 0);
    // CoyoteAdapter moved from line 352 to 355: matched by name. loadClass (-74ms) sorts before list (-0.3ms).
    CHECK(text.find("        `---[119ms -> 44.9ms (-74ms), count 1 -> 1] ApplicationFilterChain::doFilter()\n"
                    "            +---[74.6ms -> 600\xC2\xB5s (-74ms), count 31 -> 31] WebappClassLoader::loadClass()\n"
                    "            |   `---[74.2ms -> 0ms (-74.2ms), count 33 -> 0] "
                    "TomcatJarInputStream::getNextJarEntry()  [only in before]\n"
                    "            `---[44.1ms -> 43.8ms (-300\xC2\xB5s), count 1 -> 1] UserController::list()\n") !=
          std::string::npos);
    CHECK(text.find("[0ms -> 300\xC2\xB5s (+300\xC2\xB5s), count 0 -> 1] ResponseCache::put()  [only in after]") !=
          std::string::npos);
}

TEST_CASE("diff: min_change hides small unchanged-count changes and says how many") {
    tracetree::DiffOptions options;
    options.min_change = std::chrono::milliseconds(1);
    const std::string text = tracetree::diff_to_string(samples::buggy_request(), samples::fixed_request(), options);
    CHECK(text.find("UserRepository::findAll()") == std::string::npos);  // -350µs, same count
    CHECK(text.find("ResponseCache::put()") != std::string::npos);       // count 0 -> 1: always shown
    CHECK(text.find("`---[2 call sites changed by less than 1ms]") != std::string::npos);
    options.min_change = tracetree::Nanos(-1);
    CHECK_THROWS_AS(tracetree::diff_to_string(samples::buggy_request(), samples::fixed_request(), options),
                    std::invalid_argument);
}

TEST_CASE("diff of profiles merges threads; same-named siblings pair by call site first") {
    using samples::node;
    const auto profile = [](std::vector<tracetree::Node> roots) {
        tracetree::Profile p;
        p.threads.resize(2);
        p.threads[0].thread_id = 1;
        p.threads[1].thread_id = 2;
        p.threads[0].roots = roots;
        p.threads[1].roots = std::move(roots);
        return p;
    };
    const tracetree::Profile before = profile({node("main()", 0, 1, tracetree::Nanos(1000), {
        node("f()", 10, 1, tracetree::Nanos(100)), node("f()", 20, 1, tracetree::Nanos(700))})});
    const tracetree::Profile after = profile({node("main()", 0, 1, tracetree::Nanos(1000), {
        node("f()", 20, 1, tracetree::Nanos(200)), node("f()", 10, 1, tracetree::Nanos(100))})});
    CHECK(tracetree::diff_to_string(before, after) ==
          "diff before -> after: 2\xC2\xB5s -> 2\xC2\xB5s (0ms), largest change first\n"
          "`---[2\xC2\xB5s -> 2\xC2\xB5s (0ms), count 2 -> 2] main()\n"
          "    +---[1.4\xC2\xB5s -> 400ns (-1\xC2\xB5s), count 2 -> 2] f()\n"
          "    `---[200ns -> 200ns (0ms), count 2 -> 2] f()\n");
}

TEST_CASE("diff flame graph: widths from one side, blue where self time shrank, red where it grew") {
    const tracetree::Trace before = samples::buggy_request(), after = samples::fixed_request();
    const std::string svg = diff_svg(before, after);
    golden::compare("buggy-fixed.diff.svg", svg);
    CHECK(fill_of(svg, "TomcatJarInputStream::getNextJarEntry()") == "rgb(40,100,225)");  // the largest change
    CHECK(fill_of(svg, "Http11Processor::service()") == "rgb(220,220,220)");             // self unchanged
    CHECK(fill_of(svg, "ResponseCache::put()").empty());  // only after: no width in a "before" graph
    tracetree::FlameGraphOptions options;
    options.diff_widths = tracetree::DiffWidths::after;
    const std::string by_after = diff_svg(before, after, options);
    CHECK(fill_of(by_after, "TomcatJarInputStream::getNextJarEntry()").empty());
    const std::string grew = fill_of(by_after, "ResponseCache::put()");
    REQUIRE(!grew.empty());
    int red = 0, green = 0, blue = 0;
    REQUIRE(std::sscanf(grew.c_str(), "rgb(%d,%d,%d)", &red, &green, &blue) == 3);
    CHECK(red == 220);  // +300µs against the largest change, -74.2ms: sqrt(0.004) of the way to red
    CHECK(green == 209);
    CHECK(blue == 209);
    CHECK(by_after.find("widths: after") != std::string::npos);
}

TEST_CASE("durations: three significant digits, units that never show 1000") {
    using tracetree::detail::duration;
    using tracetree::Nanos;
    CHECK(duration(Nanos(0)) == "0ms");
    CHECK(duration(Nanos(850)) == "850ns");
    CHECK(duration(Nanos(999)) == "999ns");
    CHECK(duration(Nanos(1000)) == "1\xC2\xB5s");
    CHECK(duration(Nanos(12345)) == "12.3\xC2\xB5s");
    CHECK(duration(Nanos(999700)) == "1ms");
    CHECK(duration(Nanos(74200000)) == "74.2ms");
    CHECK(duration(Nanos(120400000)) == "120ms");
    CHECK(duration(Nanos(999600000)) == "1s");
    CHECK(duration(Nanos(1250000000)) == "1.25s");
    CHECK(duration(Nanos(-74200000)) == "-74.2ms");
    CHECK(duration(Nanos(3600000000000)) == "3600s");
}
