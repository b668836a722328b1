// Off-CPU time of traced invocations (issue 41): against the kernel's own account of the thread
// (/proc/self/task/TID/schedstat), with each source. Real clocks, real threads: shares are asserted
// with generous bounds, never speeds.
#include <tracetree/otlp.hpp>
#include <tracetree/render.hpp>
#include <tracetree/sessions.hpp>
#include <tracetree/views.hpp>
#include <tracetree/runtime/cpu_time.hpp>  // the test hook: which source a new thread uses

#include <doctest/doctest.h>

#include "fork_child.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <ctime>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

using tracetree::detail::CpuSource;
using namespace std::chrono_literals;

std::int64_t now_ns(clockid_t clock) {
    timespec t{};
    clock_gettime(clock, &t);
    return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// The kernel's run time of this thread (schedstat's first field), in ns.
std::int64_t schedstat_run_ns() {
    std::ifstream file("/proc/self/task/" + std::to_string(syscall(SYS_gettid)) + "/schedstat");
    std::int64_t run = -1;
    file >> run;
    REQUIRE_MESSAGE(run >= 0, "/proc/self/task/TID/schedstat is not readable");
    return run;
}

// Runs on the CPU until the thread has used `cpu` of CPU time, however long that takes on the wall.
void spin_for(std::chrono::nanoseconds cpu) {
    const std::int64_t until = now_ns(CLOCK_THREAD_CPUTIME_ID) + cpu.count();
    volatile std::uint64_t sink = 0;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until)
        for (int i = 0; i < 10000; ++i) sink = sink + static_cast<std::uint64_t>(i);
}

// The work in a scope of its own under the traced one: a capture starts at the first scope under the
// traced scope, and the thread CPU clock source reads its clock there (before it, the time counts as
// on CPU).
void crunch(std::chrono::nanoseconds cpu) {
    TRACETREE_SCOPE("cpu.crunch");
    TRACETREE_SCOPE("cpu.spin");
    spin_for(cpu);
}

struct Signal {
    std::mutex mutex;
    std::condition_variable changed;
    bool set = false;
};

void wait_blocked(Signal& signal) {
    TRACETREE_SCOPE("cpu.wait");
    std::unique_lock<std::mutex> lock(signal.mutex);
    signal.changed.wait(lock, [&] { return signal.set; });
}

void wait_then_compute(Signal& signal) {
    TRACETREE_SCOPE("cpu.wait_then_compute");
    wait_blocked(signal);
    {
        TRACETREE_SCOPE("cpu.compute");
        spin_for(3ms);
    }
}

// Whether thread `tid` is asleep (state S in /proc/self/task/TID/stat).
bool asleep(long tid) {
    std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const std::size_t paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'S';
}

// The first CPU this process may run on: the test thread and the busy one share it.
int shared_cpu() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &allowed)) return cpu;
    FAIL("no CPU allowed");
    return 0;
}
void pin_to(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
}

double share(tracetree::Nanos part, tracetree::Nanos whole) { return 100.0 * static_cast<double>(part.count()) / static_cast<double>(whole.count()); }

// Runs `body` on a thread of its own, whose source is chosen when it first captures.
template <class Body>
void on_new_thread(CpuSource source, Body&& body) {
    tracetree::detail::cpu_sources().force(source);
    std::thread thread(std::forward<Body>(body));
    thread.join();
    tracetree::detail::cpu_sources().force(CpuSource::none);
}

struct Measured {
    tracetree::Trace trace;
    double kernel_off = 0;  // schedstat's off-CPU share of the same interval, in percent
    double clock_off = 0;   // the same from the thread CPU clock, exact also over a few ms (schedstat
                            // is brought up to date at ticks and switches only)
};

