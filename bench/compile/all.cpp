// For reference: the whole library, as the one file that controls tracing includes it.
#include <tracetree/all.hpp>
