// Shared by the XRay tests: the clock traced_code.cpp advances, and the recorded trees as short text.
#ifndef TRACETREE_TESTS_XRAY_SUPPORT_HPP
#define TRACETREE_TESTS_XRAY_SUPPORT_HPP

#include "traced_code.hpp"

#include <tracetree/all.hpp>
#include <tracetree/xray/xray.hpp>

#include <algorithm>
#include <cstring>
#include <string>

namespace xray_test {

inline std::uint64_t traced_clock() noexcept { return xtest::now_ns.load(); }

// The clock of traced_code.cpp, an empty profile, and this thread named "main".
struct Recording {
    Recording() {
        tracetree::set_clock(traced_clock);
        tracetree::reset();
        tracetree::set_thread_name("main");
    }
    ~Recording() { tracetree::set_clock(nullptr); }
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
};

// XRay's own state of a function, read from its code: an unpatched entry sled starts with a short
// jump over itself (0xEB), a patched one with `mov $id, %r10d` (0x41 0xBA).
inline bool sled_patched(const std::string& name) {
    for (const auto& function : tracetree::xray::functions()) {
        if (function.name != name) continue;
        unsigned char first = 0;
        std::memcpy(&first, reinterpret_cast<const void*>(function.address), 1);
        return first != 0xEB;
    }
    throw std::runtime_error("no XRay function " + name);
}

// This thread's roots, as recorded so far.
inline std::vector<tracetree::Node> my_roots() {
    for (const auto& thread : tracetree::profile().threads)
        if (thread.thread_name == "main" && !thread.exited) return thread.roots;
    return {};
}

inline void add_counts(const tracetree::Node& node, const std::string& name, std::uint64_t& count) {
    if (node.name == name) count += node.count;
    for (const auto& child : node.children) add_counts(child, name, count);
}
// Completed calls of `name` anywhere in this thread's tree.
inline std::uint64_t count_of(const std::string& name) {
    std::uint64_t count = 0;
    for (const auto& root : my_roots()) add_counts(root, name, count);
    return count;
}

inline const tracetree::Node* child_of(const tracetree::Node& node, const std::string& name) {
    for (const auto& child : node.children)
        if (child.name == name) return &child;
    return nullptr;
}
// A root of this thread's tree, kept until the next call.
inline const tracetree::Node* root_of(const std::string& name) {
    static std::vector<tracetree::Node> roots;
    roots = my_roots();
    for (const auto& root : roots)
        if (root.name == name) return &root;
    return nullptr;
}

// "name [tail call] [count=N] [throws=N] total-ns", two spaces of indent per level, siblings by name: a tree's
// nodes outlive reset() in the order they were first made, by earlier tests too.
inline void node_text(std::string& out, const tracetree::Node& node, int depth);
inline void nodes_text(std::string& out, std::vector<tracetree::Node> nodes, int depth) {
    std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    for (const auto& node : nodes) node_text(out, node, depth);
}
inline void node_text(std::string& out, const tracetree::Node& node, int depth) {
    out.append(static_cast<std::size_t>(2 * depth), ' ');
    out += node.kind == tracetree::NodeKind::thrown ? "throw:" + node.name : node.name;
    if (node.file == "(tail call)") out += " [tail call]";
    if (node.count != 1) out += " count=" + std::to_string(node.count);
    if (node.throws != 0) out += " throws=" + std::to_string(node.throws);
    out += " " + std::to_string(node.total.count()) + "\n";
    nodes_text(out, node.children, depth + 1);
}
inline std::string tree_text() {
    std::string out;
    nodes_text(out, my_roots(), 0);
    return out;
}
inline std::string trace_text(const tracetree::Trace& trace) {
    std::string out;
    node_text(out, trace.root, 0);
    return out;
}

}  // namespace xray_test

#endif
