// Writes every view of the test samples into a directory, for the checks that need a real parser
// (check_outputs.py: Python's json and XML parsers) or a real browser (check_browser.py).
#include <tracetree/all.hpp>

#include "samples.hpp"

#include <fstream>
#include <iostream>

namespace {

std::string dir;

std::ofstream open(const std::string& name) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    if (!out) throw std::runtime_error("cannot write " + dir + "/" + name);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: views-dump DIRECTORY\n";
        return 2;
    }
    dir = argv[1];
    try {
        const tracetree::Profile hostile = samples::hostile_profile();
        tracetree::Trace hostile_trace;
        hostile_trace.thread_name = hostile.threads[0].thread_name;
        hostile_trace.fields = {{"k\"\n", "v\\\x01"}};
        hostile_trace.root = hostile.threads[0].roots[0];

        {
            std::ofstream names = open("names.hex");  // the raw names, one per line, as hex
            for (const std::string& name : samples::hostile_names()) {
                for (char c : name) {
                    const auto u = static_cast<unsigned char>(c);
                    names << "0123456789abcdef"[u >> 4] << "0123456789abcdef"[u & 15];
                }
                names << '\n';
            }
        }
        {
            auto out = open("hostile-profile.json");
            tracetree::write_json(out, hostile);
        }
        {
            auto out = open("hostile-trace.json");
            tracetree::write_json(out, hostile_trace);
        }
        {
            auto out = open("hostile.folded");
            tracetree::write_folded(out, hostile, {tracetree::FoldedValue::count, true});
        }
        {
            auto out = open("hostile.svg");
            tracetree::FlameGraphOptions options;
            options.thread_frames = true;
            options.title = samples::hostile_names()[8];
            tracetree::write_flamegraph_svg(out, hostile, options);
        }
        {
            auto out = open("hostile-diff.svg");
            tracetree::write_diff_flamegraph_svg(out, hostile, tracetree::Profile{}, {});
        }
        {
            auto out = open("hostile.chrome.json");
            tracetree::Timeline timeline;
            tracetree::ThreadTimeline thread;
            thread.thread_name = hostile.threads[0].thread_name;
            thread.thread_id = 7;
            thread.dropped = 3;
            std::int64_t at = 0;
            for (const std::string& name : samples::hostile_names()) {
                tracetree::Span span;
                span.name = name;
                span.file = name;
                span.start = tracetree::Nanos(at += 1000);
                span.duration = tracetree::Nanos(500);
                thread.spans.push_back(span);
            }
            timeline.threads.push_back(thread);
            tracetree::write_chrome_trace(out, timeline);
        }
        {
            auto out = open("buggy.svg");
            tracetree::write_flamegraph_svg(out, samples::buggy_request());
        }
        {
            auto out = open("buggy-fixed.diff.svg");
            tracetree::write_diff_flamegraph_svg(out, samples::buggy_request(), samples::fixed_request());
        }
    } catch (const std::exception& e) {
        std::cerr << "views-dump: " << e.what() << '\n';
        return 1;
    }
    return 0;
}
