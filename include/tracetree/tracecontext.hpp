// Moved to <tracetree/otel/tracecontext.hpp>; this path forwards to it until tracetree 0.3. SPDX-License-Identifier: MIT
#include "otel/tracecontext.hpp"
