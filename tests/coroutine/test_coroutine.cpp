// Coroutines (coroutine.hpp): scopes held across co_await, with a minimal hand-written task type whose
// resumptions the test places on threads of its choosing.
#include "../support.hpp"

#include <tracetree/coroutine.hpp>

#include <doctest/doctest.h>

#include <condition_variable>
#include <coroutine>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

using namespace test;

namespace {

// A lazy task. Awaiting one runs it at once on the awaiting thread, in the awaiting chain's place;
// the chain's first task is started by a Scheduler, which owns that place.
class Task {
public:
    struct promise_type {
        std::coroutine_handle<> continuation;  // the awaiting task, resumed at the end
        tracetree::Coroutine* place = nullptr;   // the chain's
        Task get_return_object() { return Task(std::coroutine_handle<promise_type>::from_promise(*this)); }
        std::suspend_always initial_suspend() noexcept { return {}; }
        auto final_suspend() noexcept {
            struct Final {
                bool await_ready() noexcept { return false; }
                std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> done) noexcept {
                    const std::coroutine_handle<> next = done.promise().continuation;
                    return next ? next : std::noop_coroutine();
                }
                void await_resume() noexcept {}
            };
            return Final{};
        }
        void return_void() {}
        void unhandled_exception() { std::terminate(); }
    };
    using Handle = std::coroutine_handle<promise_type>;

    explicit Task(Handle handle) : handle_(handle) {}
    Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
    Task& operator=(Task&&) = delete;
    ~Task() {
        if (handle_) handle_.destroy();
    }

    bool await_ready() const noexcept { return false; }
    std::coroutine_handle<> await_suspend(Handle awaiting) noexcept {
        handle_.promise().continuation = awaiting;
        handle_.promise().place = awaiting.promise().place;
        return handle_;
    }
    void await_resume() const noexcept {}

    Handle handle() const noexcept { return handle_; }

private:
    Handle handle_;
};

// Resumptions waiting for a thread; the test runs them one at a time (run_on), or a pool does (drain).
class Scheduler {
public:
    struct Hop {  // `co_await scheduler.hop()`: suspends, to be resumed by whoever runs the queue
        Scheduler& scheduler;
        bool await_ready() const noexcept { return false; }
        void await_suspend(Task::Handle handle) { scheduler.post(handle, handle.promise().place); }
        void await_resume() const noexcept {}
    };
    Hop hop() { return Hop{*this}; }

    // Starts `task` as a chain of its own, placed where this is called.
    void spawn(Task task) {
        auto chain = std::make_unique<Chain>(std::move(task));
        Task::Handle handle = chain->task.handle();
        handle.promise().place = &chain->place;
        std::lock_guard<std::mutex> lock(mutex_);
        chains_.push_back(std::move(chain));
        queue_.push_back({handle, &chains_.back()->place});
        ready_.notify_one();
    }

    // Runs the oldest resumption on a new thread named `thread_name`; false when none is waiting.
    bool run_on(const std::string& thread_name) {
        Resumption next;
        if (!take(next, false)) return false;
        std::thread([&] {
            tracetree::set_thread_name(thread_name);
            run(next);
        }).join();
        return true;
    }
    // Runs the oldest resumption on this thread; false when none is waiting.
    bool run_here() {
        Resumption next;
        if (!take(next, false)) return false;
        run(next);
        return true;
    }
    // Runs resumptions until the queue is empty and stop() was called; for pool threads.
    void drain() {
        for (Resumption next; take(next, true);) run(next);
    }
    void stop() {
        std::lock_guard<std::mutex> lock(mutex_);
        stopped_ = true;
        ready_.notify_all();
    }
    void forget_chains() {  // the finished ones' places go with them
        std::lock_guard<std::mutex> lock(mutex_);
        chains_.clear();
    }
    std::size_t waiting() {
        std::lock_guard<std::mutex> lock(mutex_);
        return queue_.size();
    }

private:
    struct Chain {
        explicit Chain(Task task_) : task(std::move(task_)) {}
        tracetree::Coroutine place;  // where spawn() was called
        Task task;
    };
    struct Resumption {
        std::coroutine_handle<> handle;
        tracetree::Coroutine* place = nullptr;
    };
    void post(std::coroutine_handle<> handle, tracetree::Coroutine* place) {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back({handle, place});
        ready_.notify_one();
    }
    bool take(Resumption& next, bool wait) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (wait) ready_.wait(lock, [&] { return !queue_.empty() || stopped_; });
        if (queue_.empty()) return false;
        next = queue_.front();
        queue_.pop_front();
        return true;
    }
    static void run(const Resumption& next) {
        tracetree::Resumed on(*next.place);
        next.handle.resume();
    }

    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<Resumption> queue_;
    std::vector<std::unique_ptr<Chain>> chains_;  // kept to the end: a finished chain's frame is destroyed with it
    bool stopped_ = false;
};

Task request(Scheduler& scheduler) {
    TRACETREE_CO_SCOPE("request");
    {
        TRACETREE_SCOPE("parse");
        advance(1us);
    }
    co_await scheduler.hop();
    TRACETREE_SCOPE("respond");
    advance(2us);
}

// TRACETREE_WATCH in a co-scope, before and after it hops to another thread, and inside a scope of it.
Task watched_request(Scheduler& scheduler, int id) {
    TRACETREE_CO_SCOPE("watched-request");
    TRACETREE_WATCH("id", id);
    co_await scheduler.hop();
    {
        TRACETREE_SCOPE("inner");
        TRACETREE_WATCH("inner", id);  // said in `inner`: not the co-scope's value
    }
    TRACETREE_WATCH("after", id * 10);
    advance(1us);
}

Task query(Scheduler& scheduler, int hops) {
    TRACETREE_CO_SCOPE("query");
    for (int i = 0; i < hops; ++i) co_await scheduler.hop();
}

Task handler(Scheduler& scheduler) {
    TRACETREE_CO_SCOPE("handler");
    co_await query(scheduler, 2);
    TRACETREE_SCOPE("render");
}

