// admin/handler.hpp and admin/server.hpp again, in a second translation unit of the admin tests: a
// definition missing `inline` fails to link.
#include <tracetree/admin/handler.hpp>
#include <tracetree/admin/server.hpp>

bool admin_second_tu_handles(const char* target) { return tracetree::AdminHandler().handles(target); }
