// demo-views OUT-DIR: the demo server's hotspot (examples/demo, Tomcat BZ 62968) in every view. It runs
// the buggy server and then the fixed one in this process, traces the first /send on each (the call
// that rescans the nested jars), and writes:
//   demo-buggy.svg, demo-buggy.folded, demo-buggy.json, demo-fixed.json  the traces
//   demo-diff.txt, demo-diff.svg                                         what the fix removed
//   demo-timeline.json                     every thread during the buggy call, for Perfetto UI
// docs/images/*.png are these SVGs rendered by scripts/render-svg (docs/views.md says how).
#include "app.hpp"
#include "net.hpp"

#include <tracetree/all.hpp>

#include <fstream>
#include <iostream>

namespace {

tracetree::Trace first_send(demo::Mode mode, tracetree::Timeline* timeline) {
    demo::Options options;
    options.mode = mode;
    options.port = options.channel_port = options.admin_port = 0;
    options.gc_period = demo::Millis(0);
    demo::DemoServer server(options);
    server.start();
    tracetree::TraceSession session(tracetree::TraceRequest("Http11Processor::service"));
    if (timeline != nullptr) tracetree::start_timeline();
    const int status = demo::net::request(options.host, server.port(), "GET", "/send").status;
    std::vector<tracetree::Trace> traces = session.collect(std::chrono::seconds(30));
    if (timeline != nullptr) {
        *timeline = tracetree::timeline();
        tracetree::stop_timeline();
    }
    server.stop();
    if (status != 200) throw std::runtime_error("/send answered " + std::to_string(status));
    if (traces.empty()) throw std::runtime_error("no trace of Http11Processor::service");
    return std::move(traces.front());
}

template <class Write>
void write_file(const std::string& path, Write&& write) {
    std::ofstream out(path, std::ios::binary);
    write(out);
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
    std::cout << "wrote " << path << '\n';
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: demo-views OUT-DIR\n";
        return 2;
    }
    const std::string dir = argv[1];
    try {
        tracetree::Timeline timeline;
        const tracetree::Trace buggy = first_send(demo::Mode::buggy, &timeline);
        const tracetree::Trace fixed = first_send(demo::Mode::fixed, nullptr);

        write_file(dir + "/demo-buggy.svg", [&](std::ostream& out) {
            tracetree::FlameGraphOptions options;
            options.title = "First /send on the buggy server (Tomcat 8.5.31)";
            tracetree::write_flamegraph_svg(out, buggy, options);
        });
        write_file(dir + "/demo-buggy.folded", [&](std::ostream& out) { tracetree::write_folded(out, buggy); });
        write_file(dir + "/demo-buggy.json", [&](std::ostream& out) { tracetree::write_json(out, buggy); });
        write_file(dir + "/demo-fixed.json", [&](std::ostream& out) { tracetree::write_json(out, fixed); });
        write_file(dir + "/demo-diff.txt", [&](std::ostream& out) { tracetree::render_diff(out, buggy, fixed); });
        write_file(dir + "/demo-diff.svg", [&](std::ostream& out) {
            tracetree::FlameGraphOptions options;
            options.title = "First /send: buggy -> fixed (BZ 62968)";
            tracetree::write_diff_flamegraph_svg(out, buggy, fixed, options);
        });
        write_file(dir + "/demo-timeline.json", [&](std::ostream& out) { tracetree::write_chrome_trace(out, timeline); });
        std::cout << '\n';
        tracetree::render_diff(std::cout, buggy, fixed);
    } catch (const std::exception& e) {
        std::cerr << "demo-views: " << e.what() << '\n';
        return 1;
    }
    return 0;
}
