// Hand-offs (handoff.hpp): work continued on another thread under its logical parent, with its wait.
#include "support.hpp"

#include <tracetree/otel/otlp.hpp>  // the parallel work of a trace as spans

#include <doctest/doctest.h>

#include <algorithm>  // std::count
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

using namespace test;

namespace {

// A thread that runs what it is given, in order; joined by its destructor after the queue is empty.
class HandoffWorker {
public:
    explicit HandoffWorker(std::string name) : thread_([this, name] { run(name); }) {}
    ~HandoffWorker() {
        post({});
        thread_.join();
    }
    // Notified under the lock: the last task's poster may still be in notify_one() when the test,
    // woken by that task, destroys the worker (TSan saw the condition variable destroyed under it).
    void post(std::function<void()> task) {
        std::lock_guard<std::mutex> lock(mutex_);
        tasks_.push_back(std::move(task));
        ready_.notify_one();
    }

private:
    void run(const std::string& name) {
        tracetree::set_thread_name(name);
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                ready_.wait(lock, [&] { return !tasks_.empty(); });
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            if (!task) return;
            task();
        }
    }
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> tasks_;
    std::thread thread_;
};

void continued_work() {
    TRACETREE_SCOPE("work");
    advance(2us);
}

constexpr int kThreads = 8, kRequests = 200, kHops = 10;  // the stress case

}  // namespace

TEST_CASE("a hand-off: the worker records under the captured path, which says it was continued there") {
    FakeClock clock;
    tracetree::Here here;
    {
        TRACETREE_SCOPE("request");
        TRACETREE_SCOPE("handle");
        here = tracetree::here();
        advance(1us);
    }
    CHECK(!here.empty());
    tracetree::Here moved = std::move(here);
    CHECK(here.empty());  // a moved-from Here continues nothing
    here = std::move(moved);
    std::thread([&] {
        tracetree::set_thread_name("worker");
        tracetree::Continue on(here);
        continued_work();
    }).join();
    const auto profile = tracetree::profile();
    const auto* worker = find_thread(profile, "worker");
    REQUIRE(worker != nullptr);
    const auto* request = on_path(*worker, {"request"});
    REQUIRE(request != nullptr);
    CHECK(request->continued);
    CHECK(request->count == 0);
    CHECK(request->continued_on.empty());
    const auto* handle = find_child(*request, "handle");
    REQUIRE(handle != nullptr);
    CHECK(handle->continued);
    CHECK(handle->continued_on == "worker");
    const auto* done = find_child(*handle, "work");
    REQUIRE(done != nullptr);
    CHECK(done->count == 1);
    CHECK(done->total == 2us);
    CHECK(handle->total == 3us);  // the queue's 1 µs and the work's 2
    const std::string text = tracetree::to_string(*worker);
    CHECK(text.find("[continued] request") != std::string::npos);
    CHECK(text.find("[continued on worker] handle") != std::string::npos);
    // The main thread's own calls are unchanged, and the worker's land after the main thread is back out.
    const auto* main_handle = on_path(thread_at(profile, "test-main"), {"request", "handle"});
    REQUIRE(main_handle != nullptr);
    CHECK(main_handle->count == 1);
    CHECK(main_handle->children.empty());
    // Folded with the calls themselves: the work under its logical parent, one tree.
    const auto merged = profile.merged();
    const auto* folded = on_path(merged, {"request", "handle", "work"});
    REQUIRE(folded != nullptr);
    CHECK(folded->count == 1);
    CHECK_FALSE(node_at(merged, {"request"}).continued);
}

TEST_CASE("the [queued] node counts hand-offs and holds the time from here() to Continue") {
    FakeClock clock;
    std::vector<tracetree::Here> heres;
    {
        TRACETREE_SCOPE("spawn");
        for (int i = 0; i < 3; ++i) heres.push_back(tracetree::here());
    }
    for (int i = 0; i < 3; ++i) {
        advance(std::chrono::microseconds(10 * (i + 1)));  // the three waited 10, 30 and 60 µs
        std::thread([&, i] {
            tracetree::set_thread_name("pool");
            tracetree::Continue on(heres[static_cast<std::size_t>(i)]);
            continued_work();
        }).join();
    }
    const auto pool_profile = tracetree::profile();
    const auto* pool = find_thread(pool_profile, "pool");
    REQUIRE(pool != nullptr);
    const auto* queued = on_path(*pool, {"spawn", "[queued]"});
    REQUIRE(queued != nullptr);
    CHECK(queued->count == 3);
    CHECK(queued->total == 10us + 32us + 64us);  // each wait includes the work before it (2 µs each)
    CHECK(queued->min == 10us);
    CHECK(queued->max == 64us);
    CHECK(node_at(*pool, {"spawn", "work"}).count == 3);
    // The scopes outside a Continue are back where they were.
    std::thread([] {
        tracetree::set_thread_name("after");
        {
            tracetree::Here none;  // empty: continues nothing
            tracetree::Continue on(none);
            continued_work();
        }
        continued_work();
    }).join();
    const auto after_profile = tracetree::profile();
    const auto* after = find_thread(after_profile, "after");
    REQUIRE(after != nullptr);
    REQUIRE(after->roots.size() == 1);
    CHECK(after->roots[0].name == "work");
    CHECK(after->roots[0].count == 2);
}