Task two_phases(Scheduler& scheduler) {
    {
        TRACETREE_CO_SCOPE("first");
        co_await scheduler.hop();
    }
    TRACETREE_CO_SCOPE("second");
    co_await scheduler.hop();
}

Task hands_off(Scheduler& scheduler, std::optional<tracetree::Here>& handed) {
    TRACETREE_CO_SCOPE("hands-off");
    handed = tracetree::here();
    co_await scheduler.hop();
}

Task named(Scheduler& scheduler, const char* which) {
    if (which[0] == 'a') {
        TRACETREE_CO_SCOPE("a");
        co_await scheduler.hop();
    } else {
        TRACETREE_CO_SCOPE("b");
        co_await scheduler.hop();
    }
}

// Whether a call below `nodes` has no finished call (`[running]` when rendered); paths of hand-offs
// (continued) count none of their own.
bool any_running(const std::vector<tracetree::Node>& nodes) {
    for (const tracetree::Node& node : nodes)
        if ((node.kind == tracetree::NodeKind::call && !node.continued && node.count == 0) || any_running(node.children)) return true;
    return false;
}

}  // namespace

TEST_CASE("a co-scope across a suspension: one call, where the coroutine was started, the suspended time apart") {
    FakeClock clock;
    Scheduler scheduler;
    {
        TRACETREE_SCOPE("serve");
        scheduler.spawn(request(scheduler));
    }
    advance(5us);  // in the queue
    REQUIRE(scheduler.run_on("first"));
    advance(7us);  // suspended
    REQUIRE(scheduler.run_on("second"));
    CHECK(scheduler.waiting() == 0);

    const auto profile = tracetree::profile();
    const auto* first = find_thread(profile, "first");
    const auto* second = find_thread(profile, "second");
    REQUIRE(first != nullptr);
    REQUIRE(second != nullptr);
    const auto* queued = on_path(*first, {"serve", "[queued]"});
    REQUIRE(queued != nullptr);
    CHECK(queued->count == 1);
    CHECK(queued->total == 5us);
    const auto* parse = on_path(*first, {"serve", "request", "parse"});
    REQUIRE(parse != nullptr);
    CHECK(parse->count == 1);
    CHECK(node_at(*first, {"serve", "request"}).count == 0);  // it ended on the second thread
    const auto* ended = on_path(*second, {"serve", "request"});
    REQUIRE(ended != nullptr);
    CHECK(ended->count == 1);
    CHECK(ended->total == 1us + 7us + 2us);
    const auto* suspended = find_child(*ended, "[suspended]");
    REQUIRE(suspended != nullptr);
    CHECK(suspended->count == 1);
    CHECK(suspended->total == 7us);
    REQUIRE(find_child(*ended, "respond") != nullptr);
    CHECK(child_at(*ended, "respond").total == 2us);
    CHECK(node_at(*second, {"serve"}).continued);
    // Folded: the coroutine's calls under the scope it was started in, one tree.
    const auto merged = profile.merged();
    const auto* request_node = on_path(merged, {"serve", "request"});
    REQUIRE(request_node != nullptr);
    CHECK(request_node->count == 1);
    CHECK(request_node->total == 10us);
    for (const char* child : {"parse", "respond", "[suspended]"}) REQUIRE(find_child(*request_node, child) != nullptr);
    CHECK(child_at(*request_node, "parse").count == 1);
    CHECK(child_at(*request_node, "respond").count == 1);
    CHECK(child_at(*request_node, "[suspended]").total == 7us);
    CHECK(node_at(merged, {"serve"}).count == 1);
    const std::string text = tracetree::to_string(merged);
    CHECK(text.find("[suspended]") != std::string::npos);
    // The threads that ran it are back at their roots: a scope after the resumption is a root.
    std::thread([&] {
        tracetree::set_thread_name("after");
        TRACETREE_SCOPE("outer");
        scheduler.spawn(request(scheduler));
        REQUIRE(scheduler.run_here());  // suspends at its hop, inside `outer`
        TRACETREE_SCOPE("inner");
    }).join();
    const auto after_profile = tracetree::profile();
    const auto* after = find_thread(after_profile, "after");
    REQUIRE(after != nullptr);
    CHECK(after->roots.size() == 2);  // `outer`, and the path it continues under
    const auto after_merged = after_profile.merged();
    CHECK(on_path(after_merged, {"outer", "inner"}) != nullptr);  // back in `outer` after it
    CHECK(on_path(after_merged, {"outer", "request", "parse"}) != nullptr);
    CHECK(on_path(after_merged, {"outer", "[queued]"}) != nullptr);
    CHECK(scheduler.run_on("rest"));
    CHECK_FALSE(scheduler.run_on("rest"));
}

TEST_CASE("a trace of the scope a coroutine was started in: its work on other threads in the one tree") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("traced-serve"));
    Scheduler scheduler;
    {
        TRACETREE_SCOPE("traced-serve");
        scheduler.spawn(request(scheduler));
    }
    CHECK_FALSE(trace.next(0s));  // held while the coroutine's place lives
    advance(5us);
    REQUIRE(scheduler.run_on("part-one"));
    advance(7us);
    REQUIRE(scheduler.run_on("part-two"));
    CHECK_FALSE(trace.next(0s));
    scheduler.forget_chains();
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    const tracetree::Node& root = captured->root;
    CHECK(root.name == "traced-serve");
    CHECK(root.count == 1);
    const auto* request_node = find_child(root, "request");
    REQUIRE(request_node != nullptr);
    CHECK(request_node->count == 1);
    CHECK(request_node->total == 10us);
    for (const char* child : {"parse", "respond", "[suspended]"}) REQUIRE(find_child(*request_node, child) != nullptr);
    CHECK(child_at(*request_node, "parse").count == 1);
    CHECK(child_at(*request_node, "respond").count == 1);
    CHECK(child_at(*request_node, "[suspended]").total == 7us);
    REQUIRE(find_child(root, "[queued]") != nullptr);
    CHECK(child_at(root, "[queued]").total == 5us);
    CHECK(root.total == 0us);  // its wall time: the coroutine ran after it, on other threads
    CHECK(request_node->parallel);
    CHECK(child_at(root, "[queued]").parallel);
    // The profile keeps each part where it ran, `parse` under `request` though `request` ended elsewhere.
    const auto profile = tracetree::profile();
    const auto* part_one = find_thread(profile, "part-one");
    REQUIRE(part_one != nullptr);
    const auto* parse = on_path(*part_one, {"traced-serve", "request", "parse"});
    REQUIRE(parse != nullptr);
    CHECK(parse->count == 1);
    CHECK(node_at(*part_one, {"traced-serve"}).dropped == 0);
    CHECK(node_at(profile.merged(), {"traced-serve", "request"}).count == 1);
}

