// Moved to <tracetree/admin/handler.hpp>; this path forwards to it until tracetree 0.3. SPDX-License-Identifier: MIT
#include "admin/handler.hpp"