TEST_CASE("a Continue inside the worker's own scope: back in that scope at its end") {
    FakeClock clock;
    tracetree::Here here;
    {
        TRACETREE_SCOPE("origin");
        here = tracetree::here();
    }
    std::thread([&] {
        tracetree::set_thread_name("nested");
        TRACETREE_SCOPE("loop");
        {
            tracetree::Continue on(here);
            continued_work();
        }
        continued_work();
    }).join();
    const auto nested_profile = tracetree::profile();
    const auto* nested = find_thread(nested_profile, "nested");
    REQUIRE(nested != nullptr);
    CHECK(node_at(*nested, {"origin", "work"}).count == 1);
    CHECK(node_at(*nested, {"loop", "work"}).count == 1);
    CHECK(node_at(*nested, {"loop"}).count == 1);
    CHECK(on_path(*nested, {"loop", "origin"}) == nullptr);
}

TEST_CASE("many hand-offs from one site fold into one path per worker") {
    FakeClock clock;
    constexpr int kTasks = 1000;
    {
        HandoffWorker a("fold-a"), b("fold-b");
        TRACETREE_SCOPE("dispatch");
        for (int i = 0; i < kTasks; ++i) (i % 2 == 0 ? a : b).post(tracetree::wrap(tracetree::here(), [] { TRACETREE_SCOPE("task"); }));
    }
    const auto profile = tracetree::profile();
    for (const char* name : {"fold-a", "fold-b"}) {
        const auto* thread = find_thread(profile, name);
        REQUIRE(thread != nullptr);
        REQUIRE(thread->roots.size() == 1);
        const auto& dispatch = thread->roots[0];
        CHECK(dispatch.continued);
        REQUIRE(dispatch.children.size() == 2);
        CHECK(dispatch.children[0].name == "[queued]");
        CHECK(dispatch.children[0].count == kTasks / 2);
        CHECK(dispatch.children[1].name == "task");
        CHECK(dispatch.children[1].count == kTasks / 2);
    }
    CHECK(node_at(profile.merged(), {"dispatch", "task"}).count == kTasks);
}

TEST_CASE("exact counts: tasks bouncing across 8 threads, cancelled, outliving their scope") {
    tracetree::reset();
    // Every request traced: its first hop is gathered into its trace, in a tree of the worker's own.
    tracetree::TraceSession traces(tracetree::TraceRequest("request").limit(kRequests));
    std::vector<std::unique_ptr<HandoffWorker>> workers;
    for (int i = 0; i < kThreads; ++i) workers.push_back(std::make_unique<HandoffWorker>("bounce-" + std::to_string(i)));
    Latch done(kRequests);
    std::function<void(tracetree::Here, int, int)> hop = [&](tracetree::Here here, int at, int left) {
        tracetree::Continue on(here);
        { TRACETREE_SCOPE("hop"); }
        if (left == 0) {
            done.count_down();
            return;
        }
        tracetree::Here dropped = tracetree::here();  // a task cancelled before it runs
        static_cast<void>(dropped);
        const int next = (at * 5 + left) % kThreads;
        workers[static_cast<std::size_t>(next)]->post([&hop, here = tracetree::here(), next, left] { hop(here, next, left - 1); });
    };
    std::thread requester([&] {
        tracetree::set_thread_name("requester");
        for (int r = 0; r < kRequests; ++r) {
            tracetree::Here here;
            {
                TRACETREE_SCOPE("request");
                here = tracetree::here();
            }  // the task outlives the scope that spawned it
            workers[static_cast<std::size_t>(r % kThreads)]->post([&hop, here, r] { hop(here, r % kThreads, kHops - 1); });
        }
    });
    requester.join();  // exited before most hand-offs it made are continued
    done.wait();
    workers.clear();
    const auto merged = tracetree::profile().merged();
    const auto* request = find_root(merged, "request");
    REQUIRE(request != nullptr);
    CHECK(request->count == kRequests);
    CHECK_FALSE(request->continued);
    REQUIRE(request->children.size() == 2);
    CHECK(child_at(*request, "[queued]").count == kRequests * kHops);
    CHECK(child_at(*request, "hop").count == kRequests * kHops);
    CHECK(merged.roots.size() == 1);
    const auto delivered = traces.collect(0s);
    CHECK(delivered.size() == kRequests);
    for (const auto& trace : delivered) {  // each hop of the request's chain, in its trace
        REQUIRE(trace.root.children.size() == 2);
        CHECK(trace.root.children[0].name == "[queued]");
        CHECK(trace.root.children[0].count == kHops);
        CHECK(trace.root.children[1].name == "hop");
        CHECK(trace.root.children[1].count == kHops);
    }
}

