#include <doctest/doctest.h>
#include <tracetree/all.hpp>

#include "../golden.hpp"
#include "samples.hpp"

#include <sstream>

namespace {

template <class Value>
std::string json(const Value& value) {
    std::ostringstream out;
    tracetree::write_json(out, value);
    return out.str();
}

void check_same(const tracetree::Node& a, const tracetree::Node& b) {
    INFO(a.name);
    CHECK(a.name == b.name);
    CHECK(a.file == b.file);
    CHECK(a.line == b.line);
    CHECK(a.count == b.count);
    CHECK(a.total == b.total);
    CHECK(a.min == b.min);
    CHECK(a.max == b.max);
    CHECK(a.throws == b.throws);
    CHECK(a.dropped == b.dropped);
    CHECK(a.kind == b.kind);
    CHECK(a.message == b.message);
    CHECK(a.values == b.values);
    REQUIRE(a.children.size() == b.children.size());
    for (std::size_t i = 0; i < a.children.size(); ++i) check_same(a.children[i], b.children[i]);
}

// The loader's message, or "" when it loaded.
std::string error_of(std::string_view text) {
    try {
        tracetree::read_json(text);
        return "";
    } catch (const tracetree::JsonError& e) {
        return e.what();
    }
}

}  // namespace

TEST_CASE("JSON of a trace: golden, and it loads back to the same value") {
    const tracetree::Trace trace = samples::buggy_request();
    const std::string text = json(trace);
    golden::compare("buggy.json", text);
    const tracetree::Trace loaded = tracetree::read_trace_json(text);
    CHECK(loaded.start == trace.start);
    CHECK(loaded.thread_name == trace.thread_name);
    CHECK(loaded.thread_id == trace.thread_id);
    CHECK(loaded.fields == trace.fields);
    check_same(loaded.root, trace.root);
    CHECK(json(loaded) == text);
    CHECK(tracetree::to_string(loaded) == tracetree::to_string(trace));
}

TEST_CASE("JSON: throw nodes and watched values round-trip") {
    tracetree::Trace trace = samples::buggy_request();
    tracetree::Node thrown;
    thrown.kind = tracetree::NodeKind::thrown;
    thrown.name = "std::invalid_argument";
    thrown.line = 46;
    thrown.count = 2;
    thrown.message = "need >= 2 \"quoted\"";
    tracetree::Node no_message = thrown;
    no_message.name = "Overflow";
    no_message.message.reset();
    trace.root.children.front().children.push_back(thrown);
    trace.root.children.front().children.push_back(no_message);
    trace.root.values = {{"uri", "\"/send\""}, {"n", "3"}};
    const std::string text = json(trace);
    CHECK(text.find(R"("kind":"throw")") != std::string::npos);
    const tracetree::Trace loaded = tracetree::read_trace_json(text);
    check_same(loaded.root, trace.root);
    CHECK(json(loaded) == text);
    CHECK(tracetree::to_string(loaded) == tracetree::to_string(trace));
    CHECK(error_of(R"({"format":"tracetree","version":1,"kind":"trace","root":{"name":"x","kind":"bogus"}})")
              .find("\"kind\" must be \"call\" or \"throw\"") != std::string::npos);
}

TEST_CASE("JSON of a profile with hostile names loads back; bytes that are not UTF-8 become U+FFFD") {
    const tracetree::Profile profile = samples::hostile_profile();
    const std::string text = json(profile);
    const tracetree::Profile loaded = tracetree::read_profile_json(text);
    REQUIRE(loaded.threads.size() == profile.threads.size());
    CHECK(loaded.taken == profile.taken);
    for (std::size_t t = 0; t < profile.threads.size(); ++t) {
        const tracetree::ThreadProfile &a = loaded.threads[t], &b = profile.threads[t];
        CHECK(a.thread_id == b.thread_id);
        CHECK(a.exited == b.exited);
        CHECK(a.dropped_depth == b.dropped_depth);
        CHECK(a.dropped_nodes == b.dropped_nodes);
        REQUIRE(a.roots.size() == b.roots.size());
    }
    // Valid UTF-8 (quotes, backslashes, control characters, NUL, U+2028) comes back byte for byte.
    std::vector<std::string> names = samples::hostile_names();
    names[5] = "not utf-8 \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD end";
    const tracetree::Node* original = &profile.threads[0].roots[0];
    const tracetree::Node* node = &loaded.threads[0].roots[0];
    for (std::size_t level = 0; level < names.size(); ++level) {
        CHECK(node->name == names[level]);
        CHECK(node->total == original->total);
        CHECK(node->count == original->count);
        CHECK(node->line == original->line);
        REQUIRE(node->children.size() == original->children.size());
        if (node->children.empty()) break;
        CHECK(node->children[1].name == names[level + 1] + " sibling");
        node = &node->children[0];
        original = &original->children[0];
    }
    CHECK(node->name == names.back());
    const tracetree::Node& root = loaded.threads[0].roots[0];
    CHECK(root.throws == 1);
    CHECK(root.dropped == 5);
    CHECK(root.min == profile.threads[0].roots[0].min);
    CHECK(root.max == profile.threads[0].roots[0].max);
    CHECK(root.file == "dir\\file \"x\".cpp");
    CHECK(loaded.threads[0].thread_name == profile.threads[0].thread_name);
    CHECK(loaded.threads[1].thread_name == "not utf-8 \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD end");
    // A second round trip is exact.
    CHECK(json(loaded) == text);
    CHECK(json(tracetree::read_profile_json(json(loaded))) == text);
}