TEST_CASE("a trace of a co-scope: its coroutine on each thread that resumes it, one tree delivered at its end") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("request"));
    Scheduler scheduler;
    {
        TRACETREE_SCOPE("serve");
        scheduler.spawn(request(scheduler));
    }
    advance(5us);
    REQUIRE(scheduler.run_on("opens"));
    CHECK_FALSE(trace.next(0s));  // the co-scope is still open
    advance(7us);
    REQUIRE(scheduler.run_on("ends"));
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    CHECK(captured->thread_name == "opens");  // where it was called
    const tracetree::Node& root = captured->root;
    CHECK(root.name == "request");
    CHECK(root.count == 1);
    CHECK(root.total == 1us + 7us + 2us);  // its wall time, the suspension included
    CHECK(root.children.size() == 3);
    CHECK(child_at(root, "parse").count == 1);
    CHECK(child_at(root, "parse").total == 1us);
    CHECK(child_at(root, "respond").count == 1);
    CHECK(child_at(root, "respond").total == 2us);
    CHECK(child_at(root, "[suspended]").count == 1);
    CHECK(child_at(root, "[suspended]").total == 7us);
    CHECK_FALSE(child_at(root, "respond").parallel);  // the coroutine's own, not handed off
    CHECK(trace.done());  // one call asked for, one delivered
    CHECK_FALSE(trace.next(0s));
    // The profile as without the trace: each part where it ran, folded under the coroutine's place.
    const auto merged = tracetree::profile().merged();
    const auto& request_node = node_at(merged, {"serve", "request"});
    CHECK(request_node.count == 1);
    CHECK(request_node.total == 10us);
    CHECK(child_at(request_node, "parse").count == 1);
    CHECK(child_at(request_node, "respond").count == 1);
    CHECK(child_at(request_node, "[suspended]").count == 1);
    CHECK_FALSE(any_running(merged.roots));
}

TEST_CASE("a trace of a co-scope waits for the work handed off from it, and shows it beside the coroutine") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("hands-off"));
    Scheduler scheduler;
    std::optional<tracetree::Here> handed;
    scheduler.spawn(hands_off(scheduler, handed));
    REQUIRE(scheduler.run_on("opens"));
    advance(3us);
    REQUIRE(scheduler.run_on("ends"));
    CHECK_FALSE(trace.next(0s));  // the handed-off work has not run
    std::thread([&] {
        tracetree::set_thread_name("worker");
        tracetree::Continue on(*handed);
        TRACETREE_SCOPE("handed-work");
        advance(4us);
    }).join();
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    const tracetree::Node& root = captured->root;
    CHECK(root.name == "hands-off");
    CHECK(root.count == 1);
    CHECK(root.total == 3us);
    CHECK(child_at(root, "[suspended]").total == 3us);
    const tracetree::Node& handed_work = child_at(root, "handed-work");
    CHECK(handed_work.count == 1);
    CHECK(handed_work.total == 4us);
    CHECK(handed_work.parallel);
    CHECK(child_at(root, "[queued]").parallel);
}

TEST_CASE("a trace of a co-scope with a threshold and a count limit: its wall time compared, the next K delivered") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("request").min_cost(10us).limit(1));
    Scheduler scheduler;
    for (int i = 0; i < 3; ++i) scheduler.spawn(request(scheduler));
    // Each opens on a thread of its own (1 µs each), waits, and ends on another one.
    for (const char* thread : {"open-a", "open-b", "open-c"}) REQUIRE(scheduler.run_on(thread));
    advance(3us);
    REQUIRE(scheduler.run_on("end-a"));  // 1 + 2 (the others' parse) + 3 + 2: 8 µs, below the threshold
    CHECK_FALSE(trace.next(0s));
    advance(10us);
    REQUIRE(scheduler.run_on("end-b"));  // 19 µs
    REQUIRE(scheduler.run_on("end-c"));  // 20 µs: past the limit
    const auto traces = trace.collect(0s);
    REQUIRE(traces.size() == 1);
    CHECK(traces[0].thread_name == "open-b");
    CHECK(traces[0].root.name == "request");
    CHECK(traces[0].root.count == 1);
    CHECK(traces[0].root.total == 19us);
    CHECK(child_at(traces[0].root, "[suspended]").total == 1us + 3us + 2us + 10us);  // c's parse, a's end
    CHECK(trace.done());
    CHECK(node_at(tracetree::profile().merged(), {"request"}).count == 3);
}

