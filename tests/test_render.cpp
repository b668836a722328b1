// Rendering: Arthas's rules, checked against exact text.
#include "support.hpp"

#include <doctest/doctest.h>

#include <sstream>

using namespace test;
using tracetree::Nanos;
using tracetree::Node;

static Node node(std::string name, std::uint32_t line, std::uint64_t count, Nanos total, Nanos min = Nanos(0),
                 Nanos max = Nanos(0)) {
    Node n;
    n.name = std::move(name);
    n.line = line;
    n.count = count;
    n.total = total;
    n.min = count == 1 ? total : min;
    n.max = count == 1 ? total : max;
    return n;
}

static tracetree::Trace tomcat_trace() {
    tracetree::Trace trace;
    trace.start = std::chrono::system_clock::time_point(std::chrono::seconds(1796082001)) + 123ms;
    trace.thread_name = "http-nio-7744-exec-1";
    trace.thread_id = 3;
    trace.root = node("Http11Processor::service()", 0, 1, 131650000ns);
    trace.root.children.push_back(node("Http11InputBuffer::parseRequestLine()", 212, 1, 11000ns));
    trace.root.children.push_back(
        node("TomcatJarInputStream::getNextJarEntry()", 117, 31, 74200000ns, 4500ns, 34480000ns));
    trace.root.children.push_back(node("DispatcherServlet::doDispatch()", 350, 1, 18030000ns));
    return trace;
}

static const tracetree::RenderOptions plain = tracetree::RenderOptions().colour(tracetree::Colour::never).utc();

TEST_CASE("a trace renders as Arthas prints it") {
    CHECK(tracetree::to_string(tomcat_trace(), plain) ==
          "`---ts=2026-11-30 23:40:01.123;thread_name=http-nio-7744-exec-1;id=3\n"
          "    `---[131.65ms] Http11Processor::service()\n"
          "        +---[0.01% 0.011ms ] Http11InputBuffer::parseRequestLine() #212\n"
          "        +---[56.36% min=0.0045ms,max=34.48ms,total=74.2ms,count=31] "
          "TomcatJarInputStream::getNextJarEntry() #117\n"
          "        `---[13.70% 18.03ms ] DispatcherServlet::doDispatch() #350\n"
          "\n");
}

TEST_CASE("colour marks the costliest node below the root, when asked or on a terminal") {
    std::ostringstream out;
    tracetree::render(out, tomcat_trace(), tracetree::RenderOptions().colour(tracetree::Colour::always).utc());
    CHECK(out.str().find("+---\x1b[31m[56.36% min=0.0045ms,max=34.48ms,total=74.2ms,count=31] \x1b[m"
                         "TomcatJarInputStream::getNextJarEntry() #117\n") != std::string::npos);
    CHECK(out.str().find("\x1b[31m[131.65ms]") == std::string::npos);
    std::ostringstream automatic;  // a string stream is no terminal
    tracetree::render(automatic, tomcat_trace(), tracetree::RenderOptions().utc());
    CHECK(automatic.str().find('\x1b') == std::string::npos);
}

TEST_CASE("nesting uses | and blank indents; throws, drops and fields are shown") {
    tracetree::Trace trace;
    trace.start = std::chrono::system_clock::time_point(std::chrono::seconds(0));
    trace.thread_name = "main";
    trace.thread_id = 10;
    trace.fields = {{"request_id", "42"}};
    trace.root = node("a()", 7, 1, 10ms);
    Node b = node("b()", 11, 2, 6ms, 2ms, 4ms);
    b.throws = 1;
    b.children.push_back(node("c()", 12, 1, 1ms));
    Node d = node("d()", 13, 3, 3ms, 1ms, 1ms);
    d.throws = 3;
    d.dropped = 5;
    trace.root.children.push_back(b);
    trace.root.children.push_back(d);
    CHECK(tracetree::to_string(trace, plain) ==
          "`---ts=1970-01-01 00:00:00.000;thread_name=main;id=10;request_id=42\n"
          "    `---[10.0ms] a()\n"
          "        +---[60.00% min=2.0ms,max=4.0ms,total=6.0ms,count=2] b() #11 [throws Exception]\n"
          "        |   `---[16.67% 1.0ms ] c() #12\n"
          "        `---[30.00% min=1.0ms,max=1.0ms,total=3.0ms,count=3] d() #13 [throws Exception,3]\n"
          "            `---[not recorded: 5 calls past the depth or node limit]\n"
          "\n");
}

TEST_CASE("milliseconds print as Java's Double.toString") {
    using tracetree::detail::java_millis;
    CHECK(java_millis(3000000ns) == "3.0");
    CHECK(java_millis(96584ns) == "0.096584");
    CHECK(java_millis(855ns) == "8.55E-4");
    CHECK(java_millis(1000ns) == "0.001");
    CHECK(java_millis(999ns) == "9.99E-4");
    CHECK(java_millis(100ns) == "1.0E-4");
    CHECK(java_millis(0ns) == "0.0");
    CHECK(java_millis(131650000ns) == "131.65");
    CHECK(java_millis(1ns) == "1.0E-6");
    CHECK(java_millis(Nanos(9999999000000)) == "9999999.0");
    CHECK(java_millis(Nanos(10000000000000)) == "1.0E7");
    CHECK(java_millis(Nanos(12345678900000)) == "1.23456789E7");
    CHECK(java_millis(123456789ns) == "123.456789");
    CHECK(java_millis(Nanos(-2500000)) == "-2.5");
}

