// Case on-trace-throw: an exception thrown by an on_trace callback, which tracetree catches itself,
// is not the program's throw: no throw node under `outer` (today: throw:std::runtime_error there).
#include "probe.hpp"

#include <cstdio>

int main() {
    const long long throws = probe_on_trace_throw();
    if (throws != 0) {
        if (throws < 0) std::printf("FAIL: the callback did not run once\n");
        else std::printf("FAIL: %lld throw node count(s) in the profile, wanted none\n", throws);
        probe_dump();
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
