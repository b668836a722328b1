// What a trace of a write path costs with XRay (docs/xray.md): a program of leveldb db_bench's shape
// (bench/db_shape.cpp: a log record with its crc and one write() to a file, then a skip-list insert
// whose comparisons go through a comparator; about 80 XRay function calls per operation, none of
// them annotated) runs its writes untraced, then with a trace of db::DB::Write open (min_cost 1 s:
// every write is captured, none is kept) at the default depth and at depth 64 (the whole write path).
// Besides, one recorded XRay call against one annotated scope, both inside a capture, in the same run.
// Run by hand: build/bench/tracetree-xray-db-bench [--rounds N] [--ops N].
//
// Timings: every kernel runs once per round, in a rotating order; figures are medians over rounds,
// ratios medians of per-round ratios. The sessions are made outside the timed loops (patching costs
// milliseconds on some virtual machines, docs/xray.md).
#include <tracetree/all.hpp>
#include <tracetree/xray/xray.hpp>

#include "db_shape.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <fcntl.h>
#include <unistd.h>

namespace bench {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
volatile std::uint64_t g_sink = 0;

// One call of each kind, the same body; a root calls 64 of them, inside a capture.
[[gnu::noinline, clang::xray_always_instrument]] void xray_call(int x) { g_sink = g_sink + static_cast<std::uint64_t>(x); }
[[gnu::noinline, clang::xray_never_instrument]] void annotated_call(int x) {
    TRACETREE_FUNCTION();
    g_sink = g_sink + static_cast<std::uint64_t>(x);
}
// With sleds (never patched: annotated), so that the trace's depth reaches xray_call through it.
[[gnu::noinline, clang::xray_always_instrument]] void xray_root(int calls) {
    TRACETREE_FUNCTION();
    for (int i = 0; i < calls; ++i) xray_call(i);
}
[[gnu::noinline, clang::xray_never_instrument]] void annotated_root(int calls) {
    TRACETREE_FUNCTION();
    for (int i = 0; i < calls; ++i) annotated_call(i);
}

struct Writes {
    int fd;
    db::DB database;
    db::Random keys{7};
    explicit Writes(int fd_) : fd(fd_), database(fd_) {}
    [[clang::xray_never_instrument]] void run(int ops) {
        char key[17];
        char value[100] = {};
        for (int i = 0; i < ops; ++i) {
            std::snprintf(key, sizeof key, "%016u", keys.Next());
            database.Put(db::Slice{key, 16}, db::Slice{value, 100});
        }
        if (lseek(fd, 0, SEEK_SET) != 0 || ftruncate(fd, 0) != 0) std::abort();  // the log stays small
    }
};

[[clang::xray_never_instrument]] double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace bench

[[clang::xray_never_instrument]] int main(int argc, char** argv) {
    using namespace bench;
    int rounds = 31, ops = 20000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--ops") == 0) ops = std::atoi(argv[i + 1]);
    }
    char path[] = "/tmp/tracetree-xray-db-bench-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return 2;
    unlink(path);
    tracetree::xray::install();
    Writes writes(fd);
    writes.run(ops);  // a memtable of some size before the first timing

    // The calls a write makes, counted by a monitor of everything the write path may call.
    std::uint64_t calls_per_op = 0;
    {
        tracetree::reset();
        tracetree::Monitor monitor(tracetree::MonitorRequest("db::*"));
        writes.run(1000);
        for (const auto& thread : tracetree::profile().threads) {
            const std::function<void(const tracetree::Node&)> add = [&](const tracetree::Node& node) {
                calls_per_op += node.count;
                for (const auto& child : node.children) add(child);
            };
            for (const auto& root : thread.roots) add(root);
        }
        calls_per_op /= 1000;
    }

    struct Kernel {
        const char* name;
        std::function<std::unique_ptr<tracetree::TraceSession>()> session;
        std::function<void()> body;
        std::vector<double> ns;
        std::size_t patched = 0;
    };
    const auto trace_write = [](int depth) {
        return [depth] {
            return std::make_unique<tracetree::TraceSession>(
                tracetree::TraceRequest("db::DB::Write").min_cost(1s).limit(0).depth(depth));
        };
    };
    const auto trace_roots = [] {
        return std::make_unique<tracetree::TraceSession>(tracetree::TraceRequest("bench::*_root").min_cost(1s).limit(0).depth(1));
    };
    const int root_calls = 64, roots = std::max(1, ops / 16);
    std::vector<Kernel> kernels = {
        {"write, untraced", [] { return nullptr; }, [&] { writes.run(ops); }, {}},
        {"write, trace open, default depth", trace_write(tracetree::detail::kDefaultCallDepth), [&] { writes.run(ops); }, {}},
        {"write, trace open, depth 3", trace_write(3), [&] { writes.run(ops); }, {}},
        {"write, trace open, depth 64", trace_write(64), [&] { writes.run(ops); }, {}},
        {"root of 64 XRay calls", trace_roots, [&] { for (int i = 0; i < roots; ++i) xray_root(root_calls); }, {}},
        {"root of 64 annotated scopes", trace_roots, [&] { for (int i = 0; i < roots; ++i) annotated_root(root_calls); }, {}},
        {"root of none (XRay)", trace_roots, [&] { for (int i = 0; i < roots; ++i) xray_root(0); }, {}},
        {"root of none (annotated)", trace_roots, [&] { for (int i = 0; i < roots; ++i) annotated_root(0); }, {}},
    };
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t k = 0; k < kernels.size(); ++k) {
            Kernel& kernel = kernels[(k + static_cast<std::size_t>(round)) % kernels.size()];
            const auto session = kernel.session();
            kernel.patched = tracetree::xray::status().patched;
            const auto start = Clock::now();
            kernel.body();
            const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
            kernel.ns.push_back(ns);
        }
    }
    std::printf("%d rounds; %d writes per round, %llu XRay calls per write\n", rounds, ops,
                static_cast<unsigned long long>(calls_per_op));
    std::vector<double> per_op[4];
    for (int k = 0; k < 4; ++k)
        for (double ns : kernels[static_cast<std::size_t>(k)].ns) per_op[k].push_back(ns / ops);
    for (int k = 0; k < 4; ++k) {
        std::vector<double> ratio;
        for (std::size_t r = 0; r < per_op[k].size(); ++r) ratio.push_back(per_op[k][r] / per_op[0][r]);
        std::printf("%-36s %8.0f ns/op  %5.2fx untraced  (%zu functions patched)\n", kernels[static_cast<std::size_t>(k)].name,
                    median(per_op[k]), median(ratio), kernels[static_cast<std::size_t>(k)].patched);
    }
    std::vector<double> xray_call_ns, annotated_call_ns, call_ratio;
    for (std::size_t r = 0; r < kernels[4].ns.size(); ++r) {
        const double x = (kernels[4].ns[r] - kernels[6].ns[r]) / roots / root_calls;
        const double a = (kernels[5].ns[r] - kernels[7].ns[r]) / roots / root_calls;
        xray_call_ns.push_back(x);
        annotated_call_ns.push_back(a);
        call_ratio.push_back(x / a);
    }
    std::vector<double> capture_ns;
    for (double ns : kernels[7].ns) capture_ns.push_back(ns / roots);
    std::printf("%-36s %8.1f ns\n%-36s %8.1f ns\n%-36s %8.2fx\n%-36s %8.1f ns\n", "a recorded XRay call, in a capture",
                median(xray_call_ns), "an annotated scope, in a capture", median(annotated_call_ns), "XRay / annotated",
                median(call_ratio), "a captured root with nothing below", median(capture_ns));
    close(fd);
    return 0;
}
