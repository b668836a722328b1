// The OS thread id (issue 39, item 5): taken when a thread joins the recorder and again in a forked
// child, carried in every delivered value and in profiles, shown by the text only when asked
// (RenderOptions::tid_marker: the default stays Arthas's byte for byte) and in JSON as "tid".
#include <tracetree/control.hpp>
#include <tracetree/render.hpp>
#include <tracetree/sessions.hpp>
#include <tracetree/views.hpp>

#include <doctest/doctest.h>

#include "fork_child.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;

std::uint32_t own_tid() { return static_cast<std::uint32_t>(syscall(SYS_gettid)); }

void work() {
    TRACETREE_SCOPE("tids.work");
    TRACETREE_WATCH("answer", 42);
    TRACETREE_SCOPE("tids.inner");
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class Value>
std::string rendered(const Value& value, const tracetree::RenderOptions& options) {
    std::ostringstream out;
    tracetree::render(out, value, options);
    return out.str();
}

}  // namespace

TEST_CASE("a trace carries the OS thread id of the thread that recorded it, each thread its own") {
    tracetree::reset();
    tracetree::TraceSession session(tracetree::TraceRequest("tids.work").limit(2));
    std::map<std::string, std::uint32_t> tids;
    std::uint32_t tid_one = 0, tid_two = 0;
    std::thread one([&] {
        tracetree::set_thread_name("tids-one");
        tid_one = own_tid();
        work();
    });
    one.join();
    std::thread two([&] {
        tracetree::set_thread_name("tids-two");
        tid_two = own_tid();
        work();
    });
    two.join();
    tids["tids-one"] = tid_one;
    tids["tids-two"] = tid_two;
    REQUIRE(tid_one != tid_two);  // the second thread is not the first one's id reused while it ran
    std::vector<tracetree::Trace> traces;
    for (int i = 0; i < 2; ++i) {
        std::optional<tracetree::Trace> trace = session.next(10s);
        REQUIRE(trace);
        traces.push_back(std::move(*trace));
    }
    for (const tracetree::Trace& trace : traces) {
        CAPTURE(trace.thread_name);
        REQUIRE(tids.count(trace.thread_name) == 1);
        CHECK(trace.os_thread_id == tids[trace.thread_name]);
        CHECK(trace.os_thread_id != trace.thread_id);  // not the recorder's own number (pids are far above it here)
    }
    CHECK(traces[0].thread_name != traces[1].thread_name);

    // Kept with the exited threads' profiles, one thread per name.
    const tracetree::Profile profile = tracetree::profile();
    int found = 0;
    for (const tracetree::ThreadProfile& thread : profile.threads) {
        if (tids.count(thread.thread_name) == 0) continue;
        ++found;
        CHECK(thread.exited);
        CHECK(thread.os_thread_id == tids[thread.thread_name]);
    }
    CHECK(found == 2);
}

TEST_CASE("a live thread's profile, stack and watch values carry its OS thread id") {
    tracetree::reset();
    tracetree::StackSession stack(tracetree::StackRequest("tids.inner").limit(1));
    tracetree::WatchSession watch(tracetree::WatchRequest("tids.work").limit(1));
    work();
    const std::optional<tracetree::StackTrace> who = stack.next(10s);
    const std::optional<tracetree::WatchEvent> what = watch.next(10s);
    REQUIRE(who);
    REQUIRE(what);
    CHECK(who->os_thread_id == own_tid());
    CHECK(what->os_thread_id == own_tid());
    bool self = false;
    for (const tracetree::ThreadProfile& thread : tracetree::profile().threads) {
        if (thread.exited || thread.thread_id != who->thread_id) continue;
        self = true;
        CHECK(thread.os_thread_id == own_tid());
    }
    CHECK(self);

    // The stack header: Arthas's by default, `;tid=` only when asked.
    const std::string id = ";id=" + std::to_string(who->thread_id);
    CHECK(!has(rendered(*who, tracetree::RenderOptions()), "tid="));
    CHECK(has(rendered(*who, tracetree::RenderOptions()), id + "\n"));
    CHECK(has(rendered(*who, tracetree::RenderOptions().tid_marker()), id + ";tid=" + std::to_string(own_tid()) + "\n"));
}

TEST_CASE("exited threads folded by name keep no OS thread id: it was several threads'") {
    tracetree::reset();
    for (int i = 0; i < 2; ++i) {
        std::thread worker([] {
            tracetree::set_thread_name("tids-folded");
            work();
        });
        worker.join();
    }
    int found = 0;
    for (const tracetree::ThreadProfile& thread : tracetree::profile().threads) {
        if (thread.thread_name != "tids-folded") continue;
        ++found;
        CHECK(thread.exited_threads == 2);
        CHECK(thread.os_thread_id == 0);
    }
    CHECK(found == 1);
}

