// A program that uses an installed (or vendored) tracetree the way a user's would: it traces a
// small call tree on demand and prints it. scripts/consumer-test checks the printed tree.
#include <tracetree/all.hpp>

#include <chrono>
#include <iostream>

namespace consumer {

int leaf(int i) {
    TRACETREE_FUNCTION();
    return i * 2;
}

int work() {
    TRACETREE_FUNCTION();
    int sum = 0;
    for (int i = 0; i < 3; ++i) {
        TRACETREE_SCOPE("step");
        sum += leaf(i);
    }
    return sum;
}

}  // namespace consumer

int main() {
    tracetree::TraceRequest request("work");
    request.limit(1);
    tracetree::TraceSession session(request);
    const int result = consumer::work();
    const auto traces = session.collect(std::chrono::seconds(10));
    if (result != 6 || traces.size() != 1) {  // the capture is synchronous: one trace or a bug
        std::cerr << "expected one trace, got " << traces.size() << '\n';
        return 1;
    }
    std::cout << "consumer: cmake\n"
              << "version: " << TRACETREE_VERSION_MAJOR << '.' << TRACETREE_VERSION_MINOR << '.'
              << TRACETREE_VERSION_PATCH << '\n';
    tracetree::render(std::cout, traces.front(), tracetree::RenderOptions().colour(tracetree::Colour::never));
    return 0;
}
