// The program scripts/consumer-test builds with each command of the README's "Getting started": it
// loads the plugin named on its command line with RTLD_LOCAL, as a host loads plugins, runs the
// plugin's scope and one of its own, and prints what one recorder per process must show: the plugin's
// copy reports the program's recorder, and the program's profile holds the plugin's calls.
#include <tracetree/all.hpp>

#include <dlfcn.h>
#include <iostream>
#include <string>
#include <vector>

namespace {

long long calls(const std::vector<tracetree::Node>& nodes, const std::string& name) {
    long long sum = 0;
    for (const tracetree::Node& node : nodes) {
        if (node.kind == tracetree::NodeKind::call && node.name == name) sum += static_cast<long long>(node.count);
        sum += calls(node.children, name);
    }
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: app PLUGIN\n";
        return 2;
    }
    // The program's recorder starts before the plugin is loaded, as in a host that loads plugins late.
    { TRACETREE_SCOPE("app work"); }
    const tracetree::RecorderInfo info = tracetree::recorder_info();
    void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
        std::cerr << "dlopen: " << dlerror() << '\n';
        return 1;
    }
    using Work = const char* (*)(int);
    const auto work = reinterpret_cast<Work>(dlsym(plugin, "plugin_work"));
    if (work == nullptr) {
        std::cerr << argv[1] << " exports no plugin_work\n";
        return 1;
    }
    const std::string plugin_recorder = work(3);
    const std::vector<tracetree::Node> roots = tracetree::profile().merged().roots;
    std::cout << "version: " << info.version << '\n'
              << "recorder: " << info.module << '\n'
              << "plugin's recorder: " << plugin_recorder << '\n'
              << "exported: " << info.exported << '\n'
              << "app work: " << calls(roots, "app work") << '\n'
              << "plugin work: " << calls(roots, "plugin work") << '\n';
    return 0;
}
