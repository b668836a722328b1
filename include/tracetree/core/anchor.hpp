// tracetree anchor: how the copies of the library in a process find its one recorder. SPDX-License-Identifier: MIT
//
// Every copy (the executable, each shared library or plugin that includes a tracetree header) defines
// an anchor: a C symbol named after the ABI (tracetree_anchor_v0_2) holding the recorder's address,
// and beside it an ELF note, owner "tracetree", that holds the anchor's offset from the note and the
// ABI's name. The note is in a loaded segment that the module's program headers list, and
// dl_iterate_phdr gives every loaded module's program headers: a copy reaches every anchor in the
// process whatever the links export (a plain `g++ app.cpp`, plugins loaded RTLD_LOCAL, hidden
// visibility, -Bsymbolic, a version script's `local: *`, --exclude-libs). A copy walks once, at its
// first scope that finds no recorder, and the copy that starts the recorder walks to write its address
// into every anchor loaded so far. Both walks run while the loader's list of modules is held still, so
// a copy loading while the recorder starts is seen by one or the other.
//
// The anchor is also exported, weak: the dynamic linker binds the copies of the program's global scope
// to one anchor, and those find the recorder without a walk. No link flag is needed;
// `-Wl,--export-dynamic-symbol=tracetree_anchor_*` adds the executable's anchor to that binding and
// changes nothing else. Nothing is published outside the process: no environment, no file.
#ifndef TRACETREE_CORE_ANCHOR_HPP
#define TRACETREE_CORE_ANCHOR_HPP

#include "abi.hpp"

#include <atomic>   // the anchor
#include <cstdint>  // addresses and ELF words
#if defined(__linux__)
#include <link.h>  // dl_iterate_phdr and the ELF types of a module's dynamic section
#endif

#define TRACETREE_DETAIL_ANCHOR TRACETREE_DETAIL_CAT(tracetree_anchor_, TRACETREE_ABI)

#if defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
// The anchor and its note in one COMDAT group: a module keeps one of each however many of its files
// include this header. Written in assembly because C++ has no constant for the distance between two
// objects; the note reaches the anchor through a local label, so the distance is fixed when the module
// is linked (no run-time relocation, nothing another module can interpose).
#if defined(__arm__)
#define TRACETREE_DETAIL_ELF_TYPE(type) "%" #type  // '@' starts a comment in ARM assembly
#else
#define TRACETREE_DETAIL_ELF_TYPE(type) "@" #type
#endif
#define TRACETREE_DETAIL_ANCHOR_SYMBOL TRACETREE_DETAIL_STRING(TRACETREE_DETAIL_ANCHOR)
#define TRACETREE_DETAIL_POINTER_SIZE TRACETREE_DETAIL_STRING(__SIZEOF_POINTER__)
__asm__(".ifndef .Ltracetree_anchor\n"  // once per assembly file: -flto puts every file's top-level asm in one
        ".pushsection .bss." TRACETREE_DETAIL_ANCHOR_SYMBOL ",\"awG\"," TRACETREE_DETAIL_ELF_TYPE(nobits) "," TRACETREE_DETAIL_ANCHOR_SYMBOL ",comdat\n"
        ".balign " TRACETREE_DETAIL_POINTER_SIZE "\n"
        ".weak " TRACETREE_DETAIL_ANCHOR_SYMBOL "\n"
        ".type " TRACETREE_DETAIL_ANCHOR_SYMBOL "," TRACETREE_DETAIL_ELF_TYPE(object) "\n"
        ".size " TRACETREE_DETAIL_ANCHOR_SYMBOL "," TRACETREE_DETAIL_POINTER_SIZE "\n"
        TRACETREE_DETAIL_ANCHOR_SYMBOL ":\n"
        ".Ltracetree_anchor:\n"
        ".zero " TRACETREE_DETAIL_POINTER_SIZE "\n"  // null: no recorder
        ".popsection\n"
        ".pushsection .note.tracetree,\"aG\"," TRACETREE_DETAIL_ELF_TYPE(note) "," TRACETREE_DETAIL_ANCHOR_SYMBOL ",comdat\n"
        ".balign 4\n"
        ".4byte 10\n"                                            // the owner's size: "tracetree" and its NUL
        ".4byte .Ltracetree_note_end - .Ltracetree_note\n"       // the description's
        ".4byte 1\n"                                             // the type: an anchor (kAnchorNote)
        ".asciz \"tracetree\"\n"
        ".balign 4\n"
        ".Ltracetree_note:\n"
        ".4byte .Ltracetree_anchor - .Ltracetree_note\n"         // the description: the anchor's offset,
        ".asciz \"" TRACETREE_DETAIL_ABI_NAME "\"\n"             // and the ABI's name
        ".Ltracetree_note_end:\n"
        ".balign 4\n"
        ".popsection\n"
        ".endif\n");
