// Shared by the stress tests: flattening profiles into path -> count maps the tests can compare with
// counts they kept themselves, and a heap-byte counter (alloc_counter.cpp) for memory bounds.
#ifndef TRACETREE_TESTS_STRESS_HPP
#define TRACETREE_TESTS_STRESS_HPP

#include <tracetree/all.hpp>
#include <tracetree/runtime/runtime.hpp>  // the recorder reached directly (the suite compiles declarations only)

#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace stress {

// "a > b > c" -> calls completed on that path.
using Counts = std::map<std::string, std::uint64_t>;

inline void flatten(const tracetree::Node& node, const std::string& prefix, Counts& into) {
    const std::string path = prefix.empty() ? node.name : prefix + " > " + node.name;
    if (node.count != 0) into[path] += node.count;
    for (const auto& child : node.children) flatten(child, path, into);
}

inline Counts flatten(const std::vector<tracetree::Node>& roots) {
    Counts counts;
    for (const auto& root : roots) flatten(root, "", counts);
    return counts;
}

inline std::uint64_t dropped_below(const tracetree::Node& node) {
    std::uint64_t total = node.dropped;
    for (const auto& child : node.children) total += dropped_below(child);
    return total;
}

inline const tracetree::ThreadProfile* find_thread(const tracetree::Profile& profile, const std::string& name) {
    for (const auto& thread : profile.threads)
        if (thread.thread_name == name) return &thread;
    return nullptr;
}

// Small, fast and seeded: every run of a test sees the same shapes for the same seed.
using Rng = std::minstd_rand;
inline std::uint32_t pick(Rng& rng, std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); }

// Bytes currently allocated on the heap, and the most allocated at once since heap_reset_peak()
// (every stress binary links alloc_counter.cpp). Under ASan and TSan the peak is not known: -1.
std::int64_t heap_live_bytes() noexcept;
std::int64_t heap_peak_bytes() noexcept;
void heap_reset_peak() noexcept;  // peak := live

}  // namespace stress

#endif
