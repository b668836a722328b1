// doctest's main for each stress binary. Each stress area is its own process: tracetree's state is
// process-wide (limits, exited threads, sessions), and one area's settings must not leak into another.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