TEST_CASE("percentages: of the direct parent, as Java's String.format(\"%.2f\", cost * 100.0 / parent)") {
    using tracetree::detail::percent;
    CHECK(percent(1ns, 8ns) == "12.50");
    CHECK(percent(1ns, 3ns) == "33.33");
    CHECK(percent(2ns, 3ns) == "66.67");
    CHECK(percent(5ns, 100000ns) == "0.01");  // the double is 0.005: half, up
    CHECK(percent(4999ns, 100000000ns) == "0.00");
    CHECK(percent(1ns, 1ns) == "100.00");
    CHECK(percent(0ns, 5ns) == "0.00");
    CHECK(percent(Nanos(INT64_MAX / 2), Nanos(INT64_MAX)) == "50.00");
    CHECK(percent(999999ns, 1000000ns) == "100.00");  // 99.9999: the carry goes through every digit
    // Java rounds the shortest decimal of the double, not the exact ratio: these print one hundredth
    // higher than the exact ratio would, as Arthas prints them.
    CHECK(percent(Nanos(379635701629), Nanos(388592764859)) == "97.70");  // double 97.695, exact 97.69499...
    CHECK(percent(Nanos(538425426676), Nanos(728931735837)) == "73.87");  // double 73.865
    CHECK(percent(Nanos(953357259711760), Nanos(965963077878069)) == "98.69");  // double 98.69499999999998
    // A parent of 0 ns (a fake clock, a hand-built tree): what Java prints.
    CHECK(percent(0ns, 0ns) == "NaN");
    CHECK(percent(5ns, 0ns) == "Infinity");
}

TEST_CASE("a recorded trace renders exactly with a fake clock") {
    FakeClock clock;
    tracetree::TraceRequest request("handle");
    tracetree::TraceSession session(request);
    {
        TRACETREE_SCOPE("handle");
        advance(1ms);
        for (int i = 0; i < 3; ++i) {
            TRACETREE_SCOPE("step");
            advance(std::chrono::milliseconds(i + 1));
        }
    }
    auto trace = session.next(1s);
    REQUIRE(trace.has_value());
    trace->start = std::chrono::system_clock::time_point(std::chrono::seconds(60));
    const auto line = trace->root.children.at(0).line;
    CHECK(tracetree::to_string(*trace, plain) ==
          "`---ts=1970-01-01 00:01:00.000;thread_name=test-main;id=" + [&] {
              char id[16];
              std::snprintf(id, sizeof id, "%x", trace->thread_id);
              return std::string(id);
          }() + "\n"
                "    `---[7.0ms] handle\n"
                "        `---[85.71% min=1.0ms,max=3.0ms,total=6.0ms,count=3] step #" +
              std::to_string(line) + "\n\n");
}

TEST_CASE("a profile renders each thread; folded roots and running scopes") {
    tracetree::Profile profile;
    profile.taken = std::chrono::system_clock::time_point(std::chrono::seconds(0));
    tracetree::ThreadProfile thread;
    thread.thread_name = "worker";
    thread.thread_id = 2;
    thread.exited = true;
    thread.dropped_depth = 4;
    thread.roots.push_back(node("loop()", 5, 4, 8ms, 1ms, 3ms));
    Node running = node("main()", 3, 0, 0ns);
    running.children.push_back(node("step()", 9, 1, 2ms));
    thread.roots.push_back(running);
    profile.threads.push_back(thread);
    CHECK(tracetree::to_string(profile, plain) ==
          "`---ts=1970-01-01 00:00:00.000;thread_name=worker;id=2;exited=true;dropped_depth=4\n"
          "    +---[min=1.0ms,max=3.0ms,total=8.0ms,count=4] loop()\n"
          "    `---[running] main()\n"
          "        `---[2.0ms] step() #9\n"
          "\n");
}

TEST_CASE("human mode aligns columns with units") {
    std::ostringstream out;
    tracetree::render_human(out, tomcat_trace());
    const std::string text = out.str();
    const std::string expected_rows =
        "      total       self   count        min        max  call tree\n"
        "      132ms     39.4ms       1      132ms      132ms  Http11Processor::service()\n"
        "       11\u00b5s       11\u00b5s       1       11\u00b5s       11\u00b5s  +- Http11InputBuffer::parseRequestLine() #212\n"
        "     74.2ms     74.2ms      31      4.5\u00b5s     34.5ms  +- TomcatJarInputStream::getNextJarEntry() #117\n"
        "       18ms       18ms       1       18ms       18ms  `- DispatcherServlet::doDispatch() #350\n"
        "\n";
    CHECK(text.substr(text.find('\n') + 1) == expected_rows);
    CHECK(text.rfind("trace of Http11Processor::service() on http-nio-7744-exec-1 (id 3) at ", 0) == 0);
}
