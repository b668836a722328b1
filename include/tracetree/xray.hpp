// Moved to <tracetree/xray/xray.hpp>; this path forwards to it until tracetree 0.3. SPDX-License-Identifier: MIT
#include "xray/xray.hpp"
