// Rendering: Arthas's rules, checked against golden files (tests/golden/, TRACETREE_UPDATE_GOLDEN=1
// rewrites them) and exact strings.
#include "golden.hpp"
#include "support.hpp"

#include <tracetree/admin/handler.hpp>  // the HTML answer's hot line

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <vector>

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
    golden::compare("arthas-trace.txt", tracetree::to_string(tomcat_trace(), plain));
}

static tracetree::Trace throw_trace() {
    tracetree::Trace trace = tomcat_trace();
    trace.root = node("demo::MathGame::run()", 0, 1, 617465ns);
    Node factors = node("demo::MathGame::primeFactors()", 24, 1, 78946ns);
    factors.throws = 1;
    Node thrown;
    thrown.kind = tracetree::NodeKind::thrown;
    thrown.name = "std::invalid_argument";
    thrown.line = 46;
    thrown.count = 1;
    thrown.message = "number is: -151442, need >= 2";
    factors.children.push_back(thrown);
    Node again = thrown;  // folded: the same site and type thrown three times
    again.count = 3;
    again.line = 0;       // thrown without TRACETREE_THROW: no line
    again.name = "Overflow";
    again.message.reset();  // not derived from std::exception: no message part
    Node print = node("demo::MathGame::print()", 25, 1, 80222ns);
    print.children.push_back(again);
    trace.root.children = {factors, print};
    return trace;
}

// Arthas prints the throw itself as a child of the method whose code threw: type, line, message;
// siblings above it get `+---` and `|   `.
TEST_CASE("a thrown and caught exception renders as Arthas's throw line") {
    golden::compare("arthas-throw.txt", tracetree::to_string(throw_trace(), plain));
}

TEST_CASE("values a trace asked for are @name=value lines before the children") {
    tracetree::Trace trace = tomcat_trace();
    Node& jar = trace.root.children[1];
    jar.values = {{"name", "\"META-INF/resources/swagger-ui.html\""}, {"size", "7113"}};
    jar.children.push_back(node("TomcatJarInputStream::createZipEntry()", 46, 1, 2000ns));
    trace.root.children[2].values = {{"path", "\"/send\""}};
    golden::compare("arthas-values.txt", tracetree::to_string(trace, plain));
}

TEST_CASE("stack, watch and monitor render as Arthas prints them") {
    tracetree::StackTrace stack;
    stack.start = tomcat_trace().start;
    stack.thread_name = "http-nio-7744-exec-1";
    stack.thread_id = 26;
    stack.frames = {{"demo::DispatcherServlet::doDispatch()", "/src/demo/tomcat.cpp", 98},
                    {"demo::StandardWrapperValve::invoke()", "/src/demo/tomcat.cpp", 117},
                    {"demo::CoyoteAdapter::service()", "/src/demo/tomcat.cpp", 131},
                    {"demo::Http11Processor::service()", "/src/demo/app.cpp", 0}};
    tracetree::WatchEvent event;
    event.start = stack.start;
    event.scope = "demo::TomcatJarInputStream::createZipEntry()";
    event.cost = 12345ns;
    event.values = {{"name", "\"META-INF/resources/swagger-ui.html\""}};
    tracetree::WatchEvent threw = event;
    threw.threw = true;
    threw.values.clear();
    tracetree::MonitorInterval interval;
    interval.end = stack.start;
    tracetree::MonitorRow service;
    service.name = "demo::Http11Processor::service()";
    service.calls = 5;
    service.failed = 1;
    service.total = 131650000ns;
    service.min = 1200000ns;
    service.max = 120450000ns;
    tracetree::MonitorRow respond = service;
    respond.name = "respond";
    respond.failed = 0;
    interval.rows = {service, respond};
    std::ostringstream out;
    tracetree::render(out, stack, plain);
    tracetree::render(out, event, plain);
    tracetree::render(out, threw, plain);
    tracetree::render(out, interval, plain);
    golden::compare("arthas-stack-watch-monitor.txt", out.str());
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

static std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
    std::vector<std::string> found;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.find(part) != std::string::npos) found.push_back(line);
    return found;
}

