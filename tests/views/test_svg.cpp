#include <doctest/doctest.h>
#include <tracetree/all.hpp>

#include "../golden.hpp"
#include "samples.hpp"

#include <sstream>

namespace {

template <class Value>
std::string svg(const Value& value, tracetree::FlameGraphOptions options = {}) {
    std::ostringstream out;
    tracetree::write_flamegraph_svg(out, value, options);
    return out.str();
}

std::string attribute(const std::string& text, std::size_t from, const std::string& name) {
    const std::size_t at = text.find(" " + name + "=\"", from) + name.size() + 3;
    return text.substr(at, text.find('"', at) - at);
}

struct Drawn {
    std::string x, y, width, fill, label;
};

Drawn frame(const std::string& text, const std::string& name) {
    const std::size_t title = text.find("<title>" + name);
    REQUIRE(title != std::string::npos);
    const std::size_t rect = text.find("<rect", title);
    Drawn d{attribute(text, rect, "x"), attribute(text, rect, "y"), attribute(text, rect, "width"),
            attribute(text, rect, "fill"), ""};
    const std::size_t end = text.find("</g>", rect), label = text.find("\">", text.find("<text", rect)) + 2;
    if (text.find("<text", rect) < end) d.label = text.substr(label, text.find("</text>", label) - label);
    return d;
}

}  // namespace

TEST_CASE("flame graph of a trace: golden") {
    golden::compare("buggy.svg", svg(samples::buggy_request()));
    tracetree::FlameGraphOptions icicle;
    icicle.icicle = true;
    icicle.title = "Icicle <graph>";
    golden::compare("buggy-icicle.svg", svg(samples::buggy_request(), icicle));
}

TEST_CASE("flame graph: widths in proportion to total time, children from the parent's left edge") {
    const std::string text = svg(samples::buggy_request());
    // 1200 px less 10 px either side: 1180 px for 120.4 ms.
    const Drawn root = frame(text, "Http11Processor::service()");
    CHECK(root.x == "10");
    CHECK(root.width == "1180");
    const Drawn list = frame(text, "UserController::list()");
    CHECK(list.x == "10");
    CHECK(list.width == "432.209");  // 44.1 / 120.4 * 1180 = 432.2093
    const Drawn load = frame(text, "WebappClassLoader::loadClass()");
    CHECK(load.x == "442.209");      // after list
    CHECK(load.width == "731.13");   // 74.6 / 120.4 * 1180 = 731.1296
    // Flame: the root at the bottom, each level 18 px higher.
    CHECK(std::stod(list.y) == doctest::Approx(std::stod(root.y) - 3 * 18));
    // Labels: name, time, percent of the whole, count.
    CHECK(load.label == "WebappClassLoader::loadClass() (74.6ms, 61.96%, 31 calls)");
    CHECK(text.find("<title>WebappClassLoader::loadClass()\ntotal 74.6ms (61.96%), self 400\xC2\xB5s\ncount 31, "
                    "min 1.2ms, max 3.61ms\nthrew 2\nsrc/app.cpp:1287</title>") == std::string::npos);
    CHECK(text.find("<title>WebappClassLoader::loadClass()&#10;total 74.6ms (61.96%), self 400\xC2\xB5s&#10;count 31, "
                    "min 1.2ms, max 3.61ms&#10;threw 2&#10;src/app.cpp:1287</title>") != std::string::npos);
}

TEST_CASE("flame graph: narrow frames get an ellipsis, very narrow ones no label, tiny ones are not drawn") {
    using samples::node;
    tracetree::Trace trace;
    trace.root = node("root()", 0, 1, tracetree::Nanos(1000000), {
        node("a_function_with_a_rather_long_name()", 1, 1, tracetree::Nanos(100000)),  // 118 px
        node("b()", 2, 1, tracetree::Nanos(10000)),                                      // 11.8 px
        node("c()", 3, 1, tracetree::Nanos(50)),                                         // 0.059 px
    });
    const std::string text = svg(trace);
    const Drawn a = frame(text, "a_function");
    CHECK(a.label == "a_function_wit\xE2\x80\xA6");  // (118 - 6) / 7.3: 15 characters with the ellipsis
    CHECK(frame(text, "b()").label.empty());
    CHECK(text.find("<title>c()") == std::string::npos);
    tracetree::FlameGraphOptions all;
    all.min_frame_width = 0;
    CHECK(svg(trace, all).find("<title>c()") != std::string::npos);
    all.width = 100;
    CHECK_THROWS_AS(svg(trace, all), std::invalid_argument);
}

TEST_CASE("flame graph: the colour depends on the name only") {
    const Drawn a = frame(svg(samples::buggy_request()), "JsonWriter::write()");
    const Drawn b = frame(svg(samples::fixed_request()), "JsonWriter::write()");
    CHECK(a.fill == b.fill);
    CHECK(a.fill != frame(svg(samples::buggy_request()), "UserController::list()").fill);
}

TEST_CASE("flame graph of a profile: an \"all\" frame over merged roots, or over one frame per thread") {
    const tracetree::Profile profile = samples::hostile_profile();
    const std::string merged = svg(profile);
    CHECK(merged.find("<title>all&#10;total 51.5ms&#10;2 threads</title>") != std::string::npos);
    tracetree::FlameGraphOptions options;
    options.thread_frames = true;
    const std::string threads = svg(profile, options);
    CHECK(threads.find("<title>[thread &quot;name&quot;&#10;\\ ; tid=7]") != std::string::npos);
}

TEST_CASE("flame graph: names cannot break the markup") {
    const std::string text = svg(samples::hostile_profile());
    CHECK(text.find("<script") == std::string::npos);
    CHECK(text.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        CHECK((u >= 0x20 || c == '\n'));
        if (!(u >= 0x20 || c == '\n')) break;
    }
    // The 3000-character name is cut in its label, whole in its tooltip.
    CHECK(text.find(std::string(3000, 'L')) != std::string::npos);
}
