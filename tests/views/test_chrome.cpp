#include <doctest/doctest.h>
#include <tracetree/all.hpp>

#include <unistd.h>

#include "../golden.hpp"
#include "samples.hpp"

#include <sstream>

namespace {

tracetree::Span span(std::string name, std::int64_t start_ns, std::int64_t duration_ns, std::uint32_t depth,
                     bool threw = false) {
    tracetree::Span s;
    s.name = std::move(name);
    s.file = "src/app.cpp";
    s.line = 10 + depth;
    s.start = tracetree::Nanos(start_ns);
    s.duration = tracetree::Nanos(duration_ns);
    s.depth = depth;
    s.threw = threw;
    return s;
}

std::string chrome(const tracetree::Timeline& timeline) {
    std::ostringstream out;
    tracetree::write_chrome_trace(out, timeline);
    return out.str();
}

}  // namespace

TEST_CASE("Chrome trace: complete events in start order, thread names, a marker for dropped spans") {
    tracetree::Timeline timeline;
    timeline.origin = samples::at(1764547200123);
    timeline.process_id = 1;
    tracetree::ThreadTimeline main;
    main.thread_name = "main";
    main.thread_id = 1;
    // In order of their end, as the recorder keeps them: the child ends first.
    main.spans = {span("parse()", 1500, 2000, 1), span("handle()", 1500, 5250, 0, true), span("handle()", 9000, 1, 0)};
    tracetree::ThreadTimeline worker;
    worker.thread_name = "worker \"1\"";
    worker.thread_id = 2;
    worker.dropped = 12;
    worker.spans = {span("job()", 100, 1000000, 0)};
    timeline.threads = {main, worker};
    const std::string text = chrome(timeline);
    golden::compare("timeline.chrome.json", text);
    CHECK(text.find(R"j({"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"worker \"1\""}})j") !=
          std::string::npos);
    // The parent (same start, depth 0) comes before its child.
    CHECK(text.find(R"j("name":"handle()","cat":"tracetree","ph":"X","ts":1.500,"dur":5.250)j") <
          text.find(R"j("name":"parse()","cat":"tracetree","ph":"X","ts":1.500,"dur":2.000)j"));
    CHECK(text.find(R"j("depth":0,"threw":true)j") != std::string::npos);
    CHECK(text.find(R"j({"name":"tracetree: 12 spans dropped (per-thread bound reached; the first spans were kept)",)j"
                    R"j("cat":"tracetree","ph":"i","s":"t","ts":1000.100,"pid":1,"tid":2,"args":{"dropped":12}})j") !=
          std::string::npos);
    CHECK(text.find("spans dropped", text.find("\"tid\":1,")) > text.find("\"tid\":2,"));  // none on main
}

TEST_CASE("Chrome trace: the pid is the recording process's") {
    tracetree::start_timeline(16);
    { TRACETREE_SCOPE("pid check"); }
    tracetree::stop_timeline();
    const std::string text = chrome(tracetree::timeline());
    CHECK(text.find("\"pid\":" + std::to_string(getpid()) + ",") != std::string::npos);
    CHECK(text.find("\"pid\":0,") == std::string::npos);
}

TEST_CASE("Chrome trace: an empty timeline is still a valid document") {
    CHECK(chrome({}) ==
          "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"tracetree\",\"origin_unix_ns\":0},\"traceEvents\":[\n"
          "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"tracetree\"}}\n]}\n");
}

TEST_CASE("Chrome trace: names are escaped (the Python check parses the same output)") {
    tracetree::Timeline timeline;
    tracetree::ThreadTimeline thread;
    thread.thread_name = "t\x01\"\\";
    for (const std::string& name : samples::hostile_names()) thread.spans.push_back(span(name, 0, 1, 0));
    timeline.threads.push_back(thread);
    const std::string text = chrome(timeline);
    CHECK(text.find(R"j("name":"t\u0001\"\\")j") != std::string::npos);
    CHECK(text.find(R"j("name":"ctrl\u0001\u0002\u0008\u000c\n\u000d\t\u001f\u007f end")j") != std::string::npos);
    CHECK(text.find(R"j("name":"nul\u0000inside")j") != std::string::npos);
}
