// Every view of <tracetree/views.hpp>, written to files: a request handler with a slow class lookup
// (it rescans a jar on every miss, as in Tomcat's bug 62968), profiled before and after the fix.
//
//   views-example OUT-DIR
//
// writes profile.folded, profile.svg, trace.svg, timeline.json (open it in https://ui.perfetto.dev or
// chrome://tracing), profile.json, trace.json, diff.txt and diff.svg. A fake clock stands in for the
// work, so the run is instant and its numbers are the same every time.
#include <tracetree/all.hpp>

#include <atomic>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

std::atomic<std::uint64_t> g_now{0};
std::uint64_t fake_clock() noexcept { return g_now.load(); }
void spend(std::uint64_t microseconds) { g_now += microseconds * 1000; }

bool g_fixed = false;  // after the fix, classes come from an index of the jar built at start-up

}  // namespace

namespace tomcat {

struct TomcatJarInputStream {
    bool getNextJarEntry() {
        TRACETREE_FUNCTION();
        spend(2250);
        return true;
    }
};

struct WebappClassLoader {
    void loadClass(int index) {
        TRACETREE_FUNCTION();
        spend(15);
        if (g_fixed) return;
        TomcatJarInputStream jar;
        for (int entry = 0; entry < (index == 0 ? 3 : 1); ++entry) jar.getNextJarEntry();
    }
};

struct UserRepository {
    void findAll() {
        TRACETREE_FUNCTION();
        spend(38250);
    }
};

struct UserController {
    void list(WebappClassLoader& loader) {
        TRACETREE_FUNCTION();
        UserRepository().findAll();
        {
            TRACETREE_SCOPE("render JSON");
            spend(4900);
        }
        for (int i = 0; i < 31; ++i) loader.loadClass(i);
    }
};

struct Http11Processor {
    void service() {
        TRACETREE_FUNCTION();
        spend(600);
        WebappClassLoader loader;
        UserController().list(loader);
    }
};

}  // namespace tomcat

namespace {

void serve(int requests) {
    for (int i = 0; i < requests; ++i) tomcat::Http11Processor().service();
}

// Each view goes to a file; a failed write ends the program with a message.
template <class Write>
void write_file(const std::string& path, Write&& write) {
    std::ofstream out(path, std::ios::binary);
    write(out);
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
    std::cout << "wrote " << path << '\n';
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: views-example OUT-DIR\n";
        return 2;
    }
    const std::string dir = argv[1];
    try {
        tracetree::set_clock(fake_clock);
        tracetree::set_thread_name("http-nio-8080-exec-1");

        // Before the fix: a timeline of two requests, one captured trace, a profile of five requests.
        // The timeline keeps 100 spans of the 136: the Chrome trace marks the 36 dropped at its end.
        tracetree::start_timeline(100);
        tracetree::TraceSession session(tracetree::TraceRequest("Http11Processor::service"));
        serve(2);
        const tracetree::Timeline timeline = tracetree::timeline();
        tracetree::stop_timeline();
        const std::vector<tracetree::Trace> traces = session.collect(tracetree::Nanos(0));
        if (traces.empty()) throw std::runtime_error("no trace captured");
        serve(3);
        const tracetree::Profile before = tracetree::profile();

        write_file(dir + "/profile.folded", [&](std::ostream& out) { tracetree::write_folded(out, before); });
        write_file(dir + "/profile.svg", [&](std::ostream& out) {
            tracetree::FlameGraphOptions options;
            options.title = "Five requests, before the fix";
            tracetree::write_flamegraph_svg(out, before, options);
        });
        write_file(dir + "/trace.svg", [&](std::ostream& out) {
            tracetree::FlameGraphOptions options;
            options.icicle = true;
            tracetree::write_flamegraph_svg(out, traces.front(), options);
        });
        write_file(dir + "/timeline.json", [&](std::ostream& out) { tracetree::write_chrome_trace(out, timeline); });
        write_file(dir + "/trace.json", [&](std::ostream& out) { tracetree::write_json(out, traces.front()); });
        write_file(dir + "/profile.json", [&](std::ostream& out) { tracetree::write_json(out, before); });

        // After the fix, compared with the saved profile as a later session would load it.
        tracetree::reset();
        g_fixed = true;
        serve(5);
        const tracetree::Profile after = tracetree::profile();
        const tracetree::Profile saved = tracetree::read_profile_json(slurp(dir + "/profile.json"));
        write_file(dir + "/diff.txt", [&](std::ostream& out) { tracetree::render_diff(out, saved, after); });
        write_file(dir + "/diff.svg", [&](std::ostream& out) {
            tracetree::FlameGraphOptions options;
            options.title = "Five requests: before -> after the fix";
            tracetree::write_diff_flamegraph_svg(out, saved, after, options);
        });
        std::cout << '\n';
        tracetree::render_diff(std::cout, saved, after);
    } catch (const std::exception& e) {
        std::cerr << "views-example: " << e.what() << '\n';
        return 1;
    }
    return 0;
}
