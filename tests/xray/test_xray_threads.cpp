// Many threads run patched functions (nested, throwing, recursive) while another thread patches and
// unpatches them by starting and stopping sessions of every kind, and threads come and go. Nothing
// waits for timing: the checks are on what must hold whatever the interleaving.
#include "traced_code.hpp"
#include "xray_support.hpp"
#include "../fork_child.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace churn {
[[gnu::noinline]] void work(int round) {
    TRACETREE_FUNCTION();
    xtest::parent(round % 3);
    xtest::catches(round % 4);
    xtest::recurse(round % 5);
    if (round % 7 == 0) xtest::tail_caller(round);
}
}  // namespace churn

namespace {

void add_roots(const tracetree::Node& node, bool at_root, std::uint64_t& works_at_root, std::uint64_t& works_nested,
               std::uint64_t& others_at_root) {
    if (node.name == "churn::work()") (at_root ? works_at_root : works_nested) += node.count;
    else if (at_root) others_at_root += node.count;
    for (const auto& child : node.children) add_roots(child, false, works_at_root, works_nested, others_at_root);
}

}  // namespace

TEST_CASE("threads run patched functions while sessions start and stop: the trees stay right") {
    tracetree::reset();
    constexpr int kWorkers = 4;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> rounds{0};
    const auto worker = [&](int index, int max_rounds) {
        tracetree::set_thread_name("worker-" + std::to_string(index));
        for (int round = 0; round < max_rounds && !stop.load(); ++round) {
            churn::work(round);
            ++rounds;
        }
    };
    std::vector<std::thread> workers;
    for (int i = 0; i < kWorkers; ++i) workers.emplace_back(worker, i, 1 << 30);

    // Short-lived threads come and go meanwhile: they join the handler and leave it mid-sweep.
    std::thread churner([&] {
        for (int i = 0; !stop.load(); ++i) std::thread(worker, 100 + i % 8, 20).join();
    });

    for (int cycle = 0; cycle < 300; ++cycle) {
        std::vector<std::shared_ptr<void>> sessions;
        if (cycle % 2 == 0) sessions.push_back(std::make_shared<tracetree::Monitor>(tracetree::MonitorRequest("xtest::leaf")));
        if (cycle % 3 == 0)
            sessions.push_back(std::make_shared<tracetree::TraceSession>(tracetree::TraceRequest("churn::work").limit(0)));
        if (cycle % 5 == 0)
            sessions.push_back(std::make_shared<tracetree::StackSession>(tracetree::StackRequest("xtest::thrower").limit(0)));
        if (cycle % 7 == 0) sessions.push_back(std::make_shared<tracetree::FlightRecorder>(tracetree::RecorderRequest("xtest::*")));
        if (cycle % 11 == 0) tracetree::xray::set_callees(cycle % 2 == 0 ? "xtest::*" : "xtest::leaf");
        const std::uint64_t seen = rounds.load();
        while (rounds.load() < seen + 2) std::this_thread::yield();  // let the workers run patched code
        for (std::size_t i = 0; i < sessions.size(); ++i) sessions[(static_cast<std::size_t>(cycle) + i) % sessions.size()].reset();
    }
    tracetree::xray::set_callees("xtest::*");
    stop = true;
    for (auto& t : workers) t.join();
    churner.join();

    // Every thread has returned from every function: nothing is left patched or draining.
    const tracetree::xray::Status status = tracetree::xray::status();
    CHECK(status.patched == 0);
    CHECK(status.draining == 0);
    CHECK(status.error.empty());
    CHECK_FALSE(xray_test::sled_patched("xtest::leaf()"));
    CHECK_FALSE(xray_test::sled_patched("xtest::thrower()"));

    // churn::work is annotated and always recorded: each round is one call at the root of its thread.
    // A frame closed at the wrong time would have left the tree inside an XRay function, and the next
    // rounds nested under it.
    std::uint64_t works_at_root = 0, works_nested = 0, others_at_root = 0;
    for (const auto& thread : tracetree::profile().threads)
        for (const auto& root : thread.roots) add_roots(root, true, works_at_root, works_nested, others_at_root);
    CHECK(works_at_root == rounds.load());
    CHECK(works_nested == 0);
    CHECK(others_at_root == 0);
    MESSAGE(rounds.load() << " rounds on " << kWorkers << " workers and short-lived threads, 300 session cycles");
}

