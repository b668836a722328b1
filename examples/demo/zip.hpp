// ZIP archives for the demo: a central-directory reader, a sequential (local-header) reader like
// java.util.zip.ZipInputStream, and a writer. Pure code over bytes: no files, no sockets, no tracing.
// Every malformed input ends in zip::Error with a message that says what and where; nothing else.
// Format facts from PKWARE's APPNOTE.TXT (sections 4.3.7 local header, 4.3.9 data descriptor,
// 4.3.12 central directory header, 4.3.16 end of central directory record). No ZIP64, no encryption.
#ifndef DEMO_ZIP_HPP
#define DEMO_ZIP_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace demo::zip {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class Method : std::uint16_t { stored = 0, deflated = 8 };

struct Entry {
    std::string name;
    std::uint16_t method = 0;  // raw: other values are listed, but refused when read
    std::uint16_t flags = 0;
    std::uint32_t crc = 0;
    std::uint64_t compressed_size = 0;
    std::uint64_t size = 0;
    std::uint64_t header_offset = 0;  // of the local header, from the start of the archive
    bool is_directory() const { return !name.empty() && name.back() == '/'; }
};

// Bounds that keep a hostile archive from costing more than a real one.
struct Limits {
    std::uint64_t max_entry_size = 256u << 20;  // uncompressed bytes per entry
    std::size_t max_entries = 65535;
};

// The central directory of a whole archive held in memory (random access, like java.util.zip.ZipFile).
class Archive {
public:
    // Throws Error when `bytes` is not a ZIP archive or any entry points outside it.
    static Archive parse(std::string_view bytes, const Limits& limits = {});

    const std::vector<Entry>& entries() const { return entries_; }
    const Entry* find(std::string_view name) const;
    // The entry's compressed bytes, located through its local header (checked against the central one).
    std::string_view raw_data(const Entry& entry) const;
    // The entry's contents: inflated when deflated, size and CRC-32 checked.
    std::string read(const Entry& entry) const;

private:
    std::string_view bytes_;
    std::vector<Entry> entries_;
    Limits limits_;
};

// Where ZipInputStream reads from. read() returns 0 only at the end; a failure throws.
class ByteSource {
public:
    virtual ~ByteSource() = default;
    virtual std::size_t read(char* out, std::size_t max) = 0;
};

class MemorySource final : public ByteSource {
public:
    explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
    std::size_t read(char* out, std::size_t max) override;

private:
    std::string_view bytes_;
    std::size_t position_ = 0;
};

// One local header as met while reading sequentially.
struct LocalEntry {
    std::string name;
    std::uint16_t method = 0;
    std::uint16_t flags = 0;
    std::uint32_t crc = 0;
    std::uint64_t compressed_size = 0;
    std::uint64_t size = 0;
    bool has_descriptor() const { return (flags & 8u) != 0; }
};

// Reads an archive front to back through local headers, with no random access: the only way to list
// a jar nested inside another jar without extracting it. Moving to the next entry first drains the
// current one: inflates the rest of it and checks its CRC, as ZipInputStream.closeEntry() does.
class ZipInputStream {
public:
    explicit ZipInputStream(ByteSource& source, const Limits& limits = {});
    ~ZipInputStream();
    ZipInputStream(const ZipInputStream&) = delete;
    ZipInputStream& operator=(const ZipInputStream&) = delete;

    // Reads (and checks) whatever is left of the current entry. Does nothing when there is none.
    void close_entry();
    // The next local header, or nothing at the central directory or the end. Call close_entry() first.
    std::optional<LocalEntry> read_header();
    // Both of the above.
    std::optional<LocalEntry> next_entry();
    // Up to `max` bytes of the current entry's contents; 0 at its end (checked there).
    std::size_t read(char* out, std::size_t max);

    std::uint64_t position() const { return position_; }  // bytes consumed from the source

private:
    struct Inflater;
    std::size_t fill();                    // more input into the buffer; returns the bytes available
    void need(std::size_t count);          // at least `count` bytes buffered, or Error
    std::uint32_t u16_at(std::size_t at) const;
    std::uint32_t u32_at(std::size_t at) const;
    void consume(std::size_t count);
    void finish_entry();                   // after the last byte: descriptor, size and CRC checks

    ByteSource& source_;
    Limits limits_;
    std::vector<char> buffer_;
    std::size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
    bool source_done_ = false;
    std::uint64_t position_ = 0;
    bool at_end_ = false;
    std::size_t entries_ = 0;

    std::optional<LocalEntry> current_;
    bool current_done_ = true;
    std::uint64_t remaining_input_ = 0;  // stored or known-size deflated: compressed bytes left
    std::uint64_t produced_ = 0;
    std::uint32_t running_crc_ = 0;
    Inflater* inflater_ = nullptr;
};

// Builds an archive in memory. Timestamps are fixed so that the same input gives the same bytes.
class Writer {
public:
    void add(std::string_view name, std::string_view data, Method method);
    void add_directory(std::string_view name);  // `name` ends with '/'
    std::string finish();                        // the archive; the writer is empty afterwards

private:
    std::string out_;
    std::string central_;
    std::uint64_t count_ = 0;
};

std::uint32_t crc32(std::string_view data);
std::string deflate_raw(std::string_view data, int level = 6);
// Inflates a raw deflate stream; Error when it is corrupt, shorter, or longer than `expected_size`.
std::string inflate_raw(std::string_view data, std::uint64_t expected_size);

}  // namespace demo::zip

#endif
