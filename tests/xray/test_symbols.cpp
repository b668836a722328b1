// The executable's symbol table as tracetree/xray/xray.hpp reads it (runtime/symbols.hpp): names of
// functions by address, the functions annotated with TRACETREE_FUNCTION(), and damaged files, which
// give an error and never a read past their end; the function table stack and the admin read; the
// direct calls read from code and what a depth reaches (xray/calls.hpp). Needs no XRay: built by every compiler, and under
// the sanitizers, which watch the reads.
#include <tracetree/all.hpp>
#include <tracetree/xray/calls.hpp>
#include <tracetree/runtime/symbols.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <elf.h>
#include <unistd.h>

using tracetree::detail::executable_bias;
using tracetree::detail::function_symbols;

namespace symbols_test {
[[gnu::noinline]] int plain(int value) { return value + 1; }
[[gnu::noinline]] int annotated_function(int value) {
    TRACETREE_FUNCTION();
    return value + 2;
}
[[gnu::noinline]] int annotated_scope_only(int value) {
    TRACETREE_SCOPE("a part");
    return value + 3;
}
struct Widget {
    [[gnu::noinline]] int size() const { return 4; }
};
}  // namespace symbols_test

namespace {

std::uintptr_t address_of(int (*function)(int)) { return reinterpret_cast<std::uintptr_t>(function); }

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;  // in bulk: a character at a time takes seconds at -O0 under ASan
    bytes << in.rdbuf();
    return bytes.str();
}

// A file of its own for one test, removed at the end.
struct TempFile {
    explicit TempFile(const std::string& bytes) {
        const char* base = std::getenv("TMPDIR");
        path = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/tracetree-symbols-XXXXXX";
        const int fd = mkstemp(path.data());
        if (fd < 0) throw std::runtime_error("cannot make " + path);
        close(fd);
        std::ofstream(path, std::ios::binary) << bytes;
    }
    ~TempFile() { std::remove(path.c_str()); }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    std::string path;
};

template <class T>
T read_at(const std::string& bytes, std::size_t offset) {
    T value{};
    REQUIRE(offset + sizeof(T) <= bytes.size());
    std::memcpy(&value, bytes.data() + offset, sizeof(T));
    return value;
}
template <class T>
void write_at(std::string& bytes, std::size_t offset, const T& value) {
    REQUIRE(offset + sizeof(T) <= bytes.size());
    std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// The offset of the section header of the first section of `type` in an ELF image.
std::size_t section_header(const std::string& image, std::uint32_t type) {
    const auto header = read_at<Elf64_Ehdr>(image, 0);
    for (std::size_t i = 0; i < header.e_shnum; ++i) {
        const std::size_t at = header.e_shoff + i * sizeof(Elf64_Shdr);
        if (read_at<Elf64_Shdr>(image, at).sh_type == type) return at;
    }
    throw std::runtime_error("no such section");
}

}  // namespace

TEST_CASE("the executable's own symbols name its functions, demangled") {
    const std::vector<std::uintptr_t> addresses = {
        address_of(&symbols_test::plain), address_of(&symbols_test::annotated_function),
        address_of(&symbols_test::annotated_scope_only), reinterpret_cast<std::uintptr_t>(&read_file),
        address_of(&symbols_test::plain) + 1};  // inside a function: no symbol starts there
    const auto symbols = function_symbols("/proc/self/exe", executable_bias(), addresses);
    CHECK(symbols.error.empty());
    REQUIRE(symbols.names.size() == 5);
    CHECK(symbols.names[0] == "symbols_test::plain(int)");
    CHECK(symbols.names[1] == "symbols_test::annotated_function(int)");
    CHECK(symbols.names[2] == "symbols_test::annotated_scope_only(int)");
    CHECK(symbols.names[3] == "(anonymous namespace)::read_file(std::__cxx11::basic_string<char, std::char_traits<char>, "
                              "std::allocator<char> > const&)");
    CHECK(symbols.names[4].empty());
    // TRACETREE_FUNCTION() leaves a static Site named after its function; a named scope does not
    // name the function, so XRay may still patch that one.
    CHECK(symbols.annotated == std::vector<bool>{false, true, false, false, false});
    CHECK(tracetree::detail::function_name(symbols.names[0].c_str()) == "symbols_test::plain");
    CHECK(symbols_test::annotated_function(1) + symbols_test::annotated_scope_only(1) == 7);
}