// One traced call of crunch(cpu), with the kernel's account of the thread around it.
Measured traced_crunch(tracetree::TraceSession& session, std::chrono::nanoseconds cpu) {
    Measured measured;
    const std::int64_t wall0 = now_ns(CLOCK_MONOTONIC), run0 = schedstat_run_ns(), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    crunch(cpu);
    const std::int64_t cpu1 = now_ns(CLOCK_THREAD_CPUTIME_ID), run1 = schedstat_run_ns(), wall1 = now_ns(CLOCK_MONOTONIC);
    const auto wall = static_cast<double>(wall1 - wall0);
    measured.kernel_off = 100.0 * (1.0 - static_cast<double>(run1 - run0) / wall);
    measured.clock_off = 100.0 * (1.0 - static_cast<double>(cpu1 - cpu0) / wall);
    std::optional<tracetree::Trace> trace = session.next(10s);
    REQUIRE(trace.has_value());
    measured.trace = std::move(*trace);
    REQUIRE_MESSAGE(measured.trace.root.off_cpu.has_value(), "the trace says nothing of the time off CPU");
    return measured;
}

void shared_core_matches_schedstat(CpuSource source) {
    tracetree::TraceSession session(tracetree::TraceRequest("cpu.crunch").limit(1000));
    on_new_thread(source, [&] {
        const int cpu = shared_cpu();
        pin_to(cpu);
        std::atomic<bool> stop{false};
        std::thread busy([&] {
            pin_to(cpu);
            while (!stop.load(std::memory_order_relaxed)) {
            }
        });
        const Measured m = traced_crunch(session, 100ms);  // schedstat's ticks (4 ms at most) a few points of it
        stop = true;
        busy.join();
        const tracetree::OffCpu& off = *m.trace.root.off_cpu;
        const double traced = share(off.off, m.trace.root.total);
        INFO("off CPU: trace ", traced, "%, schedstat ", m.kernel_off, "%; source ", tracetree::recorder_info().cpu_time_source);
        CHECK(m.kernel_off > 20.0);  // the busy thread did take the core: else this test shows nothing
        CHECK(traced > m.kernel_off - 10.0);
        CHECK(traced < m.kernel_off + 10.0);
        // The thread clock is read when the capture starts, at the first scope below: a preemption
        // before it (the busy thread shares the core) leaves part unknown, and the figure a lower bound.
        if (source != CpuSource::thread_clock) CHECK_FALSE(off.at_least);
        if (source != CpuSource::thread_clock) {  // preempted while runnable, not blocked
            REQUIRE(off.runnable.has_value());
            CHECK(share(*off.runnable, m.trace.root.total) > traced - 10.0);
        } else {
            CHECK_FALSE(off.runnable.has_value());
        }
        // The text a person reads says it; Arthas's text does not.
        CHECK(tracetree::to_string(m.trace).find("[on CPU ") != std::string::npos);
        std::ostringstream arthas;
        tracetree::render(arthas, m.trace, tracetree::RenderOptions().colour(tracetree::Colour::never));
        CHECK(arthas.str().find("CPU") == std::string::npos);
    });
}

void blocked_is_off_cpu(CpuSource source) {
    tracetree::TraceSession session(tracetree::TraceRequest("cpu.wait_then_compute"));
    Signal signal;
    std::atomic<long> waiter{0};
    std::thread waker([&] {
        while (waiter.load() == 0 || !asleep(waiter.load())) std::this_thread::yield();
        spin_for(30ms);  // the waiter stays blocked meanwhile
        {
            std::lock_guard<std::mutex> lock(signal.mutex);
            signal.set = true;
        }
        signal.changed.notify_one();
    });
    on_new_thread(source, [&] {
        waiter = syscall(SYS_gettid);
        wait_then_compute(signal);
    });
    waker.join();
    std::optional<tracetree::Trace> trace = session.next(10s);
    REQUIRE(trace.has_value());
    const tracetree::Node& root = trace->root;
    REQUIRE(root.off_cpu.has_value());
    INFO(tracetree::to_string(*trace));
    CHECK(share(root.off_cpu->off, root.total) > 50.0);
    if (source != CpuSource::thread_clock) {
        REQUIRE(root.off_cpu->runnable.has_value());
        CHECK(share(root.off_cpu->off - *root.off_cpu->runnable, root.total) > 50.0);  // blocked, not preempted
    }
    // Below the root: the wait must have been off CPU; the computing, preempted or not, ran its 3 ms of
    // CPU time, which no bound takes from it (1 ms for the two clocks' disagreement).
    REQUIRE(root.children.size() == 2);
    const tracetree::Node& wait = root.children[0];
    const tracetree::Node& compute = root.children[1];
    CHECK(wait.name == "cpu.wait");
    CHECK(wait.mostly_off_cpu());
    REQUIRE(wait.off_cpu.has_value());
    CHECK(wait.off_cpu->at_least);
    CHECK(compute.name == "cpu.compute");
    if (compute.off_cpu) CHECK(compute.off_cpu->off <= compute.total - 2ms);
    CHECK(tracetree::to_string(*trace).find("cpu.wait #" + std::to_string(wait.line) + " [off CPU >= ") != std::string::npos);
}

}  // namespace