TEST_CASE("watch and stack sessions on a co-scope: one value per call, at its end, with its wall time") {
    FakeClock clock;
    tracetree::WatchSession watch(tracetree::WatchRequest("request").min_cost(10us).limit(2));
    tracetree::StackSession stack(tracetree::StackRequest("request").limit(2));
    Scheduler scheduler;
    {
        TRACETREE_SCOPE("serve");
        for (int i = 0; i < 3; ++i) scheduler.spawn(request(scheduler));
    }
    for (const char* thread : {"open-a", "open-b", "open-c"}) REQUIRE(scheduler.run_on(thread));
    advance(3us);
    REQUIRE(scheduler.run_on("end-a"));  // 8 µs: below the watch's threshold
    advance(10us);
    REQUIRE(scheduler.run_on("end-b"));  // 19 µs
    REQUIRE(scheduler.run_on("end-c"));  // 20 µs
    const auto watched = watch.collect(0s);
    REQUIRE(watched.size() == 2);
    CHECK(watched[0].scope == "request");
    CHECK(watched[0].cost == 19us);
    CHECK(watched[0].thread_name == "end-b");  // where it ended
    CHECK(watched[1].cost == 20us);
    CHECK(watched[1].thread_name == "end-c");
    CHECK(watch.done());
    const auto stacks = stack.collect(0s);
    REQUIRE(stacks.size() == 2);  // the first two to end
    CHECK(stacks[0].cost == 8us);
    CHECK(stacks[1].cost == 19us);
    for (const auto& one : stacks) {
        REQUIRE(one.frames.size() == 2);  // the co-scope, then the scope its coroutine was started in
        CHECK(one.frames[0].name == "request");
        CHECK(one.frames[1].name == "serve");
    }
    CHECK(stack.done());
}

TEST_CASE("monitor on a co-scope: each call counted once, at its end, with its wall time") {
    FakeClock clock;
    tracetree::Monitor monitor(tracetree::MonitorRequest("request").interval(1ms));
    Scheduler scheduler;
    for (int i = 0; i < 3; ++i) scheduler.spawn(request(scheduler));
    for (const char* thread : {"open-a", "open-b", "open-c"}) REQUIRE(scheduler.run_on(thread));
    advance(3us);
    REQUIRE(scheduler.run_on("end-a"));  // 8 µs
    advance(10us);
    REQUIRE(scheduler.run_on("end-b"));  // 19 µs
    REQUIRE(scheduler.run_on("end-c"));  // 20 µs
    const auto interval = monitor.next();  // every call so far: an interval ends when it is read
    REQUIRE(interval.has_value());
    REQUIRE(interval->rows.size() == 1);
    const tracetree::MonitorRow& row = interval->rows[0];
    CHECK(row.name == "request");
    CHECK(row.calls == 3);
    CHECK(row.failed == 0);
    CHECK(row.min == 8us);
    CHECK(row.max == 20us);
    CHECK(row.total == 8us + 19us + 20us);
}

TEST_CASE("watch on a co-scope: the values said directly in it, from every resumption, on whichever thread") {
    FakeClock clock;
    tracetree::WatchSession watch(tracetree::WatchRequest("watched-request").limit(2));
    tracetree::WatchSession picked(tracetree::WatchRequest("watched-request").values({"after"}).limit(2));
    tracetree::WatchSession inner(tracetree::WatchRequest("inner").limit(2));
    Scheduler scheduler;
    for (int id = 1; id <= 2; ++id) scheduler.spawn(watched_request(scheduler, id));
    // Both open and wait, then each ends on a thread of its own: the two chains share no thread.
    for (const char* thread : {"open-a", "open-b", "end-a", "end-b"}) REQUIRE(scheduler.run_on(thread));
    using Values = std::vector<std::pair<std::string, std::string>>;
    const auto watched = watch.collect(0s);
    REQUIRE(watched.size() == 2);
    CHECK(watched[0].values == Values{{"id", "1"}, {"after", "10"}});
    CHECK(watched[0].thread_name == "end-a");
    CHECK(watched[1].values == Values{{"id", "2"}, {"after", "20"}});
    const auto only_after = picked.collect(0s);
    REQUIRE(only_after.size() == 2);
    CHECK(only_after[1].values == Values{{"after", "20"}});
    const auto inside = inner.collect(0s);  // a plain scope inside it keeps its own values
    REQUIRE(inside.size() == 2);
    CHECK(inside[0].values == Values{{"inner", "1"}});
}

