// Moved to <tracetree/admin/server.hpp>; this path forwards to it until tracetree 0.3. SPDX-License-Identifier: MIT
#include "admin/server.hpp"