TEST_CASE("JSON loader: escapes, unknown keys, defaults") {
    const tracetree::Trace trace = tracetree::read_trace_json(
        R"( {"format":"tracetree","version":1,"kind":"trace","future":{"a":[1,2.5e-3,null,true,"x"]},
             "root":{"name":"a\u00e9\ud83d\udd25\"\\\/\b\f\n\r\t","count":2,"children":[{"name":"b","total_ns":-5}]}} )");
    CHECK(trace.root.name == "a\xC3\xA9\xF0\x9F\x94\xA5\"\\/\b\f\n\r\t");
    CHECK(trace.root.count == 2);
    CHECK(trace.root.total == tracetree::Nanos(0));
    REQUIRE(trace.root.children.size() == 1);
    CHECK(trace.root.children[0].total == tracetree::Nanos(-5));
    CHECK(trace.thread_name.empty());
    const auto value = tracetree::read_json(R"({"format":"tracetree","version":1,"kind":"profile"})");
    CHECK(std::holds_alternative<tracetree::Profile>(value));
}

TEST_CASE("JSON loader: malformed input gives an error that says where") {
    const std::string head = R"({"format":"tracetree","version":1,"kind":"trace","root":)";
    struct Case {
        std::string text, message;
    };
    const Case cases[] = {
        {"", "line 1, column 1 (byte 0): unexpected end of input"},
        {"   \n  ", "line 2, column 3 (byte 6): unexpected end of input"},
        {"[]", "line 1, column 1 (byte 0): expected '{'"},
        {"{\"format\":\"tracetree\",\n\"version\":1 \"kind\"", "line 2, column 13 (byte 35): expected ',' or '}'"},
        {"{\"format\":tracetree}", "column 11 (byte 10): expected a string"},
        {"{\"format\":\"trace", "column 17 (byte 16): unterminated string"},
        {"{\"format\":\"a\tb\"}", "column 13 (byte 12): control character in a string"},
        {"{\"format\":\"\\x\"}", "column 12 (byte 11): unknown escape"},
        {"{\"format\":\"\\ud800x\"}", "high surrogate without its low half"},
        {"{\"format\":\"\\udc00\"}", "lone low surrogate"},
        {"{\"format\":\"\\u12g4\"}", "expected four hex digits"},
        {"{\"format\":\"\xC3\x28\"}", "column 12 (byte 11): invalid UTF-8"},
        {"{\"format\":\"tracetree\"} x", "column 24 (byte 23): unexpected text after the JSON value"},
        {"{\"format\":\"tracetree\",}", "expected a string key"},
        {"{\"format\":\"x\",\"format\":\"y\"}", "column 15 (byte 14): duplicate key \"format\""},
        {"{\"format\":\"csv\",\"version\":1}", "not a tracetree file"},
        {"{\"format\":\"tracetree\",\"version\":2,\"kind\":\"trace\"}", "unsupported version 2"},
        {"{\"format\":\"tracetree\",\"version\":1,\"kind\":\"tree\"}", "column 42 (byte 41): \"kind\" must be"},
        {"{\"format\":\"tracetree\",\"version\":1,\"kind\":\"trace\"}", "trace without a \"root\""},
        {head + "{\"count\":1}}", "column 57 (byte 56): node without a \"name\""},
        {head + "{\"name\":\"a\",\"count\":-1}}", "expected a non-negative integer"},
        {head + "{\"name\":\"a\",\"count\":1.5}}", "expected an integer"},
        {head + "{\"name\":\"a\",\"count\":1e3}}", "expected an integer"},
        {head + "{\"name\":\"a\",\"count\":18446744073709551616}}", "integer out of range"},
        {head + "{\"name\":\"a\",\"total_ns\":9223372036854775808}}", "integer out of range"},
        {head + "{\"name\":\"a\",\"line\":4294967296}}", "integer out of range"},
        {head + "{\"name\":\"a\",\"line\":01}}", "expected ',' or '}'"},
        {head + "{\"name\":\"a\",\"children\":{}}}", "expected '['"},
        {head + "{\"name\":\"a\",\"children\":[1]}}", "expected '{'"},
        {head + "{\"name\":7}}", "expected a string"},
        {"{\"format\":\"tracetree\",\"version\":1,\"kind\":\"trace\",\"fields\":[[\"k\"]]}", "a field must be [key, value]"},
        {"{\"format\":\"tracetree\",\"version\":1,\"kind\":\"profile\",\"threads\":[{\"exited\":1}]}", "expected true or false"},
        {"{\"x\":-}", "expected a digit"},
        {"{\"x\":1.}", "expected a digit"},
        {"{\"x\":nul}", "expected a value"},
        {"{\"x\":tracetree}", "column 6 (byte 5): expected a value"},
    };
    for (const Case& c : cases) {
        INFO(c.text);
        const std::string message = error_of(c.text);
        CHECK(message.rfind("tracetree: bad JSON at ", 0) == 0);
        CHECK(message.find(c.message) != std::string::npos);
        if (message.find(c.message) == std::string::npos) MESSAGE(message);
    }
    try {
        tracetree::read_json("{\n  \"format\": tracetree}");
        FAIL("no error");
    } catch (const tracetree::JsonError& e) {
        CHECK(e.line() == 2);
        CHECK(e.column() == 13);
        CHECK(e.offset() == 14);
    }
    CHECK_THROWS_AS(tracetree::read_trace_json(json(samples::hostile_profile())), tracetree::JsonError);
    CHECK_THROWS_AS(tracetree::read_profile_json(json(samples::buggy_request())), std::invalid_argument);
}

