// tracetree CPU time: how much of a traced invocation its thread spent off CPU. SPDX-License-Identifier: MIT
//
// Measured only when a capture is delivered (runtime.hpp's end_capture), never on a scope's path.
// Two sources, chosen once per thread when it first prepares a capture:
//   - switches: the thread's own context switches, which the kernel writes with their time into a
//     ring mapped here (perf_event_open of a software event on this thread: no privilege needed
//     below perf_event_paranoid 3). An invocation's off-CPU time is the overlap of each switch-out ..
//     switch-in pair with its interval, read back from its end: nothing is done at its start, and a
//     switch-out says whether the thread was preempted (runnable, waiting for a CPU) or blocked.
//   - thread clock: where that is refused, the thread's CPU clock (clock_gettime) at the capture's
//     start and at its delivery; a system call each, and it cannot tell preempted from blocked.
#ifndef TRACETREE_RUNTIME_CPU_TIME_HPP
#define TRACETREE_RUNTIME_CPU_TIME_HPP

#include "../core/recorder.hpp"  // the namespace

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>  // std::atoi
#include <cstring>  // std::memset, strerror_r
#include <ctime>    // clock_gettime
#include <mutex>
#include <string>
#include <fcntl.h>               // open: perf_event_paranoid, said when the switches are refused
#include <linux/perf_event.h>    // the event's attributes and the ring's records
#include <sys/mman.h>            // the ring
#include <sys/syscall.h>         // perf_event_open has no libc wrapper
#include <unistd.h>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

enum class CpuSource : std::uint8_t { none, switches, thread_clock };

inline const char* cpu_source_name(CpuSource source) noexcept {
    switch (source) {
    case CpuSource::switches: return "context switches (perf_event_open)";
    case CpuSource::thread_clock: return "thread CPU clock (clock_gettime)";
    default: return "none yet";
    }
}

// What a delivered invocation's thread did besides running: off CPU, of which runnable (preempted).
struct OffCpuTime {
    std::int64_t off_ns = 0;
    std::int64_t runnable_ns = 0;
    bool runnable_known = false;  // false: the source cannot split off-CPU time (thread clock)
};

inline std::int64_t monotonic_ns() noexcept {  // the clock the kernel stamps the switches with
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}
inline std::int64_t thread_cpu_ns() noexcept {
    timespec now{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) return -1;
    return static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Which source the process's threads use, for recorder_info(); shared by all threads.
class CpuSources {
public:
    // Tests: threads that decide after this use `source` (none: the usual choice).
    void force(CpuSource source) noexcept { forced_.store(source); }
    CpuSource forced() const noexcept { return forced_.load(); }

    void chose(CpuSource source, const std::string& refusal) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        last_ = source;
        try {
            if (!refusal.empty()) note_ = refusal;
        } catch (...) {  // out of memory: the note is lost
        }
    }
    CpuSource last() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return last_;
    }
    std::string note() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return note_;
    }

private:
    std::atomic<CpuSource> forced_{CpuSource::none};
    mutable std::mutex mutex_;
    CpuSource last_ = CpuSource::none;
    std::string note_;  // why the last refusal of the switch records happened
};

inline CpuSources& cpu_sources() noexcept {
    static CpuSources sources;
    return sources;
}

// One thread's source. Owner only.
class ThreadCpu {
public:
    ThreadCpu() = default;
    ThreadCpu(const ThreadCpu&) = delete;
    ThreadCpu& operator=(const ThreadCpu&) = delete;
    ~ThreadCpu() { close(); }

    CpuSource source() const noexcept { return source_; }

    // Once per thread, before its first captured invocation starts (the ring must already be there).
    void open() noexcept {
        if (source_ != CpuSource::none) return;
        std::string refusal;
        if (cpu_sources().forced() != CpuSource::thread_clock) refusal = open_switches();
        else refusal = "the thread CPU clock was asked for (test)";
        source_ = page_ != nullptr ? CpuSource::switches : CpuSource::thread_clock;
        cpu_sources().chose(source_, refusal);
    }

    // The ring and its descriptor go; in a forked child they would still be the parent thread's.
    void close() noexcept {
        if (page_ != nullptr) munmap(page_, kMapped);
        if (fd_ >= 0) ::close(fd_);
        page_ = nullptr;
        fd_ = -1;
        source_ = CpuSource::none;
    }

