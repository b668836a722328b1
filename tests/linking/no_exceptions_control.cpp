// Case no-exceptions: compiled with -fno-exceptions, the control header must stop with an #error
// that names the cause (today: the compiler's own errors deep inside matcher.hpp).
#include <tracetree/control.hpp>
