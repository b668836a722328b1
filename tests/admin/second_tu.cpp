// admin.hpp and admin_server.hpp again, in a second translation unit of the admin tests: a
// definition missing `inline` fails to link.
#include <tracetree/admin.hpp>
#include <tracetree/admin_server.hpp>

bool admin_second_tu_handles(const char* target) { return tracetree::AdminHandler().handles(target); }