TEST_CASE("a Here outlives the thread that took it; deep paths keep their outermost 8 levels") {
    FakeClock clock;
    tracetree::Here here;
    std::thread([&] {
        tracetree::set_thread_name("gone");
        TRACETREE_SCOPE("l1");
        TRACETREE_SCOPE("l2");
        TRACETREE_SCOPE("l3");
        TRACETREE_SCOPE("l4");
        TRACETREE_SCOPE("l5");
        TRACETREE_SCOPE("l6");
        TRACETREE_SCOPE("l7");
        TRACETREE_SCOPE("l8");
        TRACETREE_SCOPE("l9");
        here = tracetree::here();
    }).join();
    std::thread([&] {
        tracetree::set_thread_name("later");
        tracetree::Continue on(here);
        continued_work();
    }).join();
    const auto later_profile = tracetree::profile();
    const auto* later = find_thread(later_profile, "later");
    REQUIRE(later != nullptr);
    const auto* l8 = on_path(*later, {"l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8"});
    REQUIRE(l8 != nullptr);
    CHECK(l8->continued_on == "later");
    CHECK(find_child(*l8, "l9") == nullptr);
    CHECK(child_at(*l8, "work").count == 1);
    CHECK(child_at(*l8, "[queued]").count == 1);
}

TEST_CASE("a hand-off continued again: the path is the first thread's, marked once per worker") {
    FakeClock clock;
    tracetree::Here first;
    {
        TRACETREE_SCOPE("front");
        first = tracetree::here();
    }
    tracetree::Here second;
    std::thread([&] {
        tracetree::set_thread_name("middle");
        tracetree::Continue on(first);
        TRACETREE_SCOPE("parse");
        second = tracetree::here();
    }).join();
    std::thread([&] {
        tracetree::set_thread_name("back");
        tracetree::Continue on(second);
        continued_work();
    }).join();
    const auto profile = tracetree::profile();
    const auto* back = find_thread(profile, "back");
    REQUIRE(back != nullptr);
    const auto* parse = on_path(*back, {"front", "parse"});
    REQUIRE(parse != nullptr);
    CHECK(parse->continued);
    CHECK(node_at(*back, {"front"}).continued_on.empty());
    CHECK(child_at(*parse, "work").count == 1);
    const auto merged = profile.merged();
    CHECK(node_at(merged, {"front", "parse", "work"}).count == 1);
    CHECK(node_at(merged, {"front", "parse"}).count == 1);
    CHECK(node_at(merged, {"front", "[queued]"}).count == 1);
    CHECK(node_at(merged, {"front", "parse", "[queued]"}).count == 1);
}

TEST_CASE("not recording: here() is empty and a Continue records nothing") {
    FakeClock clock;
    tracetree::set_enabled(false);
    const tracetree::Here off = tracetree::here();
    tracetree::set_enabled(true);
    CHECK(off.empty());
    std::thread([&] {
        tracetree::set_thread_name("off");
        tracetree::Continue on(off);
        continued_work();
    }).join();
    const auto off_thread_profile = tracetree::profile();
    const auto* off_thread = find_thread(off_thread_profile, "off");
    REQUIRE(off_thread != nullptr);
    REQUIRE(off_thread->roots.size() == 1);
    CHECK(off_thread->roots[0].name == "work");
}

TEST_CASE("stack and watch sessions on a continued path") {
    FakeClock clock;
    tracetree::Here here;
    {
        TRACETREE_SCOPE("service");
        here = tracetree::here();
    }
    tracetree::StackSession stack(tracetree::StackRequest("work"));
    tracetree::WatchSession watch(tracetree::WatchRequest("watched"));
    std::thread([&] {
        tracetree::Continue on(here);
        continued_work();
        TRACETREE_SCOPE("watched");
        TRACETREE_WATCH("id", 42);
    }).join();
    const auto frames = stack.next(0s);
    REQUIRE(frames);
    REQUIRE(frames->frames.size() == 2);
    CHECK(frames->frames[0].name == "work");
    CHECK(frames->frames[1].name == "service");
    const auto event = watch.next(0s);
    REQUIRE(event);
    REQUIRE(event->values.size() == 1);
    CHECK(event->values[0].second == "42");
}