TEST_CASE("without colour, to_string marks the costliest node's line with ` <- hot`, and only that line") {
    tracetree::Trace trace = tomcat_trace();
    trace.root.children[1].values = {{"name", "\"x\""}};  // the hot node's values stay unmarked
    const std::string text = tracetree::to_string(trace);
    CHECK(lines_with(text, " <- hot") ==
          std::vector<std::string>{"        +---[56.36% min=0.0045ms,max=34.48ms,total=74.2ms,count=31] "
                                   "TomcatJarInputStream::getNextJarEntry() #117 <- hot"});
    CHECK(text.find('\x1b') == std::string::npos);
    // Asked for explicitly, as the admin text answer does; across a profile's roots as colour is.
    tracetree::ThreadProfile thread;
    thread.roots = {trace.root, node("other()", 3, 1, 1ms)};
    thread.roots[1].children.push_back(node("slow()", 4, 1, 900us));
    const std::string profile = tracetree::to_string(thread, tracetree::RenderOptions().colour(tracetree::Colour::never).hot_marker());
    CHECK(lines_with(profile, " <- hot").size() == 1);
    CHECK(lines_with(profile, "TomcatJarInputStream::getNextJarEntry() #117 <- hot").size() == 1);
}

TEST_CASE("Colour::never without hot_marker, and render to a non-terminal, stay Arthas's text byte for byte") {
    CHECK(tracetree::to_string(tomcat_trace(), plain).find(" <- hot") == std::string::npos);
    std::ostringstream automatic;
    tracetree::render(automatic, tomcat_trace(), tracetree::RenderOptions().utc());
    CHECK(automatic.str() == tracetree::to_string(tomcat_trace(), plain));
    // In colour the red is the marker: no text marker besides it.
    std::ostringstream red;
    tracetree::render(red, tomcat_trace(), tracetree::RenderOptions().colour(tracetree::Colour::always).hot_marker().utc());
    CHECK(red.str().find(" <- hot") == std::string::npos);
    CHECK(red.str().find("\x1b[31m[56.36%") != std::string::npos);
}

TEST_CASE("the admin's HTML answer shows the hot node's line in red, with a title and a legend") {
    const std::string text = "Kept traces:\n" + tracetree::to_string(tomcat_trace()) + "done <- hot\n";
    const std::string page = tracetree::detail::admin::as_page("/tracetree", "trace", text).body;
    const std::vector<std::string> hot = lines_with(page, "class=\"hot\" title=");
    REQUIRE(hot.size() == 1);
    CHECK(hot[0].find("+---<span class=\"hot\" title=\"") == 8);
    CHECK(hot[0].find("TomcatJarInputStream::getNextJarEntry() #117 &lt;- hot</span>") != std::string::npos);
    CHECK(page.find(".hot{") != std::string::npos);          // styled red
    CHECK(page.find("<p class=\"note\"><span class=\"hot\">") != std::string::npos);  // the legend
    CHECK(page.find("done &lt;- hot\n") != std::string::npos);  // not a tree line: not marked
    // No hot line, no legend.
    CHECK(tracetree::detail::admin::as_page("", "t", "plain\n").body.find("class=\"hot\"") == std::string::npos);
}

namespace hot_work {
void outer() {
    TRACETREE_FUNCTION();
    { TRACETREE_SCOPE("hot_work_fast"); advance(1ms); }
    { TRACETREE_SCOPE("hot_work_slow"); advance(5ms); }
}
}  // namespace hot_work

static tracetree::AdminRequest admin_request(const std::string& method, const std::string& target) {
    tracetree::AdminRequest request;
    request.method = method;
    request.target = "/debug/tracetree" + target;
    request.host = "127.0.0.1:7746";
    request.peer = "127.0.0.1:53122";
    return request;
}

