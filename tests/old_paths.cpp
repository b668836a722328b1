// Every public header's path before the house moved (issue 37) still compiles, until tracetree 0.3:
// each forwards to the new path (tests/check_includes.py checks that they hold nothing else). The
// old paths of the Beast and cpp-httplib adapters are compiled by tests/admin/adapters, where those
// libraries are, and xray.hpp's by tests/xray, where clang's XRay is.
#include <tracetree/admin.hpp>
#include <tracetree/admin_server.hpp>
#include <tracetree/otlp.hpp>
#include <tracetree/tracecontext.hpp>

int main() {
    tracetree::AdminHandler handler;
    return handler.prefix().empty() ? 1 : 0;
}