// A task continued on a worker: an annotated function, a named scope in it, an unannotated helper,
// and the annotated leaf that a stack session matches. noinline: each keeps its machine frame.
namespace stack_handoff {
[[gnu::noinline]] void leaf() {
    TRACETREE_FUNCTION();
    advance(1us);
}
[[gnu::noinline]] void helper() {
    leaf();
    asm volatile("");  // not a tail call: helper keeps its frame
}
[[gnu::noinline]] void task() {
    TRACETREE_FUNCTION();
    {
        TRACETREE_SCOPE("task-step");
        helper();
    }
    asm volatile("");
}
}  // namespace stack_handoff

TEST_CASE("a stack across a hand-off: the worker's frames and scopes, then the scopes it was handed off from") {
    FakeClock clock;
    tracetree::Here here;
    {
        TRACETREE_SCOPE("handing-request");
        here = tracetree::here();
    }
    tracetree::StackSession stack(tracetree::StackRequest("stack_handoff::leaf"));
    std::thread([&] {
        tracetree::Continue on(here);
        stack_handoff::task();
    }).join();
    const auto trace = stack.next(0s);
    REQUIRE(trace);
    std::vector<std::string> names;
    for (const auto& frame : trace->callers) names.push_back(frame.name);
    // The unannotated helper from the machine stack; the named scope before the function holding it;
    // then, in place of the worker thread's own callers, the scope the work was handed off from.
    CHECK(names == std::vector<std::string>{"stack_handoff::helper()", "task-step", "stack_handoff::task()", "handing-request"});
    REQUIRE(names.size() == 4);
    CHECK(trace->callers[0].line == 0);  // no scope of its own
    CHECK(trace->callers[1].line != 0);
    CHECK(trace->callers[2].line != 0);
    CHECK(trace->callers[3].line != 0);
    std::ostringstream text;
    tracetree::render(text, *trace);
    CHECK(text.str().find("    @stack_handoff::leaf()\n        at stack_handoff::helper()\n        at task-step(test_handoff.cpp:") !=
          std::string::npos);
    CHECK(text.str().find("        at handing-request(test_handoff.cpp:") != std::string::npos);
}

// Scopes whose names no machine frame has: an empty run-time name, and a lambda's function scope
// (its frame is named `...::{lambda()#1}::operator()()`, its scope `...::()`).
namespace stack_shapes {
[[gnu::noinline]] void leaf() {
    TRACETREE_FUNCTION();
    asm volatile("");
}
[[gnu::noinline]] void via_empty_name() {
    TRACETREE_SCOPE_DYNAMIC(std::string());
    leaf();
    asm volatile("");
}
[[gnu::noinline]] void via_lambda() {
    const auto call = [] {
        TRACETREE_FUNCTION();
        via_empty_name();
    };
    call();
    asm volatile("");
}
}  // namespace stack_shapes

TEST_CASE("a stack's callers: a named scope where its function is, a lambda's function scope only as its frame") {
    tracetree::StackSession stack(tracetree::StackRequest("stack_shapes::leaf"));
    stack_shapes::via_lambda();
    const auto trace = stack.next(0s);
    REQUIRE(trace);
    std::vector<std::string> names;
    for (const auto& frame : trace->callers) names.push_back(frame.name);
    REQUIRE(names.size() >= 3);
    CHECK(names[0].empty());  // the empty run-time name, inside via_empty_name
    CHECK(names[1] == "stack_shapes::via_empty_name()");
    CHECK(std::count(names.begin(), names.end(), "stack_shapes::via_empty_name()") == 1);
    CHECK(std::count(names.begin(), names.end(), "stack_shapes::via_lambda()") == 1);
    CHECK(std::count(names.begin(), names.end(), "stack_shapes::via_lambda()::()") == 0);  // its frame stands for it
    CHECK(names.back() == "main()");
}