TEST_CASE("JSON loader: every truncation and every damaged byte gives a value or a JsonError") {
    const std::string text = json(samples::buggy_request());
    for (std::size_t length = 0; length + 1 < text.size(); ++length) {  // all but the final newline
        const std::string_view prefix(text.data(), length);
        if (prefix.find_first_not_of(" \t\r\n") == std::string_view::npos && length != 0) continue;
        CHECK_THROWS_AS(tracetree::read_json(prefix), tracetree::JsonError);
    }
    const char replacements[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '0', '-', 'e', '\0', '\x80', ' '};
    std::size_t loaded = 0, refused = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        for (char r : replacements) {
            std::string damaged = text;
            damaged[i] = r;
            try {
                tracetree::read_json(damaged);
                ++loaded;
            } catch (const tracetree::JsonError&) {
                ++refused;
            }
        }
    }
    CHECK(loaded > 0);
    CHECK(refused > 0);
}

TEST_CASE("JSON loader: nesting is bounded, so deep input cannot exhaust the stack") {
    CHECK(error_of("{\"x\":" + std::string(1000000, '[')).find("nested deeper than 2048 levels") != std::string::npos);
    std::string deep = R"({"format":"tracetree","version":1,"kind":"trace","root":)";
    for (int i = 0; i < 100000; ++i) deep += R"({"name":"n","children":[)";
    CHECK(error_of(deep).find("nested deeper than 2048 levels") != std::string::npos);

    // 1000 levels of calls still load (two JSON levels each).
    tracetree::Trace trace;
    trace.root.name = "level";
    for (int i = 0; i < 1000; ++i) {
        tracetree::Node parent;
        parent.name = "level";
        parent.children.push_back(std::move(trace.root));
        trace.root = std::move(parent);
    }
    const tracetree::Trace loaded = tracetree::read_trace_json(json(trace));
    std::size_t depth = 0;
    for (const tracetree::Node* n = &loaded.root; !n->children.empty(); n = &n->children[0]) ++depth;
    CHECK(depth == 1000);
}
