// The XRay tests' main: traces patch only the test's traced code beneath them (doctest's own
// functions have sleds too, built with -fxray-instrument like everything here).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <tracetree/xray/xray.hpp>
#include <tracetree/xray.hpp>  // the old path still forwards (tests/old_paths.cpp)

int main(int argc, char** argv) {
    tracetree::xray::set_callees("xtest::*");
    return doctest::Context(argc, argv).run();
}