    // Off-CPU time within [t0, t1] (CLOCK_MONOTONIC ns); false when it cannot be known (the ring
    // wrapped before t0, or was opened after it).
    bool off_cpu(std::int64_t t0, std::int64_t t1, OffCpuTime& out) const noexcept {
        if (page_ == nullptr) return false;
        for (int attempt = 0; attempt < 4; ++attempt) {  // a switch while reading moves the head: again
            const std::uint64_t head = __atomic_load_n(&page_->data_head, __ATOMIC_ACQUIRE);
            const bool complete = walk(head, t0, t1, out);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (__atomic_load_n(&page_->data_head, __ATOMIC_RELAXED) == head) return complete;
        }
        return false;
    }

private:
    static constexpr std::size_t kData = 4096;  // 256 records: 128 switches inside one invocation
    static constexpr std::size_t kMapped = 4096 + kData;  // the control page, then the ring

    std::string open_switches() noexcept {
        if (sysconf(_SC_PAGESIZE) != 4096) return "the page size is not 4 KiB";
        perf_event_attr attr;
        std::memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_DUMMY;  // counts nothing: only the switch records are wanted
        attr.context_switch = 1;
        attr.sample_id_all = 1;
        attr.sample_type = PERF_SAMPLE_TIME;
        attr.use_clockid = 1;
        attr.clockid = CLOCK_MONOTONIC;
        attr.write_backward = 1;  // newest first from the head; with a read-only mapping, old records are overwritten
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) return refusal("perf_event_open", errno);
        void* mapped = mmap(nullptr, kMapped, PROT_READ, MAP_SHARED, static_cast<int>(fd), 0);
        if (mapped == MAP_FAILED) {
            const int error = errno;
            ::close(static_cast<int>(fd));
            return refusal("mmap of its ring", error);
        }
        fd_ = static_cast<int>(fd);
        page_ = static_cast<perf_event_mmap_page*>(mapped);
        opened_ns_ = monotonic_ns();
        return std::string();
    }

    static std::string refusal(const char* what, int error) noexcept {
        try {
            char buffer[128] = {};
            std::string text = std::string(what) + ": " + describe(strerror_r(error, buffer, sizeof buffer), buffer);
            int paranoid = -1;
            const int file = ::open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY | O_CLOEXEC);
            if (file >= 0) {
                char level[16] = {};
                if (read(file, level, sizeof level - 1) > 0) paranoid = std::atoi(level);
                ::close(file);
            }
            if (paranoid >= 0) text += " (perf_event_paranoid " + std::to_string(paranoid) + ")";
            return text;
        } catch (...) {
            return std::string();
        }
    }
    // strerror_r is the GNU one (a pointer) or the XSI one (an int): both are handled.
    static const char* describe(const char* text, const char*) noexcept { return text; }
    static const char* describe(int, const char* buffer) noexcept { return buffer; }

    // The records from `head`, newest first, until one older than t0. A record is its header, then
    // (sample_id_all) its time as its last 8 bytes.
    bool walk(std::uint64_t head, std::int64_t t0, std::int64_t t1, OffCpuTime& out) const noexcept {
        out = OffCpuTime{};
        out.runnable_known = true;
        const unsigned char* ring = reinterpret_cast<const unsigned char*>(page_) + 4096;
        const std::uint64_t written = 0 - head;  // backward: the head counts down from 0
        const std::uint64_t readable = written < kData ? written : kData;
        std::int64_t back_in = t1;  // the switch-in after the records read so far (running at t1)
        for (std::uint64_t at = 0; at + sizeof(perf_event_header) + 8 <= readable;) {
            perf_event_header header;
            copy_out(ring, head + at, &header, sizeof header);
            if (header.size < sizeof header + 8 || at + header.size > readable) break;  // cut by the wrap
            std::uint64_t stamp = 0;
            copy_out(ring, head + at + header.size - 8, &stamp, sizeof stamp);
            const auto time = static_cast<std::int64_t>(stamp);
            if (header.type == PERF_RECORD_SWITCH) {
                if ((header.misc & PERF_RECORD_MISC_SWITCH_OUT) == 0) {
                    back_in = time;
                } else {
                    const std::int64_t from = time > t0 ? time : t0;
                    const std::int64_t to = back_in < t1 ? back_in : t1;
                    if (to > from) {
                        out.off_ns += to - from;
                        if ((header.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0) out.runnable_ns += to - from;
                    }
                    back_in = time;
                }
            }
            if (time < t0) return true;
            at += header.size;
        }
        // All of the ring was read without reaching t0: known only if nothing was lost before it.
        return written <= kData && opened_ns_ <= t0;
    }

    static void copy_out(const unsigned char* ring, std::uint64_t position, void* to, std::size_t size) noexcept {
        auto* bytes = static_cast<unsigned char*>(to);
        for (std::size_t i = 0; i < size; ++i) bytes[i] = ring[(position + i) % kData];
    }

    CpuSource source_ = CpuSource::none;
    int fd_ = -1;
    perf_event_mmap_page* page_ = nullptr;
    std::int64_t opened_ns_ = 0;
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_CPU_TIME_HPP
