// The server's one copy of the tracetree runtime. Every file of the demo builds with
// TRACETREE_SEPARATE_RUNTIME (examples/demo/meson.build) and compiles declarations only; this file
// compiles the definitions (README, "Use it in your build").
#define TRACETREE_RUNTIME_IMPLEMENTATION
#include <tracetree/control.hpp>
