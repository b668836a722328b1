// admin/handler.hpp and admin/server.hpp again, in a second translation unit: of the admin tests
// (declarations only: they link tracetree-runtime), and of admin-header-only (header_only.cpp), where
// the definitions are compiled in both units and one missing `inline` fails to link.
#include <tracetree/admin/handler.hpp>
#include <tracetree/admin/server.hpp>

bool admin_second_tu_handles(const char* target) { return tracetree::AdminHandler().handles(target); }
