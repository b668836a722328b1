#include <tracetree/all.hpp>  // annotated files need only <tracetree/tracetree.hpp>

#include <iostream>

void parse(int i) { TRACETREE_FUNCTION(); volatile int x = i * i; (void)x; }

void handle(int items) {
    TRACETREE_FUNCTION();
    for (int i = 0; i < items; ++i) parse(i);
    TRACETREE_SCOPE("respond");
}

int main() {
    tracetree::TraceSession trace(tracetree::TraceRequest("handle"));
    handle(3);
    for (const auto& t : trace.collect(std::chrono::seconds(1))) tracetree::render(std::cout, t);
}