// The merged caller's total holds the work continued under it; its min and max are its own calls'. The
// text says so on the caller's line, and JSON carries the figure, so a saved profile renders the same.
TEST_CASE("the merged profile says how much of a caller's total was continued under it") {
    FakeClock clock;
    tracetree::Here here;
    for (const auto own : {1us, 3us}) {
        TRACETREE_SCOPE("merged-origin");
        if (here.empty()) here = tracetree::here();
        advance(own);
    }
    std::thread([&] {  // 4 µs queued, 2 µs of work
        tracetree::set_thread_name("merged-worker");
        tracetree::Continue on(here);
        continued_work();
    }).join();
    const auto profile = tracetree::profile();
    const auto merged = profile.merged();
    const auto& origin = node_at(merged, {"merged-origin"});
    CHECK(origin.count == 2);
    CHECK(origin.total == 10us);
    CHECK(origin.min == 1us);
    CHECK(origin.max == 3us);
    CHECK(origin.continued_total == 6us);
    const std::string note = "merged-origin [total includes 0.006ms continued under it; min,max: its own calls]\n";
    CHECK(tracetree::to_string(merged).find("[min=0.001ms,max=0.003ms,total=0.01ms,count=2] " + note) != std::string::npos);
    std::ostringstream human;
    tracetree::render_human(human, merged);
    CHECK(human.str().find("merged-origin  (total includes 6µs continued under it; min, max: its own calls)\n") !=
          std::string::npos);
    // Each thread's own tree has nothing continued under a call: no note.
    for (const auto& thread : profile.threads) CHECK(tracetree::to_string(thread).find("total includes") == std::string::npos);
    tracetree::Profile all;
    all.threads.push_back(merged);
    std::ostringstream json;
    tracetree::write_json(json, all);
    CHECK(tracetree::to_string(tracetree::read_profile_json(json.str()).threads.at(0)).find(note) != std::string::npos);
}

TEST_CASE("a continued path in JSON: written and read back") {
    FakeClock clock;
    tracetree::Here here;
    {
        TRACETREE_SCOPE("json-origin");
        here = tracetree::here();
    }
    std::thread([&] {
        tracetree::set_thread_name("json-worker");
        tracetree::Continue on(here);
        continued_work();
    }).join();
    tracetree::Profile only;
    const auto profile = tracetree::profile();
    only.threads.push_back(thread_at(profile, "json-worker"));
    std::ostringstream json;
    tracetree::write_json(json, only);
    const tracetree::Profile back = tracetree::read_profile_json(json.str());
    REQUIRE(back.threads.size() == 1);
    REQUIRE(back.threads[0].roots.size() == 1);
    const auto& origin = back.threads[0].roots[0];
    CHECK(origin.continued);
    CHECK(origin.continued_on == "json-worker");
    CHECK(origin.children.at(1).name == "work");
    CHECK_FALSE(origin.children.at(1).continued);
}

TEST_CASE("a trace follows the hand-off: the work continued on other threads, in its one tree") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("gathered-request").limit(2));
    std::vector<tracetree::Here> handed;
    {
        TRACETREE_SCOPE("gathered-request");
        {
            TRACETREE_SCOPE("gathered-parse");
            advance(1us);
        }
        handed.push_back(tracetree::here());
        handed.push_back(tracetree::here());
        advance(1us);
    }
    CHECK_FALSE(trace.next(0s));  // held until the work handed off is done
    std::thread([&] {
        tracetree::set_thread_name("gather-a");
        tracetree::Continue on(handed[0]);
        continued_work();
    }).join();
    CHECK_FALSE(trace.next(0s));
    std::thread([&] {
        tracetree::set_thread_name("gather-b");
        const tracetree::Here mine = std::move(handed[1]);
        handed.clear();  // the first Here is gone; the second lives in `mine` until the task's end
        tracetree::Continue on(mine);
        continued_work();
        advance(3us);
    }).join();
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    CHECK(captured->thread_name == "test-main");
    const tracetree::Node& root = captured->root;
    CHECK(root.name == "gathered-request");
    CHECK(root.count == 1);
    REQUIRE(root.children.size() == 3);
    CHECK(root.children[0].name == "gathered-parse");
    CHECK(root.children[1].name == "[queued]");
    CHECK(root.children[1].count == 2);
    CHECK(root.children[2].name == "work");
    CHECK(root.children[2].count == 2);
    CHECK(root.children[2].total == 4us);
    CHECK(root.total == 2us);  // its wall time: the continued work ran meanwhile on other threads
    CHECK_FALSE(root.children[0].parallel);
    CHECK(root.children[1].parallel);
    CHECK(root.children[2].parallel);
    CHECK(root.self() == 1us);  // the parse was the rest: parallel work is not out of the root's time
    const std::string text = tracetree::to_string(*captured);
    CHECK(text.find("[queued] [parallel]") != std::string::npos);
    CHECK(text.find("may add up to over 100%") != std::string::npos);
    // The profile still counts the work on the threads that ran it.
    const auto profile = tracetree::profile();
    CHECK(node_at(thread_at(profile, "gather-a"), {"gathered-request", "work"}).count == 1);
    CHECK(node_at(thread_at(profile, "gather-b"), {"gathered-request", "work"}).count == 1);
}