TEST_CASE("over HTTP the recorder's and the profile's text mark the hot line, their HTML shows it in red") {
    FakeClock clock;
    tracetree::AdminHandler handler;
    REQUIRE(handler.handle(admin_request("POST", "/recorder/start?pattern=hot_work::outer")).status == 200);
    hot_work::outer();
    for (const std::string target : {"/recorder", "/profile"}) {
        CAPTURE(target);
        const std::string text = handler.handle(admin_request("GET", target)).body;
        const std::vector<std::string> marked = lines_with(text, " <- hot");
        REQUIRE(marked.size() == 1);
        CHECK(marked[0].find("] hot_work_slow #") != std::string::npos);
        const std::string page = handler.handle(admin_request("GET", target + "?format=html")).body;
        const std::vector<std::string> red = lines_with(page, "<span class=\"hot\" title=");
        REQUIRE(red.size() == 1);
        CHECK(red[0].find("] hot_work_slow #") != std::string::npos);
    }
    CHECK(handler.handle(admin_request("POST", "/recorder/stop")).status == 200);
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
    golden::compare("arthas-nested.txt", tracetree::to_string(trace, plain));
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
          "`---ts=1970-01-01 00:01:00.000;thread_name=test-main;id=" + std::to_string(trace->thread_id) + "\n"
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
    golden::compare("arthas-profile.txt", tracetree::to_string(profile, plain));
}

TEST_CASE("human mode aligns columns with units") {
    std::ostringstream out;
    tracetree::render_human(out, tomcat_trace());
    const std::string text = out.str();
    golden::compare("human-trace.txt", text.substr(text.find('\n') + 1));
    CHECK(text.rfind("trace of Http11Processor::service() on http-nio-7744-exec-1 (id 3) at ", 0) == 0);
}

// A throw's row has only a count: under `count`, its tree under `call tree` like every other row's.
TEST_CASE("human mode puts a throw's count under count") {
    std::ostringstream out;
    tracetree::render_human(out, throw_trace());
    const std::string text = out.str();
    golden::compare("human-throw.txt", text.substr(text.find('\n') + 1));
    std::istringstream lines(text);
    std::string title, header, line;
    std::getline(lines, title);
    std::getline(lines, header);
    const std::size_t count_end = header.find("count") + 5, tree = header.find("call tree");
    std::vector<std::string> trees;
    while (std::getline(lines, line)) {
        if (line.find("throw:") == std::string::npos) continue;
        INFO(header << "\n" << line);
        CHECK(line.find_first_not_of(' ') + 1 == count_end);  // the count's last digit ends `count`
        CHECK(line.find_first_not_of(' ', count_end) >= tree);  // nothing under min and max
        trees.push_back(line.substr(std::min(tree, line.size())));
    }
    CHECK(trees == std::vector<std::string>{"|  `- throw:std::invalid_argument #46 [number is: -151442, need >= 2]",
                                            "   `- throw:Overflow"});
}

// A call merged with a hand-off's path: its total holds the work continued under it, which the line
// says; min and max (shown for folded calls) are its own calls'. A path's own node says nothing more.
TEST_CASE("a call merged with a hand-off's path notes the time continued under it") {
    tracetree::ThreadProfile merged;
    merged.thread_name = "all threads";
    merged.roots.push_back(node("server", 0, 1, 60ms));
    merged.roots[0].continued_total = 59ms;
    Node serve = node("serve()", 7, 20, 56ms, 49us, 52us);
    serve.continued_total = 55ms;
    merged.roots[0].children.push_back(serve);
    Node path = node("origin", 0, 0, 5ms);
    path.continued = true;
    path.continued_total = 5ms;  // not a call: already `[continued]`
    merged.roots.push_back(path);
    const std::string text = tracetree::to_string(merged, plain);
    CHECK(text.substr(text.find('\n') + 1) ==
          "    +---[60.0ms] server [total includes 59.0ms continued under it]\n"
          "    |   `---[93.33% min=0.049ms,max=0.052ms,total=56.0ms,count=20] serve() #7 [total includes 55.0ms "
          "continued under it; min,max: its own calls]\n"
          "    `---[continued] origin\n\n");
    std::ostringstream human;
    tracetree::render_human(human, merged);
    CHECK(human.str().find("`- serve() #7  (total includes 55ms continued under it; min, max: its own calls)\n") !=
          std::string::npos);
    CHECK(human.str().find("origin  (continued)\n") != std::string::npos);
}