TEST_CASE("a member function's name") {
    int (symbols_test::Widget::*size)() const = &symbols_test::Widget::size;
    CHECK(symbols_test::Widget().size() == 4);
    std::uintptr_t address = 0;
    std::memcpy(&address, &size, sizeof address);  // the Itanium ABI: a non-virtual member's address first
    const auto symbols = function_symbols("/proc/self/exe", executable_bias(), {address});
    CHECK(symbols.names.at(0) == "symbols_test::Widget::size() const");
}

TEST_CASE("files that are not a whole ELF image give an error and the names they could read") {
    const std::vector<std::uintptr_t> one = {address_of(&symbols_test::plain)};
    const std::string image = read_file("/proc/self/exe");
    REQUIRE(image.size() > sizeof(Elf64_Ehdr));

    SUBCASE("no such file") {
        const auto symbols = function_symbols("/nonexistent/tracetree", 0, one);
        CHECK(symbols.error == "cannot read /nonexistent/tracetree");
        CHECK(symbols.names == std::vector<std::string>{""});
    }
    SUBCASE("an empty file") {
        const TempFile file("");
        CHECK(function_symbols(file.path.c_str(), 0, one).error == "cannot read " + file.path);
    }
    SUBCASE("not ELF") {
        const TempFile file(std::string(4096, 'x'));
        CHECK(function_symbols(file.path.c_str(), 0, one).error == file.path + " is not a 64-bit ELF file");
    }
    SUBCASE("cut after the ELF header") {
        const TempFile file(image.substr(0, sizeof(Elf64_Ehdr)));
        CHECK(function_symbols(file.path.c_str(), executable_bias(), one).error ==
              file.path + ": section headers past the end of the file");
    }
    SUBCASE("section headers pointing past the end") {
        std::string damaged = image;
        auto header = read_at<Elf64_Ehdr>(damaged, 0);
        header.e_shoff = ~std::uint64_t{0} - 8;
        write_at(damaged, 0, header);
        const TempFile file(damaged);
        CHECK(function_symbols(file.path.c_str(), executable_bias(), one).error ==
              file.path + ": section headers past the end of the file");
    }
    SUBCASE("a symbol table pointing past the end") {
        std::string damaged = image;
        const std::size_t at = section_header(damaged, SHT_SYMTAB);
        auto symtab = read_at<Elf64_Shdr>(damaged, at);
        symtab.sh_offset = damaged.size() - 100;
        write_at(damaged, at, symtab);
        const TempFile file(damaged);
        const auto symbols = function_symbols(file.path.c_str(), executable_bias(), one);
        CHECK(symbols.error == file.path + ": symbol table past the end of the file");
    }
    SUBCASE("a string table pointing past the end: no names, no reads out of it") {
        std::string damaged = image;
        const auto symtab = read_at<Elf64_Shdr>(damaged, section_header(damaged, SHT_SYMTAB));
        const auto header = read_at<Elf64_Ehdr>(damaged, 0);
        const std::size_t at = header.e_shoff + symtab.sh_link * sizeof(Elf64_Shdr);
        auto strings = read_at<Elf64_Shdr>(damaged, at);
        strings.sh_size = ~std::uint64_t{0};
        write_at(damaged, at, strings);
        const TempFile file(damaged);
        CHECK(function_symbols(file.path.c_str(), executable_bias(), one).names == std::vector<std::string>{""});
    }
    SUBCASE("stripped: no symbol table of either kind") {
        std::string damaged = image;
        for (const std::uint32_t type : {std::uint32_t{SHT_SYMTAB}, std::uint32_t{SHT_DYNSYM}}) {
            const std::size_t at = section_header(damaged, type);
            auto section = read_at<Elf64_Shdr>(damaged, at);
            section.sh_type = SHT_PROGBITS;
            write_at(damaged, at, section);
        }
        const TempFile file(damaged);
        CHECK(function_symbols(file.path.c_str(), executable_bias(), one).error ==
              file.path + " has no symbol table (stripped?)");
    }
    SUBCASE("only the exported symbols (.dynsym): the others have no name") {
        std::string damaged = image;
        const std::size_t at = section_header(damaged, SHT_SYMTAB);
        auto section = read_at<Elf64_Shdr>(damaged, at);
        section.sh_type = SHT_PROGBITS;
        write_at(damaged, at, section);
        const TempFile file(damaged);
        const auto symbols = function_symbols(file.path.c_str(), executable_bias(), one);
        CHECK(symbols.error.empty());
        CHECK(symbols.names == std::vector<std::string>{""});
    }
}

