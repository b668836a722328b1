// tracetree XRay support: the names of the executable's own functions. SPDX-License-Identifier: MIT
//
// XRay knows a function by its id and its address only. The names come from the executable's ELF
// symbol table (.symtab, or .dynsym when the file is stripped), read from /proc/self/exe: dladdr()
// sees only exported symbols, and an executable exports almost none. Every offset read from the
// file is checked against its size, so a damaged or truncated file gives names it could read and an
// error, never a read out of bounds.
#ifndef TRACETREE_RUNTIME_SYMBOLS_HPP
#define TRACETREE_RUNTIME_SYMBOLS_HPP

#include "../core/platform.hpp"  // first: Linux (ELF) only
#include "../core/recorder.hpp"  // Site: a TRACETREE_FUNCTION() site found in the table

#include <algorithm>  // std::sort, std::lower_bound
#include <atomic>
#include <cstdint>
#include <cstring>    // std::memcpy, std::strstr
#include <string>
#include <utility>    // std::pair
#include <vector>
#include <cxxabi.h>    // abi::__cxa_demangle
#include <elf.h>       // Elf64_Ehdr, Elf64_Shdr, Elf64_Sym
#include <fcntl.h>     // open
#include <link.h>      // dl_iterate_phdr: where the executable is loaded
#include <stdlib.h>    // free
#include <sys/mman.h>  // mmap
#include <sys/stat.h>  // fstat
#include <unistd.h>    // close

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// The executable's load bias: a symbol's value plus this is its address in memory (0 unless PIE).
inline std::uintptr_t executable_bias() noexcept {
    std::uintptr_t bias = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* out) -> int {
            *static_cast<std::uintptr_t*>(out) = info->dlpi_addr;
            return 1;  // the first object is the executable
        },
        &bias);
    return bias;
}

// Whether [address, address + size) lies in a writable segment of the executable as loaded: a static
// Site does, and only there may the symbol table's word for it be trusted enough to read it.
inline bool in_executable_data(std::uintptr_t address, std::size_t size) noexcept {
    struct Query {
        std::uintptr_t address;
        std::size_t size;
        bool inside;
    } query{address, size, false};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) -> int {
            auto& q = *static_cast<Query*>(data);
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& segment = info->dlpi_phdr[i];
                if (segment.p_type != PT_LOAD || (segment.p_flags & PF_W) == 0) continue;
                const std::uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
                if (q.address >= begin && q.address - begin <= segment.p_memsz && q.size <= segment.p_memsz - (q.address - begin))
                    q.inside = true;
            }
            return 1;  // the executable only
        },
        &query);
    return query.inside;
}

// `name` demangled when it is a C++ name, as it is otherwise.
inline std::string demangled(const char* name) {
    int status = 0;
    char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string result = status == 0 && text != nullptr ? text : name;
    free(text);
    return result;
}

// The ELF image of a file, mapped read-only, with bounds-checked views of its parts.
class ElfImage {
public:
    explicit ElfImage(const char* path) {
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        struct stat info {};
        if (fstat(fd, &info) == 0 && info.st_size > 0) {
            void* mapped = mmap(nullptr, static_cast<std::size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapped != MAP_FAILED) {
                data_ = static_cast<const unsigned char*>(mapped);
                size_ = static_cast<std::size_t>(info.st_size);
            }
        }
        ::close(fd);
    }
    ~ElfImage() {
        if (data_ != nullptr) munmap(const_cast<unsigned char*>(data_), size_);
    }
    ElfImage(const ElfImage&) = delete;
    ElfImage& operator=(const ElfImage&) = delete;

    bool readable() const noexcept { return data_ != nullptr; }
    // `count` objects of type T at `offset`, or false when they are not all inside the file.
    template <class T>
    bool read(std::uint64_t offset, std::uint64_t count, T* out) const noexcept {
        if (offset > size_ || count > (size_ - offset) / sizeof(T)) return false;
        std::memcpy(out, data_ + offset, static_cast<std::size_t>(count) * sizeof(T));
        return true;
    }
    // The NUL-terminated string at `offset` of a table of `size` bytes at `table`, or null.
    const char* string(std::uint64_t table, std::uint64_t size, std::uint64_t offset) const noexcept {
        if (table > size_ || size > size_ - table || offset >= size) return nullptr;
        const unsigned char* begin = data_ + table + offset;
        const unsigned char* end = data_ + table + size;
        return std::find(begin, end, '\0') == end ? nullptr : reinterpret_cast<const char*>(begin);
    }

private:
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
};