TEST_CASE("watch on a co-scope that ends outside its coroutine: its place keeps the frame, later values go nowhere") {
    static tracetree::detail::Site site{"abandoned", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::WatchSession watch(tracetree::WatchRequest("abandoned").limit(2));
    {
        tracetree::Coroutine place;
        std::optional<tracetree::detail::CoScope> open;
        {
            tracetree::Resumed on(place);
            open.emplace(site);
            TRACETREE_WATCH("before", 1);
        }
        std::thread([&] { open.reset(); }).join();  // a frame destroyed elsewhere: a dropped call
        {
            tracetree::Resumed on(place);  // still enters the co-scope's node, as its place lists it
            TRACETREE_WATCH("after", 2);   // (ASan: no write to a frame that is gone)
        }
    }  // the place goes, and with it the frame it kept
    CHECK(watch.collect(0s).empty());
}

TEST_CASE("watch on co-scopes of one site from two chains of one place: the watched one keeps its level") {
    static tracetree::detail::Site site{"shared-site", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::Coroutine shared;  // two chains resumed at one place (Asio's awaitable operators)
    std::optional<tracetree::detail::CoScope> first, second;
    {
        tracetree::Resumed on(shared);
        first.emplace(site);  // before the session: not watched
    }
    tracetree::WatchSession watch(tracetree::WatchRequest("shared-site").limit(2));
    {
        tracetree::Resumed on(shared);
        second.emplace(site);  // watched, above the first
        TRACETREE_WATCH("second", 0);
    }
    {
        tracetree::Resumed on(shared);
        first.reset();  // ends first: its own entry goes, not the watched one's
    }
    {
        tracetree::Resumed on(shared);
        TRACETREE_WATCH("second", 1);
        second.reset();
    }
    const auto watched = watch.collect(0s);  // the first opened before the session: not its call
    REQUIRE(watched.size() == 1);
    CHECK(watched[0].values == std::vector<std::pair<std::string, std::string>>{{"second", "0"}, {"second", "1"}});
}

TEST_CASE("a trace of co-scopes of one site from two chains of one place: the traced one keeps its level") {
    static tracetree::detail::Site site{"shared-traced", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::Coroutine shared;  // two chains resumed at one place (Asio's awaitable operators)
    std::optional<tracetree::detail::CoScope> first, second;
    {
        tracetree::Resumed on(shared);
        first.emplace(site);  // before the session: not traced
    }
    tracetree::TraceSession trace(tracetree::TraceRequest("shared-traced"));
    {
        tracetree::Resumed on(shared);
        second.emplace(site);  // traced, above the first
    }
    {
        tracetree::Resumed on(shared);
        first.reset();  // ends first: its own entry goes, not the traced one's
    }
    {
        tracetree::Resumed on(shared);
        {
            TRACETREE_SCOPE("later-step");  // recorded into the trace from the traced co-scope's level on
        }
        second.reset();
    }
    const auto one = trace.next(0s);
    REQUIRE(one);
    CHECK(one->root.name == "shared-traced");
    CHECK(child_at(one->root, "later-step").count == 1);
}

TEST_CASE("a coroutine resumed inside the traced scope it was spawned in records at its place: no call left running") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("server-loop"));
    Scheduler scheduler;
    {
        TRACETREE_SCOPE("server-loop");  // an io_context's run() inside a traced scope, say
        {
            TRACETREE_SCOPE("spawner");
            scheduler.spawn(request(scheduler));
        }
        REQUIRE(scheduler.run_on("io"));  // `request` opens at its place: server-loop > spawner
        REQUIRE(scheduler.run_here());    // and ends here, inside the capture of server-loop
    }
    const auto merged = tracetree::profile().merged();
    INFO(tracetree::to_string(merged));
    const auto& request_node = node_at(merged, {"server-loop", "spawner", "request"});
    CHECK(request_node.count == 1);
    CHECK(child_at(request_node, "parse").count == 1);
    CHECK(child_at(request_node, "respond").count == 1);
    CHECK(find_child(node_at(merged, {"server-loop"}), "request") == nullptr);
    CHECK_FALSE(any_running(merged.roots));
    scheduler.forget_chains();
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    CHECK(captured->root.name == "server-loop");
    const auto& traced = child_at(child_at(captured->root, "spawner"), "request");
    CHECK(traced.count == 1);
}

TEST_CASE("an awaited task's co-scope nests in its caller's, across its own suspensions") {
    FakeClock clock;
    Scheduler scheduler;
    scheduler.spawn(handler(scheduler));
    for (const char* thread : {"one", "two", "three"}) {
        advance(3us);
        REQUIRE(scheduler.run_on(thread));
    }
    CHECK_FALSE(scheduler.run_on("none"));
    const auto merged = tracetree::profile().merged();
    const auto* handler_node = on_path(merged, {"handler"});
    REQUIRE(handler_node != nullptr);
    CHECK(handler_node->count == 1);
    CHECK(handler_node->total == 6us);  // two suspensions of 3 µs each
    const auto* query_node = find_child(*handler_node, "query");
    REQUIRE(query_node != nullptr);
    CHECK(query_node->count == 1);
    CHECK(query_node->total == 6us);
    const auto* suspended = find_child(*query_node, "[suspended]");
    REQUIRE(suspended != nullptr);
    CHECK(suspended->count == 2);
    REQUIRE(find_child(*handler_node, "render") != nullptr);
    CHECK(child_at(*handler_node, "render").count == 1);
    CHECK(find_child(*handler_node, "[suspended]") == nullptr);
    CHECK(find_root(merged, "[queued]") != nullptr);  // started at no scope: its wait is a root
}

TEST_CASE("co-scopes one after the other: the second is not entered under the first") {
    FakeClock clock;
    Scheduler scheduler;
    scheduler.spawn(two_phases(scheduler));
    while (scheduler.run_on("phases")) {
    }
    const auto merged = tracetree::profile().merged();
    const auto* first = find_root(merged, "first");
    const auto* second = find_root(merged, "second");
    REQUIRE(first != nullptr);
    REQUIRE(second != nullptr);
    CHECK(first->count == 1);
    CHECK(second->count == 1);
    CHECK(find_child(*first, "second") == nullptr);
    REQUIRE(find_child(*second, "[suspended]") != nullptr);
    CHECK(child_at(*second, "[suspended]").count == 1);
}

TEST_CASE("a resumption while recording is off enters nothing, and the co-scopes' ends are still followed") {
    FakeClock clock;
    Scheduler scheduler;
    scheduler.spawn(two_phases(scheduler));
    REQUIRE(scheduler.run_on("on"));  // `first` open, suspended
    tracetree::set_enabled(false);
    REQUIRE(scheduler.run_on("off"));  // `first` ends, `second` is not recorded
    tracetree::set_enabled(true);
    REQUIRE(scheduler.run_on("on-again"));  // `second` ends; `first` must not be entered again
    const auto profile = tracetree::profile();
    const auto* again = find_thread(profile, "on-again");
    REQUIRE(again != nullptr);
    REQUIRE(again->roots.size() == 1);
    CHECK(again->roots[0].name == "[suspended]");  // the origin is the root: nothing open to enter
    const auto merged = profile.merged();  // kept: the nodes found point into it
    const auto* first = find_root(merged, "first");
    CHECK((first == nullptr || first->count == 0));  // ended while off, where nothing was entered
    CHECK(find_root(merged, "second") == nullptr);
}

TEST_CASE("coroutines interleaved on one thread keep their own places") {
    FakeClock clock;
    Scheduler scheduler;
    scheduler.spawn(named(scheduler, "a"));
    scheduler.spawn(named(scheduler, "b"));
    std::thread([&] {
        tracetree::set_thread_name("loop");
        TRACETREE_SCOPE("loop");
        for (int i = 0; i < 4; ++i) {  // a, b, a, b
            advance(1us);
            CHECK(scheduler.run_here());
        }
    }).join();
    const auto merged = tracetree::profile().merged();
    const auto* a = find_root(merged, "a");
    const auto* b = find_root(merged, "b");
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(a->count == 1);
    CHECK(b->count == 1);
    CHECK(find_child(*a, "b") == nullptr);
    CHECK(find_child(*b, "a") == nullptr);
    CHECK(a->total == 2us);  // suspended while b ran, and 1 µs more before its resumption
    REQUIRE(find_child(*a, "[suspended]") != nullptr);
    CHECK(child_at(*a, "[suspended]").count == 1);
    REQUIRE(find_root(merged, "[queued]") != nullptr);
    CHECK(node_at(merged, {"[queued]"}).count == 2);  // started at no scope: at the root, not in `loop`
    REQUIRE(find_root(merged, "loop") != nullptr);
    CHECK(find_child(node_at(merged, {"loop"}), "a") == nullptr);
}

TEST_CASE("a Resumed of a running coroutine records where it runs; the outer one puts the thread back") {
    FakeClock clock;
    std::optional<tracetree::Coroutine> place;
    {
        TRACETREE_SCOPE("origin");
        place.emplace();
    }
    {
        tracetree::Resumed outer(*place);
        TRACETREE_CO_SCOPE("co");
        tracetree::Resumed inner(*place);  // resumed inline from its own code: nothing to enter
        TRACETREE_SCOPE("inline");
    }
    {
        TRACETREE_SCOPE("after");
    }
    const auto merged = tracetree::profile().merged();
    REQUIRE(find_root(merged, "origin") != nullptr);
    const auto* co = find_child(node_at(merged, {"origin"}), "co");
    REQUIRE(co != nullptr);
    CHECK(co->count == 1);
    CHECK(find_child(*co, "inline") != nullptr);
    CHECK(find_child(*co, "[suspended]") == nullptr);  // no second resumption
    CHECK(find_root(merged, "after") != nullptr);
}

TEST_CASE("a co-scope whose coroutine is resumed elsewhere without a Resumed counts a dropped call") {
    FakeClock clock;
    auto scope = std::make_unique<std::optional<tracetree::detail::CoScope>>();
    static tracetree::detail::Site site{"lost", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    {
        tracetree::Coroutine place;
        tracetree::Resumed on(place);
        scope->emplace(site);
    }
    std::thread([&] {
        tracetree::set_thread_name("elsewhere");
        TRACETREE_SCOPE("elsewhere");
        scope->reset();  // its end finds another node current: not counted there
    }).join();
    const auto profile = tracetree::profile();
    REQUIRE(find_thread(profile, "elsewhere") != nullptr);
    const auto* elsewhere = find_root(thread_at(profile, "elsewhere"), "elsewhere");
    REQUIRE(elsewhere != nullptr);
    CHECK(elsewhere->count == 1);
    CHECK(elsewhere->dropped == 1);
    const auto* lost = find_root(thread_at(profile, "test-main"), "lost");
    CHECK((lost == nullptr || lost->count == 0));  // entered there, ended nowhere
}

TEST_CASE("a co-scope's end inside a scope whose trace capture waits: a dropped call, nothing else") {
    FakeClock clock;
    static tracetree::detail::Site site{"cancelled", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::TraceSession trace(tracetree::TraceRequest("waiting-handle"));
    tracetree::Coroutine place;
    std::optional<tracetree::detail::CoScope> open;
    {
        tracetree::Resumed on(place);
        open.emplace(site);
    }
    {
        TRACETREE_SCOPE("waiting-handle");  // its capture waits for the first thing recorded under it
        open.reset();                       // a frame destroyed here (shutdown, a cancellation)
    }
    CHECK(trace.next(0s));
    const auto thread = mine();
    const auto* handle = find_root(thread, "waiting-handle");
    REQUIRE(handle != nullptr);
    CHECK(handle->count == 1);
}

TEST_CASE("recording turned on during a resumption: the co-scope it opens is entered there and the thread put back") {
    FakeClock clock;
    static tracetree::detail::Site site{"late", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::Coroutine place;
    std::optional<tracetree::detail::CoScope> late;
    tracetree::set_enabled(false);
    {
        tracetree::Resumed on(place);
        tracetree::set_enabled(true);  // an admin request from another thread, say
        late.emplace(site);            // open when the coroutine suspends
    }
    {
        TRACETREE_SCOPE("after-late");
    }
    {
        tracetree::Resumed on(place);
        late.reset();
    }
    const auto thread = mine();
    const auto* after = find_root(thread, "after-late");
    REQUIRE(after != nullptr);
    CHECK(after->count == 1);
    const auto merged = tracetree::profile().merged();
    const auto* merged_late = find_root(merged, "late");
    REQUIRE(merged_late != nullptr);
    CHECK(merged_late->count == 1);
}

TEST_CASE("a co-scope outside any resumption is a dropped call and leaves the thread where it was") {
    FakeClock clock;
    static tracetree::detail::Site site{"unplaced", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    {
        std::optional<tracetree::detail::CoScope> unplaced;
        unplaced.emplace(site);  // a coroutine spawned without a place, suspended
        TRACETREE_SCOPE("next");
    }
    const auto thread = mine();
    CHECK(find_root(thread, "next") != nullptr);
    CHECK(find_root(thread, "unplaced") == nullptr);
}

TEST_CASE("chains that share a place close their co-scopes in any order") {
    FakeClock clock;
    static tracetree::detail::Site site_a{"shared-a", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    static tracetree::detail::Site site_b{"shared-b", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::Coroutine shared;  // as Asio's awaitable operators spawn both operands on the parent's executor
    std::optional<tracetree::detail::CoScope> a, b;
    {
        tracetree::Resumed on(shared);
        a.emplace(site_a);
    }
    {
        tracetree::Resumed on(shared);
        b.emplace(site_b);
    }
    {
        tracetree::Resumed on(shared);
        a.reset();  // `a` ends first: the place keeps `b` open, not `a`
    }
    {
        tracetree::Resumed on(shared);
        b.reset();
    }
    const auto merged = tracetree::profile().merged();
    const auto* b_node = find_root(merged, "shared-b");
    REQUIRE(b_node != nullptr);
    CHECK(b_node->count == 1);
    // `a` ended where `b` was entered under it: not counted as `b`'s call, a dropped one.
    const auto* nested = on_path(merged, {"shared-a", "shared-b"});
    REQUIRE(nested != nullptr);
    CHECK(nested->count == 0);
    CHECK(nested->dropped == 1);
}

TEST_CASE("stress: coroutines hopping across 8 threads are counted exactly") {
    tracetree::reset();
    constexpr int kThreads = 8, kCoroutines = 200, kHops = 10;
    Scheduler scheduler;
    struct Body {
        static Task run(Scheduler& scheduler, Latch& done) {
            {
                TRACETREE_CO_SCOPE("request");
                for (int i = 0; i < kHops; ++i) {
                    co_await scheduler.hop();
                    TRACETREE_SCOPE("step");
                }
            }
            done.count_down();
        }
    };
    Latch done(kCoroutines);
    std::vector<std::thread> pool;
    for (int i = 0; i < kThreads; ++i) pool.emplace_back([&] { scheduler.drain(); });
    {
        TRACETREE_SCOPE("accept");
        for (int i = 0; i < kCoroutines; ++i) scheduler.spawn(Body::run(scheduler, done));
    }
    done.wait();  // every co-scope has ended; the pool ends after the resumptions it is running
    scheduler.stop();
    for (auto& thread : pool) thread.join();
    const auto merged = tracetree::profile().merged();
    const auto* request_node = on_path(merged, {"accept", "request"});
    REQUIRE(request_node != nullptr);
    CHECK(request_node->count == kCoroutines);
    REQUIRE(find_child(*request_node, "step") != nullptr);
    REQUIRE(find_child(*request_node, "[suspended]") != nullptr);
    REQUIRE(on_path(merged, {"accept", "[queued]"}) != nullptr);
    CHECK(child_at(*request_node, "step").count == kCoroutines * kHops);
    CHECK(child_at(*request_node, "[suspended]").count == kCoroutines * kHops);
    CHECK(node_at(merged, {"accept", "[queued]"}).count == kCoroutines);
    CHECK(request_node->dropped == 0);
}

TEST_CASE("stress: trace, watch and stack sessions on a co-scope hopping across 8 threads deliver exact counts") {
    tracetree::reset();
    constexpr int kThreads = 8, kCoroutines = 100, kHops = 5, kWanted = 20;
    tracetree::TraceSession trace(tracetree::TraceRequest("hopping").limit(kWanted));
    tracetree::WatchSession watch(tracetree::WatchRequest("hopping").limit(kWanted));
    tracetree::StackSession stack(tracetree::StackRequest("hopping").limit(kWanted));
    Scheduler scheduler;
    struct Body {
        static Task run(Scheduler& scheduler, Latch& done) {
            {
                TRACETREE_CO_SCOPE("hopping");
                for (int i = 0; i < kHops; ++i) {
                    co_await scheduler.hop();
                    TRACETREE_WATCH("hop", i);  // each on the thread that resumed it
                    TRACETREE_SCOPE("hop-step");
                }
            }
            done.count_down();
        }
    };
    Latch done(kCoroutines);
    std::vector<std::thread> pool;
    for (int i = 0; i < kThreads; ++i) pool.emplace_back([&] { scheduler.drain(); });
    for (int i = 0; i < kCoroutines; ++i) scheduler.spawn(Body::run(scheduler, done));
    done.wait();
    scheduler.stop();
    for (auto& thread : pool) thread.join();  // the last parts of the traces are added as their resumptions end
    const auto traces = trace.collect(0s);
    CHECK(traces.size() == kWanted);
    for (const auto& one : traces) {
        CHECK(one.root.name == "hopping");
        CHECK(one.root.count == 1);
        CHECK(child_at(one.root, "hop-step").count == kHops);
        CHECK(child_at(one.root, "[suspended]").count == kHops);
    }
    const auto watched = watch.collect(0s);
    CHECK(watched.size() == kWanted);
    std::vector<std::pair<std::string, std::string>> hops;
    for (int i = 0; i < kHops; ++i) hops.emplace_back("hop", std::to_string(i));
    for (const auto& one : watched) CHECK(one.values == hops);
    const auto stacks = stack.collect(0s);
    CHECK(stacks.size() == kWanted);
    for (const auto& one : stacks) CHECK((!one.frames.empty() && one.frames[0].name == "hopping"));
    const auto merged = tracetree::profile().merged();
    const auto& hopping = node_at(merged, {"hopping"});
    CHECK(hopping.count == kCoroutines);
    CHECK(child_at(hopping, "hop-step").count == kCoroutines * kHops);
    CHECK(child_at(hopping, "[suspended]").count == kCoroutines * kHops);
    CHECK(hopping.dropped == 0);
}

TEST_CASE("a traced co-scope of a shared place whose lower co-scope ends first: its trace delivered once, its calls counted") {
    FakeClock clock;
    static tracetree::detail::Site site_lower{"shared-lower", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    static tracetree::detail::Site site_upper{"shared-upper", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    static tracetree::detail::Site site_later{"shared-later", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::TraceSession trace(tracetree::TraceRequest("shared-upper"));
    tracetree::Coroutine shared;  // two chains on one place, as Asio's awaitable operators make them
    std::optional<tracetree::detail::CoScope> lower, upper, later;
    {
        tracetree::Resumed on(shared);
        lower.emplace(site_lower);  // chain a
    }
    {
        tracetree::Resumed on(shared);
        upper.emplace(site_upper);  // chain b, traced: open above `lower`
        advance(1us);
    }
    {
        tracetree::Resumed on(shared);
        lower.reset();  // chain a's ends first, where `upper` is current: a dropped call
        advance(1us);
    }
    {
        tracetree::Resumed on(shared);
        later.emplace(site_later);  // a co-scope at the level `upper` had
        advance(2us);
    }
    {
        tracetree::Resumed on(shared);
        later.reset();
    }
    CHECK_FALSE(trace.next(0s));  // `upper` is still open
    {
        tracetree::Resumed on(shared);
        upper.reset();
    }
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    const tracetree::Node& root = captured->root;
    CHECK(root.name == "shared-upper");
    CHECK(root.count == 1);
    CHECK(root.total == 4us);
    REQUIRE(find_child(root, "shared-later") != nullptr);
    CHECK(child_at(root, "shared-later").count == 1);
    CHECK(child_at(root, "shared-later").total == 2us);
    CHECK_FALSE(trace.next(0s));  // once
    const auto merged = tracetree::profile().merged();
    INFO(tracetree::to_string(merged));
    const auto* upper_node = find_root(merged, "shared-upper");
    REQUIRE(upper_node != nullptr);
    CHECK(upper_node->count == 1);
    CHECK(upper_node->dropped == 0);
    REQUIRE(find_child(*upper_node, "shared-later") != nullptr);
    CHECK(child_at(*upper_node, "shared-later").count == 1);
    CHECK(child_at(*upper_node, "shared-later").dropped == 0);
    CHECK(node_at(merged, {"shared-lower", "shared-upper"}).dropped == 1);  // `lower`'s end, the only one
}

TEST_CASE("a co-scope's trace delivered as the last resumption's Resumed ends: its callback records at that thread's root") {
    FakeClock clock;
    static tracetree::detail::Site site{"handed-on", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    std::thread::id delivered_on;
    const std::thread::id* last_resumer = nullptr;  // the thread whose Resumed ends last
    tracetree::TraceSession trace(tracetree::TraceRequest("handed-on").on_trace([&](const tracetree::Trace&) {
        delivered_on = std::this_thread::get_id();
        if (last_resumer != nullptr && *last_resumer == delivered_on) {
            TRACETREE_SCOPE("in-callback");
        }
    }));
    std::optional<tracetree::Coroutine> place;
    {
        TRACETREE_SCOPE("spawned-in");
        place.emplace();
    }
    std::optional<tracetree::detail::CoScope> open;
    {
        tracetree::Resumed on(*place);
        open.emplace(site);  // traced
    }
    std::thread::id resumer;
    std::thread([&] {
        tracetree::set_thread_name("resumes-first");
        resumer = std::this_thread::get_id();
        last_resumer = &resumer;
        tracetree::Resumed on(*place);
        // The coroutine hands itself on as it suspends: the next resumption runs, and ends the
        // co-scope, before this one's Resumed ends.
        std::thread([&] {
            tracetree::set_thread_name("ends-it");
            tracetree::Resumed again(*place);
            open.reset();
        }).join();
    }).join();
    CHECK(delivered_on == resumer);
    const auto profile = tracetree::profile();
    const auto* first = find_thread(profile, "resumes-first");
    REQUIRE(first != nullptr);
    const auto* in_callback = find_root(*first, "in-callback");
    REQUIRE(in_callback != nullptr);  // at this thread's own place, not the coroutine's
    CHECK(in_callback->count == 1);
    CHECK(on_path(*first, {"spawned-in", "handed-on", "in-callback"}) == nullptr);
    CHECK(on_path(*first, {"spawned-in", "in-callback"}) == nullptr);
}

TEST_CASE("a co-scope opened inside a plain scope of its resumption (an eager task resumed directly) is not traced") {
    FakeClock clock;
    static tracetree::detail::Site site{"eager-inner", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::TraceSession inner_trace(tracetree::TraceRequest("eager-inner"));
    tracetree::TraceSession outer_trace(tracetree::TraceRequest("outer-plain"));
    tracetree::Coroutine outer;
    std::optional<tracetree::detail::CoScope> inner;  // the eager task's, left open as it suspends
    {
        tracetree::Resumed on(outer);
        {
            TRACETREE_SCOPE("outer-plain");
            advance(1us);
            inner.emplace(site);  // the outer coroutine's code resumes the task without a Resumed
        }
        for (int i = 0; i < 3; ++i) {
            TRACETREE_SCOPE("outer-after");
            advance(1us);
        }
    }
    {
        TRACETREE_SCOPE("outside-after");
    }
    inner.reset();  // its frame destroyed outside any resumption: a dropped call
    // As without the sessions: `outer-plain` ends where the co-scope left open is current (a plain
    // scope across a suspension is not supported), its capture once.
    const auto outer_traces = outer_trace.collect(0s);
    CHECK(outer_traces.size() == 1);
    CHECK(inner_trace.collect(0s).empty());
    const auto thread = mine();
    INFO(tracetree::to_string(thread));
    const auto* after = find_root(thread, "outer-after");
    REQUIRE(after != nullptr);
    CHECK(after->count == 3);
    CHECK(after->total == 3us);
    const auto* outside = find_root(thread, "outside-after");
    REQUIRE(outside != nullptr);
    CHECK(outside->count == 1);
}

TEST_CASE("a resumption inside a capture of the same session: the capture's nested scopes stay part of it") {
    FakeClock clock;
    static tracetree::detail::Site site{"dual", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::TraceSession trace(tracetree::TraceRequest("dual").limit(10));  // a co-scope and a plain scope of one name
    tracetree::Coroutine place;
    std::optional<tracetree::detail::CoScope> open;
    {
        tracetree::Resumed on(place);
        open.emplace(site);  // traced
    }
    {
        TRACETREE_SCOPE("dual");  // captured for the same session
        advance(1us);
        {
            tracetree::Resumed on(place);  // resumed in place, inside the capture
            advance(1us);
        }
        {
            TRACETREE_SCOPE("dual");  // nested: part of the outer capture, not one of its own
            advance(1us);
        }
    }
    {
        tracetree::Resumed on(place);
        open.reset();
    }
    const auto traces = trace.collect(0s);
    CHECK(traces.size() == 2);  // the plain scope's, the co-scope's
    std::size_t plain = 0;
    for (const auto& one : traces) {
        CHECK(one.root.name == "dual");
        CHECK(one.root.count == 1);
        for (const tracetree::Node& child : one.root.children)  // the nested scope; the co-scope's node, still open
            if (child.name == "dual" && child.count == 1) ++plain;
    }
    CHECK(plain == 1);
}