TEST_CASE("a Continue inside a trace's continued work: the work stays where it runs, the arena whole") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("nested-request"));
    std::vector<tracetree::Here> handed;
    {
        TRACETREE_SCOPE("nested-request");
        handed.push_back(tracetree::here());
        handed.push_back(tracetree::here());
    }
    std::thread([&] {
        tracetree::set_thread_name("nested-worker");
        tracetree::Continue outer(handed[0]);
        { tracetree::Continue inner(handed[1]); continued_work(); }  // an inline executor's second task
        continued_work();
    }).join();
    handed.clear();
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    const tracetree::Node& root = captured->root;
    CHECK(root.name == "nested-request");
    REQUIRE(root.children.size() == 2);
    CHECK(root.children[0].name == "[queued]");
    CHECK(root.children[0].count == 1);  // the inner Continue recorded no hand-off of its own
    CHECK(root.children[1].name == "work");
    CHECK(root.children[1].count == 2);  // both calls, in the outer Continue's tree
    CHECK(node_at(thread_at(tracetree::profile(), "nested-worker"), {"nested-request", "work"}).count == 2);
}

TEST_CASE("a trace whose hand-off is dropped unused is delivered when the last Here goes") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("dropped-request"));
    {
        tracetree::Here kept;
        {
            TRACETREE_SCOPE("dropped-request");
            kept = tracetree::here();
            tracetree::Here copy = kept;
            static_cast<void>(copy);
        }
        CHECK_FALSE(trace.next(0s));
    }
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    CHECK(captured->root.name == "dropped-request");
    CHECK(captured->root.children.empty());
}

TEST_CASE("[queued] and [suspended]: the minimum and maximum are the waits', whichever came first or last") {
    // The shortest and the longest wait are neither the first nor the last.
    FakeClock clock;
    std::vector<tracetree::Here> heres;  // taken at 0, 30, 40 and 50 us, all continued at 60 us
    {
        TRACETREE_SCOPE("waits.spawn");
        for (int i = 0; i < 4; ++i) {
            heres.push_back(tracetree::here());
            advance(i == 0 ? 30us : 10us);
        }
    }
    std::unique_ptr<tracetree::Coroutine> place;
    {
        TRACETREE_SCOPE("waits.coroutine");
        place = std::make_unique<tracetree::Coroutine>();
    }
    const tracetree::ThreadProfile thread = recorded_by("waits", [&] {
        for (const std::size_t i : {1u, 0u, 3u, 2u}) tracetree::Continue on(heres[i]);  // waits of 30, 60, 10, 20 us
        { tracetree::Resumed first(*place); }  // [queued] from its start; then suspended 30, 60, 10, 20 us
        for (const std::chrono::microseconds wait : {30us, 60us, 10us, 20us}) {
            advance(wait);
            tracetree::Resumed on(*place);
        }
    });
    const tracetree::Node* queued = on_path(thread, {"waits.spawn", "[queued]"});
    REQUIRE(queued != nullptr);
    CHECK(queued->count == 4);
    CHECK(queued->min == 10us);
    CHECK(queued->max == 60us);
    const tracetree::Node* suspended = on_path(thread, {"waits.coroutine", "[suspended]"});
    REQUIRE(suspended != nullptr);
    CHECK(suspended->count == 4);
    CHECK(suspended->total == 120us);
    CHECK(suspended->min == 10us);
    CHECK(suspended->max == 60us);
}


namespace {

// A trace delivered through on_trace, on whichever thread lets it go, with what had run by then.
struct Delivery {
    std::mutex mutex;
    std::vector<tracetree::Trace> traces;
    std::vector<int> leaves_by_then;
    Latch first{1};
    std::atomic<int> leaves{0};

    tracetree::TraceRequest request(const std::string& pattern) {
        return tracetree::TraceRequest(pattern).limit(1).on_trace([this](const tracetree::Trace& trace) {
            {
                std::lock_guard<std::mutex> lock(mutex);
                traces.push_back(trace);
                leaves_by_then.push_back(leaves.load());
            }
            first.count_down();
        });
    }
};

// requester -> pool B -> pool C -> pool D: 4 tasks, 2 subtasks each, 3 leaves each.
struct ThreeHops {
    explicit ThreeHops(Delivery& to) : delivery(to) {}
    Delivery& delivery;
    HandoffWorker b{"hops-b"}, c{"hops-c"}, d{"hops-d"};
};
void hops_leaf(ThreeHops& hops) {
    TRACETREE_SCOPE("hops.leaf");
    hops.delivery.leaves.fetch_add(1);
}
void hops_subtask(ThreeHops& hops) {
    TRACETREE_SCOPE("hops.subtask");
    for (int i = 0; i < 3; ++i) hops.d.post(tracetree::wrap(tracetree::here(), [&hops] { hops_leaf(hops); }));
}
void hops_task(ThreeHops& hops) {
    TRACETREE_SCOPE("hops.task");
    for (int i = 0; i < 2; ++i) hops.c.post(tracetree::wrap(tracetree::here(), [&hops] { hops_subtask(hops); }));
}
void check_three_hops(const tracetree::Node& root) {
    CHECK(root.count == 1);
    CHECK(child_at(root, "[queued]").count == 4);
    const tracetree::Node& task = child_at(root, "hops.task");
    CHECK(task.count == 4);
    CHECK(child_at(task, "[queued]").count == 8);
    const tracetree::Node& subtask = child_at(task, "hops.subtask");
    CHECK(subtask.count == 8);
    CHECK(child_at(subtask, "[queued]").count == 24);
    CHECK(child_at(subtask, "hops.leaf").count == 24);
}

}  // namespace

