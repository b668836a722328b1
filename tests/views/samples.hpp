// Hand-built values for the view tests: exact numbers, no clock.
#ifndef TRACETREE_TESTS_VIEWS_SAMPLES_HPP
#define TRACETREE_TESTS_VIEWS_SAMPLES_HPP

#include <tracetree/all.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace samples {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using tracetree::Nanos;

inline tracetree::Node node(std::string name, std::uint32_t line, std::uint64_t count, Nanos total,
                            std::vector<tracetree::Node> children = {}) {
    tracetree::Node n;
    n.name = std::move(name);
    n.file = n.name.empty() ? "" : "src/app.cpp";
    n.line = line;
    n.count = count;
    n.total = total;
    n.min = count == 0 ? Nanos(0) : Nanos(total.count() / static_cast<std::int64_t>(count) / 2);
    n.max = count == 0 ? Nanos(0) : Nanos(total.count() / static_cast<std::int64_t>(count) * 3 / 2);
    n.children = std::move(children);
    return n;
}

inline std::chrono::system_clock::time_point at(std::int64_t unix_ms) {
    return std::chrono::system_clock::time_point(std::chrono::milliseconds(unix_ms));
}

// The shape of the Tomcat story: every request re-reads a jar while looking up a class.
inline tracetree::Trace buggy_request() {
    tracetree::Trace trace;
    trace.start = at(1764547200123);  // 2025-12-01 00:00:00.123 UTC
    trace.thread_name = "http-nio-8080-exec-1";
    trace.thread_id = 31;
    trace.fields = {{"request", "GET /users"}};
    trace.root = node("Http11Processor::service()", 0, 1, microseconds(120400), {
        node("CoyoteAdapter::service()", 352, 1, microseconds(119800), {
            node("ApplicationFilterChain::doFilter()", 166, 1, microseconds(118900), {
                node("UserController::list()", 41, 1, microseconds(44100), {
                    node("UserRepository::findAll()", 58, 1, microseconds(38250)),
                    node("JsonWriter::write()", 61, 1, microseconds(4900)),
                }),
                node("WebappClassLoader::loadClass()", 1287, 31, microseconds(74600), {
                    node("TomcatJarInputStream::getNextJarEntry()", 94, 33, microseconds(74200)),
                }),
            }),
        }),
    });
    trace.root.children[0].children[0].children[1].throws = 2;
    return trace;
}

// After the fix: classes come from a cache, the jar is not read again.
inline tracetree::Trace fixed_request() {
    tracetree::Trace trace = buggy_request();
    trace.start = at(1764547260456);
    trace.root = node("Http11Processor::service()", 0, 1, microseconds(46300), {
        node("CoyoteAdapter::service()", 355, 1, microseconds(45700), {
            node("ApplicationFilterChain::doFilter()", 166, 1, microseconds(44900), {
                node("UserController::list()", 41, 1, microseconds(43800), {
                    node("UserRepository::findAll()", 58, 1, microseconds(37900)),
                    node("JsonWriter::write()", 61, 1, microseconds(5100)),
                    node("ResponseCache::put()", 70, 1, microseconds(300)),
                }),
                node("WebappClassLoader::loadClass()", 1301, 31, microseconds(600)),
            }),
        }),
    });
    return trace;
}

// Names every format must survive.
inline std::vector<std::string> hostile_names() {
    return {
        "quote\"d \\back\\slash",
        std::string("ctrl\x01\x02\b\f\n\r\t\x1f\x7f end"),
        "semi;colon;s and 'apostrophes' <tag> & amp",
        std::string(3000, 'L') + "::long()",
        "utf-8 caf\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x94\xA5",
        std::string("not utf-8 \xFF\xC3 \xED\xA0\x80 end"),
        std::string("nul\0inside", 10),
        "",
        "]]></title><script>alert(1)</script>",
        "U+2028\xE2\x80\xA8 U+2029\xE2\x80\xA9",
    };
}

inline tracetree::Profile hostile_profile() {
    tracetree::Profile profile;
    profile.taken = at(1764547200000);
    const std::vector<std::string> names = hostile_names();
    tracetree::ThreadProfile thread;
    thread.thread_name = "thread \"name\"\n\\ ;";
    thread.thread_id = 7;
    thread.dropped_depth = 3;
    thread.dropped_nodes = 4;
    tracetree::Node deep = node(names[0], 1, 2, milliseconds(50));
    tracetree::Node* at_node = &deep;
    for (std::size_t i = 1; i < names.size(); ++i) {
        at_node->children.push_back(node(names[i], static_cast<std::uint32_t>(i + 1), i, milliseconds(50 - 4 * static_cast<std::int64_t>(i))));
        at_node->children.push_back(node(names[i] + " sibling", 99, 1, milliseconds(1)));
        at_node = &at_node->children.front();
    }
    deep.file = "dir\\file \"x\".cpp";
    deep.throws = 1;
    deep.dropped = 5;
    thread.roots.push_back(deep);
    profile.threads.push_back(thread);
    tracetree::ThreadProfile second;
    second.thread_name = names[5];
    second.thread_id = 8;
    second.exited = true;
    second.roots.push_back(node(names[2], 3, 4, microseconds(1500)));
    profile.threads.push_back(second);
    return profile;
}

}  // namespace samples

#endif  // TRACETREE_TESTS_VIEWS_SAMPLES_HPP