extern "C" {
__attribute__((visibility("default"))) extern std::atomic<void*> TRACETREE_DETAIL_ANCHOR;  // defined above
}
#else
// Weak, not `inline`: g++ would make an inline variable STB_GNU_UNIQUE, which keeps the first plugin
// that defines it loaded for ever; weak definitions merge into one per module all the same.
extern "C" {
__attribute__((weak, visibility("default"))) std::atomic<void*> TRACETREE_DETAIL_ANCHOR{nullptr};
}
#endif

TRACETREE_BEGIN_NAMESPACE
namespace detail {

TRACETREE_DETAIL_LOCAL inline constexpr char kAbiName[] = TRACETREE_DETAIL_ABI_NAME;  // "v0_2", ...
TRACETREE_DETAIL_LOCAL inline constexpr char kNoteOwner[] = "tracetree";  // the anchor's note, written above
constexpr std::uint32_t kAnchorNote = 1;

inline std::atomic<void*>& own_anchor() noexcept { return TRACETREE_DETAIL_ANCHOR; }

#if defined(__linux__)

// One loaded module's dynamic symbol table, read in place: the loader's own look-ups (dlsym) take a
// lock that must not be taken while the list of modules is held.
class ModuleSymbols {
public:
    explicit ModuleSymbols(const dl_phdr_info& module) noexcept : module_(module) {
        for (ElfW(Half) i = 0; i < module.dlpi_phnum; ++i) {
            if (module.dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
            const auto* entry = reinterpret_cast<const ElfW(Dyn)*>(module.dlpi_addr + module.dlpi_phdr[i].p_vaddr);
            for (; entry->d_tag != DT_NULL; ++entry) {
                if (entry->d_tag == DT_SYMTAB) symbols_ = reinterpret_cast<const ElfW(Sym)*>(at(entry->d_un.d_ptr));
                else if (entry->d_tag == DT_STRTAB) strings_ = reinterpret_cast<const char*>(at(entry->d_un.d_ptr));
                else if (entry->d_tag == DT_GNU_HASH) gnu_hash_ = reinterpret_cast<const std::uint32_t*>(at(entry->d_un.d_ptr));
                else if (entry->d_tag == DT_HASH) sysv_hash_ = reinterpret_cast<const ElfW(Word)*>(at(entry->d_un.d_ptr));
            }
        }
        // A table without buckets (or without symbols) has nothing to find.
        if (symbols_ == nullptr || strings_ == nullptr || (gnu_hash_ != nullptr && gnu_hash_[0] == 0)) gnu_hash_ = nullptr;
        if (symbols_ == nullptr || strings_ == nullptr || (sysv_hash_ != nullptr && sysv_hash_[0] == 0)) sysv_hash_ = nullptr;
    }

    // The defined symbol `name`'s address, or null.
    void* find(const char* name) const noexcept {
        void* found = nullptr;
        if (gnu_hash_ != nullptr) {
            std::uint32_t hash = 5381;  // the GNU hash: h * 33 + c
            for (const char* c = name; *c != '\0'; ++c) hash = hash * 33 + static_cast<unsigned char>(*c);
            const GnuHash table = gnu_table();
            for (std::uint32_t i = table.buckets[hash % table.bucket_count]; i >= table.first && i != 0; ++i) {
                const std::uint32_t chained = table.chain[i - table.first];
                if ((chained | 1) == (hash | 1) && visit_if(i, name, found)) break;
                if ((chained & 1) != 0) break;
            }
        } else if (sysv_hash_ != nullptr) {
            std::uint32_t hash = 0;  // the System V hash
            for (const char* c = name; *c != '\0'; ++c) {
                hash = (hash << 4) + static_cast<unsigned char>(*c);
                hash = (hash ^ ((hash & 0xF0000000u) >> 24)) & 0x0FFFFFFFu;
            }
            const ElfW(Word) bucket_count = sysv_hash_[0];
            const ElfW(Word)* chain = sysv_hash_ + 2 + bucket_count;
            for (ElfW(Word) i = sysv_hash_[2 + hash % bucket_count]; i != STN_UNDEF; i = chain[i])
                if (visit_if(i, name, found)) break;
        }
        return found;
    }

    const ElfW(Phdr)* program_headers() const noexcept { return module_.dlpi_phdr; }

    bool contains(const void* address) const noexcept {  // in one of the module's loaded segments
        const auto at_address = reinterpret_cast<std::uintptr_t>(address);
        for (ElfW(Half) i = 0; i < module_.dlpi_phnum; ++i) {
            const ElfW(Phdr)& segment = module_.dlpi_phdr[i];
            const std::uintptr_t start = module_.dlpi_addr + segment.p_vaddr;
            if (segment.p_type == PT_LOAD && at_address >= start && at_address - start < segment.p_memsz) return true;
        }
        return false;
    }

    // visit(abi, anchor) for each tracetree note in the module (one per ABI its copies were built with),
    // until it returns true.
    template <class Visit>
    void each_anchor(Visit&& visit) const noexcept {
        for (ElfW(Half) i = 0; i < module_.dlpi_phnum; ++i) {
            const ElfW(Phdr)& segment = module_.dlpi_phdr[i];
            if (segment.p_type != PT_NOTE) continue;
            // Each note: three 4-byte words (the owner's size, the description's, the type), then the
            // owner and the description, each padded to the segment's alignment.
            const std::size_t align = segment.p_align > 4 ? segment.p_align : 4;
            const auto padded = [align](std::uint32_t size) { return (size + align - 1) & ~(align - 1); };
            const auto* note = reinterpret_cast<const unsigned char*>(module_.dlpi_addr + segment.p_vaddr);
            const unsigned char* const end = note + segment.p_memsz;
            while (end - note >= 12) {
                std::uint32_t words[3];
                __builtin_memcpy(words, note, sizeof words);
                const unsigned char* owner = note + 12;
                const unsigned char* description = owner + padded(words[0]);
                if (description > end || end - description < static_cast<std::ptrdiff_t>(padded(words[1]))) break;
                note = description + padded(words[1]);
                if (words[2] != kAnchorNote || words[0] != sizeof kNoteOwner || words[1] <= 4 ||
                    __builtin_memcmp(owner, kNoteOwner, sizeof kNoteOwner) != 0 || description[words[1] - 1] != '\0')
                    continue;
                std::int32_t offset;
                __builtin_memcpy(&offset, description, sizeof offset);
                auto* anchor = reinterpret_cast<std::atomic<void*>*>(const_cast<unsigned char*>(description) + offset);
                if (visit(reinterpret_cast<const char*>(description + 4), anchor)) return;
            }
        }
    }

    // This ABI's anchor in the module, or null.
    std::atomic<void*>* anchor() const noexcept {
        std::atomic<void*>* found = nullptr;
        each_anchor([&](const char* abi, std::atomic<void*>* anchor) {
            if (__builtin_strcmp(abi, kAbiName) == 0) found = anchor;
            return found != nullptr;
        });
        return found;
    }

private:
    struct GnuHash {
        std::uint32_t bucket_count, first;
        const std::uint32_t* buckets;
        const std::uint32_t* chain;
    };
    GnuHash gnu_table() const noexcept {  // buckets, the first hashed symbol, a Bloom filter, buckets, chains
        const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(gnu_hash_ + 4);
        const auto* buckets = reinterpret_cast<const std::uint32_t*>(bloom + gnu_hash_[2]);
        return {gnu_hash_[0], gnu_hash_[1], buckets, buckets + gnu_hash_[0]};
    }
    // The loader relocates a module's dynamic entries in place, except where that section is read-only
    // (the vDSO): an entry below the module's base is still an offset.
    std::uintptr_t at(ElfW(Addr) pointer) const noexcept {
        return pointer < module_.dlpi_addr ? module_.dlpi_addr + pointer : pointer;
    }
    static bool defined(const ElfW(Sym)& symbol) noexcept {
        const auto type = symbol.st_info & 0xF;  // ELF32_ST_TYPE and ELF64_ST_TYPE alike
        return symbol.st_shndx != SHN_UNDEF && symbol.st_value != 0 && (type == STT_OBJECT || type == STT_FUNC);
    }
    void* address(const ElfW(Sym)& symbol) const noexcept {
        return reinterpret_cast<void*>(module_.dlpi_addr + symbol.st_value);
    }
    bool visit_if(std::uint32_t i, const char* name, void*& found) const noexcept {
        const ElfW(Sym)& symbol = symbols_[i];
        if (!defined(symbol) || __builtin_strcmp(strings_ + symbol.st_name, name) != 0) return false;
        found = address(symbol);
        return true;
    }

    const dl_phdr_info& module_;
    const ElfW(Sym)* symbols_ = nullptr;
    const char* strings_ = nullptr;
    const std::uint32_t* gnu_hash_ = nullptr;
    const ElfW(Word)* sysv_hash_ = nullptr;
};

// visit(const ModuleSymbols&) for each loaded module, in load order, until it returns true. While it
// runs, no module is loaded or unloaded: dl_iterate_phdr holds the loader's list (a recursive lock, so
// a walk inside a walk is one hold).
template <class Visit>
void walk_modules(Visit visit) noexcept {
    dl_iterate_phdr(
        [](dl_phdr_info* module, std::size_t, void* context) -> int {
            return (*static_cast<Visit*>(context))(ModuleSymbols(*module)) ? 1 : 0;
        },
        &visit);
}

// Runs `work` once with the list of modules held still.
template <class Work>
void with_modules_held(Work work) noexcept {
    bool done = false;
    walk_modules([&](const ModuleSymbols&) {
        work();
        return done = true;
    });
    if (!done) work();  // no module listed at all
}

// The recorder of this ABI in the process: the one some anchor holds, else `candidate` (null: only
// look). Whatever is found is written into every anchor that has none yet, so the copies loaded so
// far find it without looking, and a copy loaded later in the first anchor it reads.
inline void* settle_recorder(void* candidate) noexcept {
    void* found = nullptr;
    with_modules_held([&] {
        found = own_anchor().load(std::memory_order_acquire);
        if (found == nullptr)
            walk_modules([&](const ModuleSymbols& module) {
                if (std::atomic<void*>* anchor = module.anchor()) found = anchor->load(std::memory_order_acquire);
                return found != nullptr;
            });
        if (found == nullptr) found = candidate;
        if (found == nullptr) return;
        void* none = nullptr;
        own_anchor().compare_exchange_strong(none, found, std::memory_order_acq_rel);
        walk_modules([&](const ModuleSymbols& module) {
            void* empty = nullptr;
            if (std::atomic<void*>* anchor = module.anchor()) anchor->compare_exchange_strong(empty, found, std::memory_order_acq_rel);
            return false;
        });
    });
    return found;
}

#else  // not ELF: the anchor the linker binds is the only one

inline void* settle_recorder(void* candidate) noexcept {
    void* none = nullptr;
    return own_anchor().compare_exchange_strong(none, candidate, std::memory_order_acq_rel) ? candidate : none;
}

#endif

// Whether this copy has looked for a recorder started before it was loaded (join_thread, recorder.hpp):
// at its first scope that finds none, not when it is loaded, so that a file that only annotates runs
// nothing before main. Constant-initialised.
TRACETREE_DETAIL_LOCAL inline std::atomic<bool> g_anchor_walked{false};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_CORE_ANCHOR_HPP
