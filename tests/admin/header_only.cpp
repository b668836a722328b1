// admin-header-only: the handler's and the listener's definitions (admin/handler-inl.hpp,
// admin/server-inl.hpp) header-only, in two translation units of one program (this one and
// second_tu.cpp, as a user without tracetree-runtime compiles them): a definition that is missing
// `inline` or TRACETREE_DETAIL_RUNTIME_API is defined twice, and the link fails. The other admin
// programs link tracetree-runtime and compile the declarations only.
#include <tracetree/admin/handler.hpp>
#include <tracetree/admin/server.hpp>

#include <cstdio>

bool admin_second_tu_handles(const char* target);  // second_tu.cpp

int main() {
    const tracetree::AdminHandler here;
    const bool ok = here.handles("/debug/tracetree/trace") && !here.handles("/elsewhere") &&
                    admin_second_tu_handles("/debug/tracetree/trace") && !admin_second_tu_handles("/elsewhere");
    std::puts(ok ? "ok: both translation units' handlers route /debug/tracetree/ only" : "FAIL: handles()");
    return ok ? 0 : 1;
}
