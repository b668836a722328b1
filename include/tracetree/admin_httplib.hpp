// Moved to <tracetree/admin/httplib.hpp>; this path forwards to it until tracetree 0.3. SPDX-License-Identifier: MIT
#include "admin/httplib.hpp"