namespace {
std::atomic<int> g_fork_stage{0};
void wait_for_fork() {  // run inside xtest::call: holds it open on its thread until the fork is done
    g_fork_stage = 1;
    while (g_fork_stage.load() != 2) std::this_thread::yield();
}
}  // namespace

TEST_CASE("a forked child forgets the parent's other threads: what they ran is unpatched in it") {
    auto monitor = std::make_unique<tracetree::Monitor>(tracetree::MonitorRequest("xtest::call"));
    std::thread inside([] { xtest::call(&wait_for_fork); });
    while (g_fork_stage.load() != 1) std::this_thread::yield();
    const pid_t child = fork();
    if (child == 0) {  // the child: the thread inside xtest::call does not exist here
        monitor.reset();
        const tracetree::xray::Status status = tracetree::xray::status();
        _exit(status.patched == 0 && status.draining == 0 && !xray_test::sled_patched("xtest::call()") ? 0 : 1);
    }
    REQUIRE(child > 0);
    int wstatus = 0;
    REQUIRE(waitpid(child, &wstatus, 0) == child);
    CHECK(WIFEXITED(wstatus));
    CHECK(WEXITSTATUS(wstatus) == 0);
    // The parent's thread is still inside: the function drains, and is unpatched when it returns.
    monitor.reset();
    CHECK(tracetree::xray::status().draining == 1);
    g_fork_stage = 2;
    inside.join();
    CHECK(tracetree::xray::status().patched == 0);
}

// fork() takes XRay's locks in a handler registered after the runtime's, so it runs first; a thread
// telling the listeners of a session change held the runtime's listeners' lock while XRay's listener
// waited for XRay's: each held what the other waited for, and the forking thread hung for ever
// (redis froze at its first BGSAVE while sessions were started and stopped). The forks run in a
// process of their own, whose parent here waits for it with a bound: a hang fails the test.
TEST_CASE("fork() while other threads start and stop sessions does not hang") {
    const pid_t host = fork();
    if (host == 0) {
        std::atomic<bool> done{false};
        const auto churn = [&done](const char* pattern) {
            while (!done.load()) tracetree::Monitor monitor{tracetree::MonitorRequest(pattern)};
        };
        std::thread first(churn, "xtest::call"), second(churn, "xtest::*");
        int failed = 0;
        for (int round = 0; round < 200; ++round) {
            const pid_t child = fork();
            if (child == 0) {  // the child changes its sessions too: every lock a change takes is free
                { tracetree::Monitor own{tracetree::MonitorRequest("xtest::leaf")}; }
                _exit(0);
            }
            int status = 0;
            if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                ++failed;
        }
        done = true;
        first.join();
        second.join();
        _exit(failed == 0 ? 0 : 1);
    }
    CHECK(fork_child::exit_status(host) == 0);
}

// An XRay that cannot install (helper-36: redis's -flto objects beside a control.o built without LTO
// gave the probe functions no id) patches nothing: the first session says so on stderr, once. In a
// child, whose XRay state is made to fail as such a program's does.
TEST_CASE("an XRay that cannot install says so on stderr, once") {
    int err[2];
    REQUIRE(pipe(err) == 0);
    const pid_t child = fork();
    if (child == 0) {
        dup2(err[1], 2);
        {
            tracetree::detail::XRayState& state = tracetree::detail::xray_state();
            std::lock_guard<std::mutex> lock(state.mutex);
            state.installed = false;
            state.error = "tracetree: XRay: cannot install here";
        }
        { tracetree::TraceSession first(tracetree::TraceRequest("xtest::leaf")); }
        { tracetree::Monitor second(tracetree::MonitorRequest("xtest::*")); }
        _exit(0);
    }
    close(err[1]);
    CHECK(fork_child::exit_status(child) == 0);
    std::string said;
    char buffer[512];
    for (ssize_t got; (got = read(err[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<std::size_t>(got));
    close(err[0]);
    CHECK(said == "tracetree: XRay: cannot install here: sessions see annotated scopes only (docs/xray.md)\n");
}
