// Case annotated-not-linux: an annotated-only file (tracetree.hpp, no control code) built as for a
// system that is not Linux (__linux__ undefined): it compiles, links and runs its scopes, recording
// nothing (the recorder needs Linux; control.hpp would stop with an #error).
#include <tracetree/tracetree.hpp>

#include <cstdio>

static int work(int n) {
    TRACETREE_FUNCTION();
    int sum = 0;
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE("step");
        sum += i;
    }
    return sum;
}

int main() {
    if (work(10) != 45) {
        std::printf("FAIL: the annotated code computed the wrong sum\n");
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