TEST_CASE("the function table: every function by address, and the texts of annotated scopes") {
    const tracetree::detail::FunctionTable table = tracetree::detail::function_table("/proc/self/exe", executable_bias());
    CHECK(table.error.empty());
    const auto address = reinterpret_cast<std::uintptr_t>(&symbols_test::plain);
    const tracetree::detail::FunctionTable::Entry* found = table.find(address);
    REQUIRE(found != nullptr);
    CHECK(found->name == "symbols_test::plain(int)");
    REQUIRE(found->size > 0);
    CHECK(table.find(address + found->size - 1) == found);  // its last byte
    CHECK(table.find(address + found->size) != found);
    CHECK(std::find(table.scope_texts.begin(), table.scope_texts.end(), "a part") != table.scope_texts.end());
    CHECK(tracetree::detail::function_table("/nonexistent", 0).error == "cannot read /nonexistent as a 64-bit ELF file");
}

TEST_CASE("direct calls read from code: call and jmp rel32 landing on a function's first byte") {
#if defined(__x86_64__)
    using tracetree::detail::direct_calls;
    // Functions at 0x1000 (id 1), 0x2000 (id 2), 0x3000 (id 3); the code below sits at 0x1000.
    const std::vector<std::pair<std::uintptr_t, std::int32_t>> starts = {{0x1000, 1}, {0x2000, 2}, {0x3000, 3}};
    const auto rel = [](std::uintptr_t from_end, std::uintptr_t to) {
        const auto offset = static_cast<std::int32_t>(static_cast<std::intptr_t>(to) - static_cast<std::intptr_t>(from_end));
        std::vector<unsigned char> bytes(4);
        std::memcpy(bytes.data(), &offset, 4);
        return bytes;
    };
    std::vector<unsigned char> code = {0x90};                  // nop
    code.push_back(0xE8);                                      // call 0x2000, at 0x1001
    for (unsigned char b : rel(0x1006, 0x2000)) code.push_back(b);
    code.push_back(0xE8);                                      // call 0x2004: not a function's start
    for (unsigned char b : rel(0x100B, 0x2004)) code.push_back(b);
    code.push_back(0xE8);                                      // call 0x1000: itself
    for (unsigned char b : rel(0x1010, 0x1000)) code.push_back(b);
    code.push_back(0xE9);                                      // jmp 0x3000: a tail call
    for (unsigned char b : rel(0x1015, 0x3000)) code.push_back(b);
    const tracetree::detail::DirectCalls found = direct_calls(code.data(), code.size(), 0x1000, starts);
    CHECK(found.calls == std::vector<std::int32_t>{2});
    CHECK(found.tails == std::vector<std::int32_t>{3});
    // The last instruction cut short by the function's size: not read past it.
    const tracetree::detail::DirectCalls cut = direct_calls(code.data(), code.size() - 1, 0x1000, starts);
    CHECK(cut.tails.empty());
#endif
}

TEST_CASE("reachable: direct calls to a depth, tail calls without counting") {
    using tracetree::detail::DirectCalls;
    // 1 calls 2, 2 calls 3 and jumps to 4, 4 calls 5.
    const DirectCalls one{{2}, {}}, two{{3}, {4}}, four{{5}, {}}, none{};
    const std::vector<const DirectCalls*> graph = {nullptr, &one, &two, &none, &four, &none};
    const auto reach = [&](int depth) {
        std::vector<std::uint8_t> marked(graph.size());
        tracetree::detail::reachable(graph, {1}, depth, marked);
        std::vector<int> ids;
        for (std::size_t id = 0; id < marked.size(); ++id)
            if (marked[id] != 0) ids.push_back(static_cast<int>(id));
        return ids;
    };
    CHECK(reach(0) == std::vector<int>{1});
    CHECK(reach(1) == std::vector<int>{1, 2, 4});  // 4 runs in place of 2
    CHECK(reach(2) == std::vector<int>{1, 2, 3, 4, 5});
}