TEST_CASE("every hop: requester -> B -> C -> D, fire and forget, one tree delivered after the last leaf") {
    Delivery delivery;
    tracetree::TraceSession trace(delivery.request("hops.request"));
    {
        ThreeHops hops(delivery);
        {
            TRACETREE_SCOPE("hops.request");
            for (int i = 0; i < 4; ++i) hops.b.post(tracetree::wrap(tracetree::here(), [&hops] { hops_task(hops); }));
        }  // returns at once: the trace waits for the work
        delivery.first.wait();
    }  // the workers joined: no second delivery came late
    std::lock_guard<std::mutex> lock(delivery.mutex);
    REQUIRE(delivery.traces.size() == 1);
    CHECK(delivery.leaves_by_then[0] == 24);
    CHECK(delivery.traces[0].root.name == "hops.request");
    check_three_hops(delivery.traces[0].root);
}

TEST_CASE("every hop: requester -> B -> C -> D, the requester waiting for the work") {
    Delivery delivery;
    tracetree::TraceSession trace(delivery.request("hops.waiting"));
    {
        ThreeHops hops(delivery);
        {
            TRACETREE_SCOPE("hops.waiting");
            for (int i = 0; i < 4; ++i) hops.b.post(tracetree::wrap(tracetree::here(), [&hops] { hops_task(hops); }));
            while (delivery.leaves.load() != 24) std::this_thread::yield();
        }
        delivery.first.wait();
    }
    std::lock_guard<std::mutex> lock(delivery.mutex);
    REQUIRE(delivery.traces.size() == 1);
    check_three_hops(delivery.traces[0].root);
}

TEST_CASE("every hop: a coroutine started in continued work, and tasks posted from its resumptions") {
    Delivery delivery;
    tracetree::TraceSession trace(delivery.request("co-hops.request"));
    {
        HandoffWorker b("co-hops-b"), c("co-hops-c"), d("co-hops-d");
        {
            TRACETREE_SCOPE("co-hops.request");
            b.post(tracetree::wrap(tracetree::here(), [&c, &d, &delivery] {
                TRACETREE_SCOPE("co-hops.task");
                auto place = std::make_shared<tracetree::Coroutine>();  // its origin: here, in B's continued work
                for (int i = 0; i < 2; ++i)
                    c.post([&d, &delivery, place] {  // each resumption on C posts a task to D
                        tracetree::Resumed on(*place);
                        TRACETREE_SCOPE("co-hops.step");
                        d.post(tracetree::wrap(tracetree::here(), [&delivery] {
                            TRACETREE_SCOPE("co-hops.leaf");
                            delivery.leaves.fetch_add(1);
                        }));
                    });
            }));
        }
        delivery.first.wait();
    }
    std::lock_guard<std::mutex> lock(delivery.mutex);
    REQUIRE(delivery.traces.size() == 1);
    CHECK(delivery.leaves_by_then[0] == 2);
    const tracetree::Node& task = child_at(delivery.traces[0].root, "co-hops.task");
    CHECK(task.count == 1);
    const tracetree::Node& step = child_at(task, "co-hops.step");
    CHECK(step.count == 2);
    CHECK(child_at(step, "co-hops.leaf").count == 2);
    CHECK(child_at(step, "[queued]").count == 2);
}

TEST_CASE("a Here continued once, its Continue ended, no longer holds the trace; one made for many does") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("spent-request").limit(2));
    std::function<void()> idle;  // an executor's copy of the task it ran, kept until its next task
    {
        TRACETREE_SCOPE("spent-request");
        idle = tracetree::wrap(tracetree::here(), [] { continued_work(); });
    }
    std::function<void()> copy = idle;
    CHECK_FALSE(trace.next(0s));
    std::thread(idle).join();
    const auto captured = trace.next(0s);  // `idle` and `copy` still hold the task
    REQUIRE(captured);
    CHECK(child_at(captured->root, "work").count == 1);
    std::thread(copy).join();  // a spent Here continued again: recorded where it ran, not in the trace
    CHECK(node_at(tracetree::profile().merged(), {"spent-request", "work"}).count == 2);

    tracetree::Here many;
    {
        TRACETREE_SCOPE("spent-request");
        many = tracetree::here(tracetree::for_many);
    }
    for (int i = 0; i < 2; ++i) {
        std::thread([&] {
            tracetree::Continue on(many);
            continued_work();
        }).join();
        CHECK_FALSE(trace.next(0s));
    }
    many = tracetree::Here();
    const auto both = trace.next(0s);
    REQUIRE(both);
    CHECK(child_at(both->root, "work").count == 2);
}

