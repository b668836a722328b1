// The program's own strong __cxa_throw (as a crash reporter or an exception logger defines), which
// forwards to the C++ runtime's. tracetree's hook cannot run in this program, and must say so.
#include <dlfcn.h>
#include <typeinfo>

extern "C" [[noreturn]] void __cxa_throw(void* object, std::type_info* type, void (*destroy)(void*)) {
    using Throw = void (*)(void*, std::type_info*, void (*)(void*));
    static const Throw real = reinterpret_cast<Throw>(dlsym(RTLD_NEXT, "__cxa_throw"));
    real(object, type, destroy);
    __builtin_unreachable();
}
