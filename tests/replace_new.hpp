// The global operator new and delete (the forms without an alignment), replaced by the including file's
// allocate(size) (null on failure), allocate_or_throw(size) and release(pointer), declared before this
// header is included. Included once per program, in a .cpp: replacements are whole-program.
#ifndef TRACETREE_TESTS_REPLACE_NEW_HPP
#define TRACETREE_TESTS_REPLACE_NEW_HPP

#include <cstddef>
#include <new>

void* operator new(std::size_t size) { return allocate_or_throw(size); }
void* operator new[](std::size_t size) { return allocate_or_throw(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void operator delete(void* pointer) noexcept { release(pointer); }
void operator delete[](void* pointer) noexcept { release(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { release(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { release(pointer); }
void operator delete(void* pointer, const std::nothrow_t&) noexcept { release(pointer); }
void operator delete[](void* pointer, const std::nothrow_t&) noexcept { release(pointer); }

#endif  // TRACETREE_TESTS_REPLACE_NEW_HPP
