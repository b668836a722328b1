// Case no-exceptions: an annotated-only file compiled with -fno-exceptions, linked with a normal
// control copy (probe): its scopes are recorded.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>

static void annotated(int n) {
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE("no exceptions scope");
    }
}

int main() {
    annotated(5);
    const long long calls = probe_count("no exceptions scope");
    if (calls != 5) {
        std::printf("FAIL: %lld calls of the -fno-exceptions file's scope, wanted 5\n", calls);
        probe_dump();
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
