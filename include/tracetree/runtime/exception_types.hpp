// tracetree: what kind of exception is being thrown, asked in __cxa_throw. SPDX-License-Identifier: MIT
//
// The throw hook sees a thrown object and its type_info before any handler does. Whether it is a
// std::bad_alloc (not recorded: see RuntimeImpl::out_of_memory) or a std::exception (its what() is
// shown) is the question a `catch (const T&)` asks, which the C++ runtime answers through a virtual
// function of its type_info classes. typeid is not used: a file with control code may be built with
// -fno-rtti, so the two type_info objects are named by their Itanium ABI symbols.
#ifndef TRACETREE_RUNTIME_EXCEPTION_TYPES_HPP
#define TRACETREE_RUNTIME_EXCEPTION_TYPES_HPP

#include "../core/abi.hpp"

#include <cstring>   // std::strcmp: the fallback by name
#include <typeinfo>  // std::type_info
#include <cxxabi.h>  // libstdc++: abi::__class_type_info; libc++abi: _LIBCPPABI_VERSION

#if !defined(__GLIBCXX__) && defined(_LIBCPPABI_VERSION)
// The thread's exception globals (the Itanium C++ ABI's __cxa_eh_globals: the caught exceptions,
// then the count in flight), which the recorder reads: libc++abi exports the function and declares
// it only in a private header (cxa_exception.h), as here.
namespace __cxxabiv1 {
struct __cxa_eh_globals;
extern "C" __cxa_eh_globals* __cxa_get_globals();
}  // namespace __cxxabiv1
#endif

TRACETREE_BEGIN_NAMESPACE
namespace detail {

#if defined(__GLIBCXX__)
extern const abi::__si_class_type_info bad_alloc_type_info __asm__("_ZTISt9bad_alloc");
extern const abi::__class_type_info exception_type_info __asm__("_ZTISt9exception");

// Whether a handler of type `handler` catches a `thrown` object at `object`, which becomes the
// address of the handler's subobject.
inline bool catches(const std::type_info& handler, const std::type_info* thrown, void*& object) noexcept {
    return handler.__do_catch(thrown, &object, 1);
}
#elif defined(_LIBCPPABI_VERSION)
extern const std::type_info bad_alloc_type_info __asm__("_ZTISt9bad_alloc");
extern const std::type_info exception_type_info __asm__("_ZTISt9exception");

// libc++abi declares its type_info classes only in a private header (__shim_type_info in
// private_typeinfo.h): after std::type_info's destructor come two placeholders and can_catch, the
// slots of libstdc++'s __is_pointer_p, __is_function_p and __do_catch. Never instantiated; only its
// virtual function table's layout is used. `outer` is not libc++abi's (it ignores a third argument):
// in a process with both runtimes where libstdc++ was loaded first, libstdc++ serves libc++'s
// type_info objects too, and its __do_catch reads it.
class LibcxxabiTypeInfo : public std::type_info {
public:
    ~LibcxxabiTypeInfo() override;
    virtual void noop1() const;
    virtual void noop2() const;
    virtual bool can_catch(const LibcxxabiTypeInfo* thrown, void*& adjusted, unsigned outer) const = 0;
};

__attribute__((no_sanitize("vptr")))  // the objects are libc++abi's classes, not this one
inline bool catches(const std::type_info& handler, const std::type_info* thrown, void*& object) noexcept {
    return static_cast<const LibcxxabiTypeInfo&>(handler).can_catch(static_cast<const LibcxxabiTypeInfo*>(thrown), object, 1);
}
#else
extern const std::type_info bad_alloc_type_info __asm__("_ZTISt9bad_alloc");
extern const std::type_info exception_type_info __asm__("_ZTISt9exception");

// Another C++ runtime (libcxxrt, libsupc++ under libc++): the type itself only, not derived ones.
inline bool catches(const std::type_info& handler, const std::type_info* thrown, void*&) noexcept {
    return std::strcmp(handler.name(), thrown->name()) == 0;
}
#endif

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_EXCEPTION_TYPES_HPP
