// demo-server-xray: the demo with its Tomcat replica traced through clang's XRay (docs/xray.md).
// tomcat.cpp, zip.cpp and fatjar.cpp are built without tracetree macros and with -fxray-instrument;
// this file, the only one that knows about XRay, installs the handler before main (nothing is patched
// until a session asks) and says on stdout what is patched each time the set of sessions changes,
// which scripts/demo --xray shows.
#include <tracetree/control.hpp>
#include <tracetree/xray/xray.hpp>

#include <cstdio>
#include <exception>

namespace {

void report(void*) noexcept {
    const tracetree::xray::Status status = tracetree::xray::status();
    std::printf("xray: %zu of %zu functions patched (%zu draining)%s%s\n", status.patched, status.patchable,
                status.draining, status.error.empty() ? "" : "; error: ", status.error.c_str());
    std::fflush(stdout);
}

// After tracetree/xray/xray.hpp's own listener, which it follows in this file: it reports what that one did.
const bool g_reporting = [] {
    try {
        tracetree::xray::install();
        // Beneath a trace, Tomcat's classes: what the annotated build annotates (and Arthas, tracing a
        // class, shows), not every ZIP helper, constructor and destructor they call.
        tracetree::xray::set_callees("(Mapper|StandardRoot|Cache|JarWarResourceSet|TomcatJarInputStream)::\\w+",
                                     tracetree::PatternSyntax::regex);
        tracetree::detail::listen_to_sessions(&report, nullptr);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "demo-server-xray: %s\n", e.what());
    }
    report(nullptr);
    return true;
}();

}  // namespace
