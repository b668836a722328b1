// Moved to <tracetree/otel/otlp.hpp>; this path forwards to it until tracetree 0.3. SPDX-License-Identifier: MIT
#include "otel/otlp.hpp"