TEST_CASE("a CPU-bound call sharing one core with a busy thread: off CPU as schedstat says (switches)") {
    shared_core_matches_schedstat(CpuSource::none);
    const tracetree::RecorderInfo info = tracetree::recorder_info();
    // Where the kernel refuses the switches (perf_event_paranoid 3), the fallback ran: said so.
    if (info.cpu_time_source != tracetree::detail::cpu_source_name(CpuSource::switches))
        CHECK(!info.cpu_time_note.empty());
}

TEST_CASE("a CPU-bound call sharing one core with a busy thread: off CPU as schedstat says (thread clock)") {
    shared_core_matches_schedstat(CpuSource::thread_clock);
    const tracetree::RecorderInfo info = tracetree::recorder_info();
    CHECK(info.cpu_time_source == tracetree::detail::cpu_source_name(CpuSource::thread_clock));
    CHECK(!info.cpu_time_note.empty());
}

TEST_CASE("a call blocked on a condition variable is off CPU, and its node says so (switches)") {
    blocked_is_off_cpu(CpuSource::none);
}

TEST_CASE("a call blocked on a condition variable is off CPU, and its node says so (thread clock)") {
    blocked_is_off_cpu(CpuSource::thread_clock);
}

TEST_CASE("with the thread CPU clock, a capture that started late gives the root's time off CPU as a lower bound") {
    // The capture starts at the first scope below the traced one: the 5 ms before it are unknown.
    tracetree::TraceSession session(tracetree::TraceRequest("cpu.late"));
    on_new_thread(CpuSource::thread_clock, [] {
        TRACETREE_SCOPE("cpu.late");
        spin_for(5ms);
        TRACETREE_SCOPE("cpu.after");
    });
    const std::optional<tracetree::Trace> trace = session.next(10s);
    REQUIRE(trace.has_value());
    REQUIRE(trace->root.off_cpu.has_value());
    CHECK(trace->root.off_cpu->at_least);
    CHECK(tracetree::to_string(*trace).find("cpu.late [on CPU <= ") != std::string::npos);
}

TEST_CASE("a CPU-bound call alone is on CPU") {
    for (const CpuSource source : {CpuSource::none, CpuSource::thread_clock}) {
        tracetree::TraceSession session(tracetree::TraceRequest("cpu.crunch").limit(1000));
        std::optional<Measured> alone;  // checked here: a failure on the thread would end the program
        on_new_thread(source, [&] {
            // Other programs may take the core too (a loaded machine preempts most 1 ms calls): the
            // verdict is read from a run that the thread CPU clock says was mostly on CPU (at most 30%
            // off), at most 500 tries.
            for (int attempt = 0; attempt < 500 && !alone; ++attempt) {
                Measured m = traced_crunch(session, 1ms);
                if (m.clock_off <= 30.0) alone = std::move(m);
            }
        });
        REQUIRE_MESSAGE(alone.has_value(), "the machine never left a 1 ms call mostly alone in 500 tries");
        const tracetree::OffCpu& off = *alone->trace.root.off_cpu;
        INFO("off CPU: trace ", share(off.off, alone->trace.root.total), "%, thread CPU clock ", alone->clock_off, "%");
        CHECK(share(off.off, alone->trace.root.total) < alone->clock_off + 10.0);
        CHECK_FALSE(alone->trace.root.mostly_off_cpu());
    }
}