TEST_CASE("the text shows the OS thread id only when asked; JSON always, as \"tid\", when known") {
    tracetree::Trace trace;
    trace.thread_name = "worker";
    trace.thread_id = 3;
    trace.os_thread_id = 12345;
    trace.fields = {{"request", "r1"}};
    trace.root.name = "f()";
    trace.root.count = 1;
    trace.root.total = trace.root.min = trace.root.max = 2ms;

    // Byte for byte the header without the id, when not asked: Arthas's.
    tracetree::Trace without = trace;
    without.os_thread_id = 0;
    const std::string plain = rendered(trace, tracetree::RenderOptions().colour(tracetree::Colour::never).utc());
    CHECK(plain == rendered(without, tracetree::RenderOptions().colour(tracetree::Colour::never).utc()));
    CHECK(!has(plain, "tid="));
    CHECK(!has(tracetree::to_string(trace), "tid="));  // to_string's default does not ask either
    const std::string marked = rendered(trace, tracetree::RenderOptions().colour(tracetree::Colour::never).utc().tid_marker());
    CHECK(has(marked, ";thread_name=worker;id=3;tid=12345;request=r1\n"));
    std::string expected = plain;
    expected.insert(expected.find(";request="), ";tid=12345");
    CHECK(marked == expected);  // the one difference
    // Unknown (a value built by hand, a folded entry): nothing, even when asked.
    CHECK(rendered(without, tracetree::RenderOptions().colour(tracetree::Colour::never).utc().tid_marker()) == plain);

    tracetree::ThreadProfile thread;
    thread.thread_name = "worker";
    thread.thread_id = 3;
    thread.os_thread_id = 12345;
    thread.roots.push_back(trace.root);
    const auto taken = std::chrono::system_clock::time_point(1s);
    std::ostringstream profile_text, profile_marked;
    tracetree::render(profile_text, thread, taken, tracetree::RenderOptions().colour(tracetree::Colour::never).utc());
    tracetree::render(profile_marked, thread, taken, tracetree::RenderOptions().colour(tracetree::Colour::never).utc().tid_marker());
    CHECK(!has(profile_text.str(), "tid="));
    CHECK(has(profile_marked.str(), ";id=3;tid=12345\n"));

    std::ostringstream human;
    tracetree::render_human(human, trace);
    CHECK(has(human.str(), "(id 3, tid 12345)"));

    std::ostringstream json;
    tracetree::write_json(json, trace);
    CHECK(has(json.str(), "\"thread_id\":3,\"tid\":12345,"));
    CHECK(tracetree::read_trace_json(json.str()).os_thread_id == 12345);
    std::ostringstream json_without;
    tracetree::write_json(json_without, without);
    CHECK(!has(json_without.str(), "\"tid\""));  // unknown: left out, so files read as before
    CHECK(tracetree::read_trace_json(json_without.str()).os_thread_id == 0);

    tracetree::Profile profile;
    profile.threads.push_back(thread);
    std::ostringstream profile_json;
    tracetree::write_json(profile_json, profile);
    CHECK(has(profile_json.str(), "\"thread_id\":3,\"tid\":12345,"));
    const tracetree::Profile back = tracetree::read_profile_json(profile_json.str());
    REQUIRE(back.threads.size() == 1);
    CHECK(back.threads[0].os_thread_id == 12345);

    // The folded stacks' and flame graph's thread frame is async-profiler's `[name tid=N]`, N the OS id.
    std::ostringstream folded;
    tracetree::write_folded(folded, profile, tracetree::FoldedOptions{tracetree::FoldedValue::count, true});
    CHECK(folded.str() == "[worker tid=12345];f() 1\n");
}

TEST_CASE("a forked child's captures carry the child's thread id, not the parent's") {
    tracetree::TraceSession session(tracetree::TraceRequest("tids.work").limit(100));
    work();  // this thread has joined the recorder, with the parent's id
    const std::optional<tracetree::Trace> before = session.next(10s);
    REQUIRE(before);
    REQUIRE(before->os_thread_id == own_tid());
    const std::uint32_t parent = own_tid();
    const pid_t pid = fork();
    if (pid == 0) {
        work();
        const std::optional<tracetree::Trace> trace = session.next(10s);
        if (!trace) _exit(2);
        if (trace->os_thread_id == parent) _exit(3);
        _exit(trace->os_thread_id == own_tid() && trace->thread_id == before->thread_id ? 0 : 4);
    }
    CHECK(fork_child::exit_status(pid) == 0);
    work();  // the parent's own id is untouched
    const std::optional<tracetree::Trace> after = session.next(10s);
    REQUIRE(after);
    CHECK(after->os_thread_id == parent);
}
