// Shared by the core tests: a clock the test moves by hand, so recorded times are exact.
#ifndef TRACETREE_TESTS_SUPPORT_HPP
#define TRACETREE_TESTS_SUPPORT_HPP

#include <tracetree/all.hpp>
#include <tracetree/runtime/runtime.hpp>  // the tests reach into the rooms (the suite compiles declarations only)

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>

// What AddressSanitizer changes: clang's links its own __cxa_throw first (no throw nodes:
// throws_seen() is false, and only then), and its allocator takes no lock around fork() (a child forked
// while another thread is in malloc can hang).
#if defined(__SANITIZE_ADDRESS__)
#define TRACETREE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRACETREE_TEST_ASAN 1
#endif
#endif
#ifndef TRACETREE_TEST_ASAN
#define TRACETREE_TEST_ASAN 0
#endif

namespace test {

// Whether this process's throws reach tracetree's hook: always, except under a sanitizer that puts its
// own __cxa_throw first (the hook tests fail if anything else turns it off).
inline bool throws_seen() {
    const tracetree::RecorderInfo info = tracetree::recorder_info();
    return info.throw_hook || !TRACETREE_TEST_ASAN;
}

using namespace std::chrono_literals;

inline std::atomic<std::uint64_t> fake_now{1000000000};
inline std::uint64_t fake_clock() noexcept { return fake_now.load(); }
inline void advance(std::chrono::nanoseconds by) { fake_now += static_cast<std::uint64_t>(by.count()); }

// Installs the fake clock and starts from an empty profile; restores the real clock afterwards.
struct FakeClock {
    FakeClock() {
        tracetree::set_clock(fake_clock);
        tracetree::reset();
        tracetree::set_thread_name("test-main");
        tracetree::clear_annotations();
    }
    ~FakeClock() { tracetree::set_clock(nullptr); }
    FakeClock(const FakeClock&) = delete;
    FakeClock& operator=(const FakeClock&) = delete;
};

inline const tracetree::ThreadProfile* find_thread(const tracetree::Profile& profile, const std::string& name) {
    for (const auto& thread : profile.threads)
        if (thread.thread_name == name) return &thread;
    return nullptr;
}

// Runs `body` on a new thread named `name` (a fresh tree) and returns what that thread recorded,
// read before it ends.
template <class Body>
tracetree::ThreadProfile recorded_by(const std::string& name, Body body) {
    tracetree::ThreadProfile recorded;
    std::thread([&] {
        tracetree::set_thread_name(name);
        body();
        const tracetree::Profile profile = tracetree::profile();
        if (const tracetree::ThreadProfile* thread = find_thread(profile, name)) recorded = *thread;
    }).join();
    return recorded;
}

inline const tracetree::Node* find_child(const tracetree::Node& node, const std::string& name) {
    for (const auto& child : node.children)
        if (child.name == name) return &child;
    return nullptr;
}

inline const tracetree::Node* find_root(const tracetree::ThreadProfile& thread, const std::string& name) {
    for (const auto& root : thread.roots)
        if (root.name == name) return &root;
    return nullptr;
}

// The node at the end of `names`, from one of the thread's roots; null when any is missing.
inline const tracetree::Node* on_path(const tracetree::ThreadProfile& thread, std::initializer_list<const char*> names) {
    const tracetree::Node* node = nullptr;
    for (const char* name : names) {
        node = node == nullptr ? find_root(thread, name) : find_child(*node, name);
        if (node == nullptr) return nullptr;
    }
    return node;
}

// The same lookups for a test that goes on to read the node: a missing one fails the test case there,
// naming what it looked for, instead of a null dereference that ends the whole program.
inline const tracetree::ThreadProfile& thread_at(const tracetree::Profile& profile, const std::string& name) {
    const tracetree::ThreadProfile* thread = find_thread(profile, name);
    REQUIRE_MESSAGE(thread != nullptr, "no thread named '" << name << "' in the profile");
    return *thread;
}

inline const tracetree::Node& node_at(const tracetree::ThreadProfile& thread, std::initializer_list<const char*> names) {
    std::string path;
    for (const char* name : names) path += (path.empty() ? "" : " > ") + std::string(name);
    const tracetree::Node* node = on_path(thread, names);
    REQUIRE_MESSAGE(node != nullptr, "no node at " << path << " in the tree of '" << thread.thread_name << "'");
    return *node;
}

inline const tracetree::Node& child_at(const tracetree::Node& node, const std::string& name) {
    const tracetree::Node* child = find_child(node, name);
    REQUIRE_MESSAGE(child != nullptr, "no child '" << name << "' under '" << node.name << "'");
    return *child;
}

// Counts down to zero; wait() returns then.
class Latch {
public:
    explicit Latch(int count) : count_(count) {}
    void count_down() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--count_ == 0) zero_.notify_all();
    }
    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        zero_.wait(lock, [&] { return count_ == 0; });
    }

private:
    std::mutex mutex_;
    std::condition_variable zero_;
    int count_;
};

// The calling thread's profile.
inline tracetree::ThreadProfile mine() {
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, "test-main");
    return thread != nullptr ? *thread : tracetree::ThreadProfile{};
}

}  // namespace test

int second_tu_work(int calls);  // second_tu.cpp

#endif
