// Stands for the XRay suite in a build that cannot run it (tests/xray/meson.build says why): prints
// the reason and exits with 77, which meson reports as SKIP.
#include <cstdio>

int main() {
    std::printf("skipped: %s\n", TRACETREE_XRAY_SKIPPED);
    return 77;
}