TEST_CASE("off-CPU time in JSON (round trip), OTLP attributes and the flame graph") {
    tracetree::TraceSession session(tracetree::TraceRequest("cpu.wait_then_compute"));
    Signal signal;
    std::atomic<long> waiter{0};
    std::thread waker([&] {
        while (waiter.load() == 0 || !asleep(waiter.load())) std::this_thread::yield();
        spin_for(10ms);
        {
            std::lock_guard<std::mutex> lock(signal.mutex);
            signal.set = true;
        }
        signal.changed.notify_one();
    });
    on_new_thread(CpuSource::none, [&] {
        waiter = syscall(SYS_gettid);
        wait_then_compute(signal);
    });
    waker.join();
    std::optional<tracetree::Trace> trace = session.next(10s);
    REQUIRE(trace.has_value());
    REQUIRE(trace->root.off_cpu.has_value());
    REQUIRE(trace->root.children.size() == 2);

    std::ostringstream json;
    tracetree::write_json(json, *trace);
    CHECK(json.str().find("\"off_cpu_ns\":") != std::string::npos);
    const tracetree::Trace back = tracetree::read_trace_json(json.str());
    REQUIRE(back.root.off_cpu.has_value());
    CHECK(back.root.off_cpu->off == trace->root.off_cpu->off);
    CHECK(back.root.off_cpu->runnable == trace->root.off_cpu->runnable);
    CHECK_FALSE(back.root.off_cpu->at_least);
    REQUIRE(back.root.children[0].off_cpu.has_value());
    CHECK(back.root.children[0].off_cpu->at_least);
    // A share without the time it is a share of is refused, saying so.
    CHECK_THROWS_WITH_AS(tracetree::read_trace_json(R"({"format":"tracetree","version":1,"kind":"trace",)"
                                                    R"("root":{"name":"a","runnable_ns":5}})"),
                         doctest::Contains("without \"off_cpu_ns\""), tracetree::JsonError);

    const std::string otlp = tracetree::to_otlp_json({*trace});
    CHECK(otlp.find("\"tracetree.cpu.off_ns\"") != std::string::npos);
    CHECK(otlp.find("\"tracetree.cpu.on_ns\"") != std::string::npos);
    CHECK(otlp.find("\"tracetree.cpu.mostly_off\"") != std::string::npos);

    std::ostringstream svg;
    tracetree::write_flamegraph_svg(svg, *trace);
    CHECK(svg.str().find("&#10;off CPU &gt;= ") != std::string::npos);  // the wait's tooltip
    CHECK(svg.str().find("rgb(150,170,200)") != std::string::npos);
}

TEST_CASE("a forked child measures its own thread, not the parent's") {
    if (fork_child::kWithThreadsUnsafe) return;  // see fork_child.hpp (no thread runs here, but the suite's may linger)
    tracetree::TraceSession session(tracetree::TraceRequest("cpu.crunch").limit(1000));
    traced_crunch(session, 1ms);  // this thread's switches are recorded from here: the child inherits the ring
    const pid_t pid = fork();
    if (pid == 0) {
        // The parent is blocked in waitpid() meanwhile: its ring would say this call was off CPU.
        for (int attempt = 0; attempt < 200; ++attempt) {
            const std::int64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
            crunch(2ms);
            const std::int64_t cpu1 = now_ns(CLOCK_THREAD_CPUTIME_ID), wall1 = now_ns(CLOCK_MONOTONIC);
            std::optional<tracetree::Trace> trace = session.next(10s);
            if (!trace || !trace->root.off_cpu) _exit(2);
            const double kernel = 100.0 * (1.0 - static_cast<double>(cpu1 - cpu0) / static_cast<double>(wall1 - wall0));
            if (kernel > 5.0) continue;  // preempted by another program: try again
            _exit(share(trace->root.off_cpu->off, trace->root.total) < 15.0 ? 0 : 3);
        }
        _exit(4);
    }
    CHECK(fork_child::exit_status(pid) == 0);
}