// What the symbol table says of the functions at given addresses (in memory).
struct FunctionSymbols {
    std::vector<std::string> names;  // demangled; "" where no symbol is found
    std::vector<std::size_t> sizes;  // bytes of code, from the symbol (0 where none is found)
    // The function holds a TRACETREE_FUNCTION(): its static Site, a local variable named after it
    // (`ns::f(int)::tracetree_site_12`), is in the table too. Its scope shows it already.
    std::vector<bool> annotated;
    std::string error;  // why names are missing, when the table could not be read
};

// The symbols of the ELF file `path`, loaded with `bias`, for the functions at `addresses`.
inline FunctionSymbols function_symbols(const char* path, std::uintptr_t bias, const std::vector<std::uintptr_t>& addresses) {
    FunctionSymbols result;
    result.names.resize(addresses.size());
    result.sizes.resize(addresses.size());
    result.annotated.resize(addresses.size());
    std::vector<std::pair<std::uintptr_t, std::size_t>> wanted;  // (address, index), sorted
    for (std::size_t i = 0; i < addresses.size(); ++i) wanted.emplace_back(addresses[i], i);
    std::sort(wanted.begin(), wanted.end());
    const ElfImage image(path);
    Elf64_Ehdr header{};
    if (!image.readable() || !image.read(0, 1, &header)) {
        result.error = std::string("cannot read ") + path;
        return result;
    }
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_shentsize != sizeof(Elf64_Shdr)) {
        result.error = std::string(path) + " is not a 64-bit ELF file";
        return result;
    }
    std::vector<Elf64_Shdr> sections(header.e_shnum);
    if (!image.read(header.e_shoff, header.e_shnum, sections.data())) {
        result.error = std::string(path) + ": section headers past the end of the file";
        return result;
    }
    const auto table = [&](std::uint32_t type) {
        return std::find_if(sections.begin(), sections.end(), [type](const Elf64_Shdr& s) { return s.sh_type == type; });
    };
    auto symbols = table(SHT_SYMTAB);  // every function; .dynsym has the exported ones only
    if (symbols == sections.end()) symbols = table(SHT_DYNSYM);
    if (symbols == sections.end() || symbols->sh_link >= sections.size() || symbols->sh_entsize != sizeof(Elf64_Sym)) {
        result.error = std::string(path) + " has no symbol table (stripped?)";
        return result;
    }
    const Elf64_Shdr& strings = sections[symbols->sh_link];
    std::vector<std::string> annotated_functions;
    const std::uint64_t count = symbols->sh_size / sizeof(Elf64_Sym);
    for (std::uint64_t i = 0; i < count; ++i) {
        Elf64_Sym symbol{};
        if (!image.read(symbols->sh_offset + i * sizeof(Elf64_Sym), 1, &symbol)) {
            result.error = std::string(path) + ": symbol table past the end of the file";
            break;
        }
        if (symbol.st_shndx == SHN_UNDEF || symbol.st_value == 0) continue;
        const char* name = image.string(strings.sh_offset, strings.sh_size, symbol.st_name);
        if (name == nullptr) continue;
        const std::uintptr_t address = static_cast<std::uintptr_t>(symbol.st_value) + bias;
        const unsigned type = ELF64_ST_TYPE(symbol.st_info);
        if (type == STT_OBJECT && symbol.st_size >= sizeof(Site) && std::strstr(name, "tracetree_site_") != nullptr &&
            in_executable_data(address, sizeof(Site)) && reinterpret_cast<const Site*>(address)->kind == SiteKind::function) {
            const std::string site = demangled(name);
            const std::size_t at = site.rfind("::tracetree_site_");
            if (at != std::string::npos) annotated_functions.push_back(site.substr(0, at));
            continue;
        }
        if (type != STT_FUNC) continue;
        auto at = std::lower_bound(wanted.begin(), wanted.end(), std::make_pair(address, std::size_t{0}));
        for (; at != wanted.end() && at->first == address; ++at) {
            if (!result.names[at->second].empty()) continue;  // aliases name one function
            result.names[at->second] = demangled(name);
            result.sizes[at->second] = static_cast<std::size_t>(symbol.st_size);
        }
    }
    std::sort(annotated_functions.begin(), annotated_functions.end());
    for (std::size_t i = 0; i < addresses.size(); ++i)
        result.annotated[i] = std::binary_search(annotated_functions.begin(), annotated_functions.end(), result.names[i]);
    return result;
}

