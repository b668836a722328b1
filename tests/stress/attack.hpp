// Shared by the attack tests (docs/testing.md, "What we attack"): which build this is, the process's
// resident memory, and threads with small stacks (creating 20,000 threads with 8 MiB stacks costs
// seconds of page mapping on a small VM; tracetree's work on a thread needs a few KiB of stack).
#ifndef TRACETREE_TESTS_STRESS_ATTACK_HPP
#define TRACETREE_TESTS_STRESS_ATTACK_HPP

#include "stress.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <pthread.h>

#include "../sanitizers.hpp"

namespace attack {

inline constexpr bool kSanitized = sanitizers::kAddressOrThread;

// Built to run under an emulator (tests/cross: qemu-aarch64, which emulates every instruction and
// whose own memory is resident in the process too).
#if defined(TRACETREE_TEST_EMULATED)
inline constexpr bool kEmulated = true;
#else
inline constexpr bool kEmulated = false;
#endif
// Fewer threads and rounds where every instruction costs many (sanitizers, emulators).
inline constexpr bool kShort = kSanitized || kEmulated;

inline constexpr std::int64_t kKiB = 1024, kMiB = 1024 * 1024;
// Limits::max_name_length's default: longer run-time names are cut.
inline constexpr std::size_t kNameSize = 1024;

// A field of /proc/self/status in KiB ("VmRSS:", "VmHWM:"), or -1.
inline std::int64_t status_kib(const std::string& field) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.compare(0, field.size(), field) == 0) return std::stoll(line.substr(field.size()));
    return -1;
}

// VmHWM (peak resident size) starts again from the current VmRSS (Linux 4.0 and later).
inline bool reset_peak_rss() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    return static_cast<bool>(clear);
}

// Heap bytes in use, as the stress tests count them (alloc_counter.cpp): exact in plain builds, the
// sanitizer's own count under ASan and TSan. The peak is known only in plain builds.
struct Heap {
    std::int64_t live_before = stress::heap_live_bytes();
    Heap() { stress::heap_reset_peak(); }
    std::int64_t growth() const { return stress::heap_live_bytes() - live_before; }
    std::int64_t peak_growth() const {  // the live growth where the peak is not known
        const std::int64_t peak = stress::heap_peak_bytes();
        return peak >= 0 ? peak - live_before : growth();
    }
};

inline std::string mib(std::int64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
    return text;
}

// Starts `body` on a thread with a small stack; join() waits for it.
class SmallThread {
public:
    explicit SmallThread(std::function<void()> body) : body_(std::move(body)) {
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        // Sanitizers need room for their own frames and reports.
        pthread_attr_setstacksize(&attributes, kSanitized ? 1024 * 1024 : 128 * 1024);
        started_ = pthread_create(&thread_, &attributes, &SmallThread::run, this) == 0;
        pthread_attr_destroy(&attributes);
    }
    ~SmallThread() { join(); }
    SmallThread(const SmallThread&) = delete;
    SmallThread& operator=(const SmallThread&) = delete;
    bool started() const { return started_; }
    void join() {
        if (started_) pthread_join(thread_, nullptr);
        started_ = false;
    }

private:
    static void* run(void* self) {
        static_cast<SmallThread*>(self)->body_();
        return nullptr;
    }
    std::function<void()> body_;
    pthread_t thread_{};
    bool started_ = false;
};

}  // namespace attack

#endif
