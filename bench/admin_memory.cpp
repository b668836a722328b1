// The peak memory of one big admin call (docs/admin.md, "Memory per call"): a trace of n invocations
// of 20,000 nodes each, as text and as JSON, against the body it answers with. The peak is the
// process's resident high-water mark (VmHWM, reset through /proc/self/clear_refs before the call)
// above its resident size just before the call, so the recording's own nodes, made before, do not
// count. Run by hand: tracetree-admin-memory [n] (default 100).
#include <tracetree/admin/handler.hpp>
#include <tracetree/tracetree.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::vector<std::string>& names() {
    static const std::vector<std::string> all = [] {
        std::vector<std::string> out;
        for (int i = 0; i < 20000; ++i) out.push_back("node_" + std::to_string(i));
        return out;
    }();
    return all;
}

void big() {  // one invocation of 20,001 nodes: the root and 20,000 children of distinct names
    TRACETREE_SCOPE("big");
    for (const std::string& name : names()) {
        TRACETREE_SCOPE_DYNAMIC(name);
    }
}

long status_kib(const char* field) {  // a line of /proc/self/status, in KiB
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.compare(0, std::string(field).size(), field) == 0) return std::atol(line.c_str() + std::string(field).size());
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    const int n = argc > 1 ? std::atoi(argv[1]) : 100;
    big();  // the thread's tree and the names exist before anything is measured
    tracetree::AdminHandler handler;
    for (const char* format : {"text", "json"}) {
        std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
        const long before = status_kib("VmRSS:");
        tracetree::AdminRequest request;
        request.method = "GET";
        request.target = "/debug/tracetree/trace?pattern=big&timeout=300&n=" + std::to_string(n) + "&format=" + format;
        request.host = "127.0.0.1";
        request.peer = "127.0.0.1:1";
        tracetree::AdminResponse response;
        std::thread call([&] { response = handler.handle(request); });
        if (handler.wait_for_waiting(1, std::chrono::seconds(60)))
            while (handler.waiting() == 1) big();  // until the call has its n (or max_body cut it)
        call.join();
        if (response.status != 200) {
            std::cerr << response.body;
            return 1;
        }
        const long peak = status_kib("VmHWM:") - before;
        const double body_mib = static_cast<double>(response.body.size()) / (1 << 20);
        std::printf("%-4s n=%d: body %.1f MiB, peak %.1f MiB above the resident size before the call (%.2fx the body)\n", format, n,
                    body_mib, static_cast<double>(peak) / 1024, static_cast<double>(peak) / 1024 / body_mib);
    }
    return 0;
}