// Set by xray.hpp's start-up: the program can patch its functions, so a pattern that matches none of
// them and no scope run so far is a mistake the admin handler answers at once (admin/handler.hpp).
inline std::atomic<bool> g_xray_in_program{false};

// What the admin handler's XRay view shows of one function (xray.hpp fills them; the handler does not
// include xray.hpp, which only clang compiles).
struct XRayRow {
    std::string name;      // "ns::Class::method()"
    bool patchable = false;
    bool patched = false;  // now
    std::string wanted_by; // the running sessions that patch it: "trace 'db::DB::Write' (depth 2)", "; "
};
// Set by xray.hpp's start-up: every XRay function of the executable, by id (reads them if needed).
inline std::atomic<void (*)(std::vector<XRayRow>&)> g_xray_rows{nullptr};

// Every function of an ELF file, by address in memory, and the texts of its annotated scopes: what
// `stack` names frames with, and what the admin handler's patterns can match before anything ran.
struct FunctionTable {
    struct Entry {
        std::uintptr_t address = 0;
        std::size_t size = 0;
        std::string name;  // demangled
    };
    std::vector<Entry> functions;          // sorted by address
    std::vector<std::string> scope_texts;  // TRACETREE_SCOPE("...") and the like
    std::string error;
    // The function whose code holds `address`, or null.
    const Entry* find(std::uintptr_t address) const noexcept {
        auto at = std::upper_bound(functions.begin(), functions.end(), address,
                                   [](std::uintptr_t a, const Entry& e) { return a < e.address; });
        if (at == functions.begin()) return nullptr;
        --at;
        return address - at->address < std::max<std::size_t>(at->size, 1) ? &*at : nullptr;
    }
};

inline FunctionTable function_table(const char* path, std::uintptr_t bias) {
    FunctionTable result;
    const ElfImage image(path);
    Elf64_Ehdr header{};
    if (!image.readable() || !image.read(0, 1, &header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
        header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_shentsize != sizeof(Elf64_Shdr)) {
        result.error = std::string("cannot read ") + path + " as a 64-bit ELF file";
        return result;
    }
    std::vector<Elf64_Shdr> sections(header.e_shnum);
    if (!image.read(header.e_shoff, header.e_shnum, sections.data())) {
        result.error = std::string(path) + ": section headers past the end of the file";
        return result;
    }
    auto symbols = std::find_if(sections.begin(), sections.end(), [](const Elf64_Shdr& s) { return s.sh_type == SHT_SYMTAB; });
    if (symbols == sections.end())
        symbols = std::find_if(sections.begin(), sections.end(), [](const Elf64_Shdr& s) { return s.sh_type == SHT_DYNSYM; });
    if (symbols == sections.end() || symbols->sh_link >= sections.size() || symbols->sh_entsize != sizeof(Elf64_Sym)) {
        result.error = std::string(path) + " has no symbol table (stripped?)";
        return result;
    }
    const Elf64_Shdr& strings = sections[symbols->sh_link];
    const std::uint64_t count = symbols->sh_size / sizeof(Elf64_Sym);
    for (std::uint64_t i = 0; i < count; ++i) {
        Elf64_Sym symbol{};
        if (!image.read(symbols->sh_offset + i * sizeof(Elf64_Sym), 1, &symbol)) {
            result.error = std::string(path) + ": symbol table past the end of the file";
            break;
        }
        if (symbol.st_shndx == SHN_UNDEF || symbol.st_value == 0) continue;
        const char* name = image.string(strings.sh_offset, strings.sh_size, symbol.st_name);
        if (name == nullptr) continue;
        const std::uintptr_t address = static_cast<std::uintptr_t>(symbol.st_value) + bias;
        const unsigned type = ELF64_ST_TYPE(symbol.st_info);
        if (type == STT_FUNC) {
            result.functions.push_back({address, static_cast<std::size_t>(symbol.st_size), demangled(name)});
        } else if (type == STT_OBJECT && symbol.st_size >= sizeof(Site) && std::strstr(name, "tracetree_site_") != nullptr &&
                   in_executable_data(address, sizeof(Site))) {
            const Site& site = *reinterpret_cast<const Site*>(address);
            if (site.kind == SiteKind::scope && site.text != nullptr) result.scope_texts.emplace_back(site.text);
        }
    }
    std::sort(result.functions.begin(), result.functions.end(),
              [](const FunctionTable::Entry& a, const FunctionTable::Entry& b) { return a.address < b.address; });
    return result;
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_SYMBOLS_HPP