TEST_CASE("a traced request that fans out: its time is its wall time, the parallel work marked") {
    FakeClock clock;
    tracetree::TraceSession trace(tracetree::TraceRequest("fan.request"));
    {
        TRACETREE_SCOPE("fan.request");
        std::vector<tracetree::Here> handed;
        for (int i = 0; i < 4; ++i) handed.push_back(tracetree::here());
        Latch started(4), advanced(1);
        std::vector<std::thread> fan;
        for (std::size_t i = 0; i < 4; ++i)
            fan.emplace_back([&, i] {  // the four parts run at once, for the request's 10 us
                tracetree::Continue on(handed[i]);
                TRACETREE_SCOPE("fan.part");
                started.count_down();
                advanced.wait();
            });
        started.wait();
        advance(10us);
        advanced.count_down();
        for (std::thread& part : fan) part.join();
    }
    const auto captured = trace.next(0s);
    REQUIRE(captured);
    const tracetree::Node& root = captured->root;
    CHECK(root.total == 10us);  // not the sum of the four parts (40 us)
    CHECK(root.self() == 10us);
    CHECK(child_at(root, "[queued]").parallel);
    const tracetree::Node& part = child_at(root, "fan.part");
    CHECK(part.parallel);
    CHECK(part.count == 4);
    CHECK(part.total == 40us);
    const std::string text = tracetree::to_string(*captured);
    CHECK(text.find("[400.00% min=0.01ms,max=0.01ms,total=0.04ms,count=4] fan.part") != std::string::npos);
    std::ostringstream json;
    tracetree::write_json(json, *captured);
    const auto back = std::get<tracetree::Trace>(tracetree::read_json(json.str()));
    CHECK(child_at(back.root, "fan.part").parallel);
    // As spans: each part from the request's start, four times its length, marked.
    const std::string otlp = tracetree::to_otlp_json({*captured});
    CHECK(otlp.find("\"tracetree.parallel\"") != std::string::npos);
    const auto start_of = [&](const std::string& name) {
        const std::size_t at = otlp.find("\"startTimeUnixNano\"", otlp.find("\"name\":\"" + name + "\""));
        return otlp.substr(at, otlp.find(',', at) - at);
    };
    CHECK(start_of("fan.part") == start_of("fan.request"));
    CHECK(start_of("[queued]") == start_of("fan.request"));
}

TEST_CASE("a coroutine place's lock: held in one fork generation, free in the next; waits within one") {
    using tracetree::detail::PlaceLock;
    std::atomic<std::uint32_t> word{0}, generation{7};
    std::optional<PlaceLock> parent, child;
    parent.emplace(word, generation);
    CHECK(word.load() == 15);  // held: the generation twice, plus one
    generation.store(8);       // a fork() while it was held: this is the child now, whose other threads are gone
    child.emplace(word, generation);
    CHECK(word.load() == 17);  // free in the child's generation
    parent.reset();            // the forking thread's own hold ends (a signal handler's fork()) ...
    CHECK(word.load() == 17);  // ... and leaves the child's holder alone
    child.reset();
    CHECK(word.load() == 16);

    // A thread waiting when the fork came takes it in the child, where its holder is gone.
    parent.emplace(word, generation);
    std::atomic<bool> waiting{false};
    std::thread waiter([&] {
        waiting.store(true);
        PlaceLock lock(word, generation);
    });
    while (!waiting.load()) {
    }
    generation.store(9);
    waiter.join();  // hangs if the waiter never reads the generation again
    CHECK(word.load() == 18);
    parent.reset();
    CHECK(word.load() == 18);

    // Within one generation it excludes: a second thread waits for the first's end.
    std::atomic<int> inside{0}, most{0};
    std::atomic<int> ready{0};
    auto work = [&] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        for (int i = 0; i < 20000; ++i) {
            PlaceLock lock(word, generation);
            const int now = inside.fetch_add(1) + 1;
            int seen = most.load();
            while (now > seen && !most.compare_exchange_weak(seen, now)) {
            }
            inside.fetch_sub(1);
        }
    };
    std::thread other(work);
    work();
    other.join();
    CHECK(most.load() == 1);
    CHECK(word.load() == 18);
}
