#include "zip.hpp"

#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace demo::zip {
namespace {

constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint32_t kCentralSignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kDescriptorSignature = 0x08074b50;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kEndSize = 22;

std::uint32_t le16(std::string_view bytes, std::size_t at) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at])) |
           static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 8;
}
std::uint32_t le32(std::string_view bytes, std::size_t at) { return le16(bytes, at) | le16(bytes, at + 2) << 16; }

void put16(std::string& out, std::uint32_t value) {
    out += static_cast<char>(value & 0xff);
    out += static_cast<char>((value >> 8) & 0xff);
}
void put32(std::string& out, std::uint32_t value) {
    put16(out, value & 0xffff);
    put16(out, value >> 16);
}

std::string quoted(std::string_view name) {  // names come from the archive: keep them printable
    std::string text = "'";
    for (char c : name.substr(0, 200)) text += (c >= 0x20 && c < 0x7f) ? c : '?';
    return text + (name.size() > 200 ? "...'" : "'");
}

void check_method(std::uint16_t method, std::string_view name) {
    if (method != static_cast<std::uint16_t>(Method::stored) && method != static_cast<std::uint16_t>(Method::deflated))
        throw Error("zip: entry " + quoted(name) + " uses compression method " + std::to_string(method) +
                    " (only stored and deflated are supported)");
}

void check_name(std::string_view name) {
    if (name.empty()) throw Error("zip: entry with an empty name");
    if (name.find('\0') != std::string_view::npos) throw Error("zip: entry name with a NUL byte");
}

}  // namespace

std::uint32_t crc32(std::string_view data) {
    uLong crc = ::crc32(0L, Z_NULL, 0);
    while (!data.empty()) {
        const std::size_t chunk = std::min<std::size_t>(data.size(), 1u << 30);
        crc = ::crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(chunk));
        data.remove_prefix(chunk);
    }
    return static_cast<std::uint32_t>(crc);
}

std::string deflate_raw(std::string_view data, int level) {
    z_stream z{};
    if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw Error("zip: deflateInit failed");
    std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
    z.next_in = reinterpret_cast<const Bytef*>(data.data());
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw Error("zip: deflate failed");
    return out;
}

std::string inflate_raw(std::string_view data, std::uint64_t expected_size) {
    z_stream z{};
    if (inflateInit2(&z, -15) != Z_OK) throw Error("zip: inflateInit failed");
    std::string out;
    char chunk[16384];
    z.next_in = reinterpret_cast<const Bytef*>(data.data());
    z.avail_in = static_cast<uInt>(std::min<std::size_t>(data.size(), std::numeric_limits<uInt>::max()));
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        z.next_out = reinterpret_cast<Bytef*>(chunk);
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&z);
            throw Error(std::string("zip: corrupt deflate data") + (rc == Z_BUF_ERROR ? " (truncated)" : ""));
        }
        const std::size_t produced = sizeof chunk - z.avail_out;
        if (out.size() + produced > expected_size) {
            inflateEnd(&z);
            throw Error("zip: deflate data longer than the declared " + std::to_string(expected_size) + " bytes");
        }
        out.append(chunk, produced);
    }
    inflateEnd(&z);
    if (out.size() != expected_size)
        throw Error("zip: deflate data of " + std::to_string(out.size()) + " bytes, declared " +
                    std::to_string(expected_size));
    return out;
}

// ---- Archive ----------------------------------------------------------------------------------

Archive Archive::parse(std::string_view bytes, const Limits& limits) {
    if (bytes.size() < kEndSize) throw Error("zip: not a ZIP archive (" + std::to_string(bytes.size()) + " bytes)");
    // The end record sits in the last 22 bytes plus a comment of at most 65535: search backwards.
    const std::size_t lowest = bytes.size() - kEndSize - std::min<std::size_t>(bytes.size() - kEndSize, 65535);
    std::size_t end = std::string_view::npos;
    for (std::size_t at = bytes.size() - kEndSize + 1; at-- > lowest;) {
        if (le32(bytes, at) == kEndSignature && at + kEndSize + le16(bytes, at + 20) == bytes.size()) {
            end = at;
            break;
        }
    }
    if (end == std::string_view::npos)
        throw Error("zip: not a ZIP archive (no end of central directory record)");
    if (le16(bytes, end + 4) != 0 || le16(bytes, end + 6) != 0)
        throw Error("zip: multi-disk archives are not supported");
    const std::size_t count = le16(bytes, end + 10);
    const std::uint64_t dir_size = le32(bytes, end + 12);
    const std::uint64_t dir_offset = le32(bytes, end + 16);
    if (count == 0xffff || dir_size == 0xffffffff || dir_offset == 0xffffffff)
        throw Error("zip: ZIP64 archives are not supported");
    if (count > limits.max_entries) throw Error("zip: too many entries (" + std::to_string(count) + ")");
    if (dir_offset + dir_size > end)
        throw Error("zip: central directory (offset " + std::to_string(dir_offset) + ", " + std::to_string(dir_size) +
                    " bytes) runs past its end record at " + std::to_string(end) + " (truncated archive?)");

    Archive archive;
    archive.bytes_ = bytes;
    archive.limits_ = limits;
    archive.entries_.reserve(count);
    std::size_t at = static_cast<std::size_t>(dir_offset);
    const std::size_t dir_end = static_cast<std::size_t>(dir_offset + dir_size);
    for (std::size_t i = 0; i < count; ++i) {
        if (at + kCentralHeaderSize > dir_end || le32(bytes, at) != kCentralSignature)
            throw Error("zip: bad central directory header " + std::to_string(i) + " at offset " + std::to_string(at));
        const std::size_t name_length = le16(bytes, at + 28);
        const std::size_t variable = name_length + le16(bytes, at + 30) + le16(bytes, at + 32);
        if (at + kCentralHeaderSize + variable > dir_end)
            throw Error("zip: central directory header " + std::to_string(i) + " runs past the directory");
        Entry entry;
        entry.flags = static_cast<std::uint16_t>(le16(bytes, at + 8));
        entry.method = static_cast<std::uint16_t>(le16(bytes, at + 10));
        entry.crc = le32(bytes, at + 16);
        entry.compressed_size = le32(bytes, at + 20);
        entry.size = le32(bytes, at + 24);
        entry.header_offset = le32(bytes, at + 42);
        entry.name = std::string(bytes.substr(at + kCentralHeaderSize, name_length));
        check_name(entry.name);
        if (entry.compressed_size == 0xffffffff || entry.size == 0xffffffff || entry.header_offset == 0xffffffff)
            throw Error("zip: entry " + quoted(entry.name) + " needs ZIP64, which is not supported");
        if (entry.header_offset + kLocalHeaderSize + entry.compressed_size > dir_offset)
            throw Error("zip: entry " + quoted(entry.name) + " lies outside the archive's data");
        archive.entries_.push_back(std::move(entry));
        at += kCentralHeaderSize + variable;
    }
    return archive;
}

const Entry* Archive::find(std::string_view name) const {
    for (const Entry& entry : entries_)
        if (entry.name == name) return &entry;
    return nullptr;
}

std::string_view Archive::raw_data(const Entry& entry) const {
    const std::size_t at = static_cast<std::size_t>(entry.header_offset);
    if (at + kLocalHeaderSize > bytes_.size() || le32(bytes_, at) != kLocalSignature)
        throw Error("zip: no local header for " + quoted(entry.name) + " at offset " + std::to_string(at));
    const std::size_t name_length = le16(bytes_, at + 26);
    const std::size_t start = at + kLocalHeaderSize + name_length + le16(bytes_, at + 28);
    if (bytes_.substr(at + kLocalHeaderSize, name_length) != entry.name)
        throw Error("zip: local header name differs from the central directory for " + quoted(entry.name));
    if (start + entry.compressed_size > bytes_.size())
        throw Error("zip: data of " + quoted(entry.name) + " runs past the end of the archive");
    return bytes_.substr(start, static_cast<std::size_t>(entry.compressed_size));
}

std::string Archive::read(const Entry& entry) const {
    check_method(entry.method, entry.name);
    if ((entry.flags & 1u) != 0) throw Error("zip: entry " + quoted(entry.name) + " is encrypted");
    if (entry.size > limits_.max_entry_size)
        throw Error("zip: entry " + quoted(entry.name) + " is too large (" + std::to_string(entry.size) + " bytes)");
    const std::string_view raw = raw_data(entry);
    std::string data;
    if (entry.method == static_cast<std::uint16_t>(Method::stored)) {
        if (entry.size != entry.compressed_size)
            throw Error("zip: stored entry " + quoted(entry.name) + " has different sizes");
        data = std::string(raw);
    } else {
        data = inflate_raw(raw, entry.size);
    }
    if (crc32(data) != entry.crc) throw Error("zip: CRC mismatch in " + quoted(entry.name));
    return data;
}

// ---- ZipInputStream ---------------------------------------------------------------------------

std::size_t MemorySource::read(char* out, std::size_t max) {
    const std::size_t count = std::min(max, bytes_.size() - position_);
    std::memcpy(out, bytes_.data() + position_, count);
    position_ += count;
    return count;
}

struct ZipInputStream::Inflater {
    z_stream z{};
    bool finished = false;
    Inflater() {
        if (inflateInit2(&z, -15) != Z_OK) throw Error("zip: inflateInit failed");
    }
    ~Inflater() { inflateEnd(&z); }
    void reset() {
        inflateReset(&z);
        finished = false;
    }
};

ZipInputStream::ZipInputStream(ByteSource& source, const Limits& limits)
    : source_(source), limits_(limits), buffer_(8192) {}

ZipInputStream::~ZipInputStream() { delete inflater_; }

std::size_t ZipInputStream::fill() {
    if (begin_ > 0) {  // keep the unread bytes at the front
        std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
    }
    while (!source_done_ && end_ < buffer_.size()) {
        const std::size_t got = source_.read(buffer_.data() + end_, buffer_.size() - end_);
        if (got == 0) source_done_ = true;
        end_ += got;
        if (got != 0) break;  // one read per fill: the buffer is small on purpose, like the JDK's
    }
    return end_ - begin_;
}

void ZipInputStream::need(std::size_t count) {
    if (count > buffer_.size()) buffer_.resize(count);  // a long name or extra field (at most 64 KiB)
    while (end_ - begin_ < count) {
        const std::size_t before = end_ - begin_;
        if (fill() == before && source_done_)
            throw Error("zip: archive truncated at offset " + std::to_string(position_ + before));
    }
}

std::uint32_t ZipInputStream::u16_at(std::size_t at) const {
    return le16(std::string_view(buffer_.data() + begin_, end_ - begin_), at);
}
std::uint32_t ZipInputStream::u32_at(std::size_t at) const {
    return le32(std::string_view(buffer_.data() + begin_, end_ - begin_), at);
}
void ZipInputStream::consume(std::size_t count) {
    begin_ += count;
    position_ += count;
}

std::optional<LocalEntry> ZipInputStream::read_header() {
    if (at_end_) return std::nullopt;
    if (!current_done_) throw Error("zip: read_header() before the current entry was closed");
    if (fill() == 0 && source_done_) {  // an archive may end right after its last entry
        at_end_ = true;
        return std::nullopt;
    }
    need(4);
    const std::uint32_t signature = u32_at(0);
    if (signature == kCentralSignature || signature == kEndSignature) {
        at_end_ = true;
        return std::nullopt;
    }
    if (signature != kLocalSignature)
        throw Error("zip: bad local header signature at offset " + std::to_string(position_));
    if (++entries_ > limits_.max_entries) throw Error("zip: too many entries");
    need(kLocalHeaderSize);
    LocalEntry entry;
    entry.flags = static_cast<std::uint16_t>(u16_at(6));
    entry.method = static_cast<std::uint16_t>(u16_at(8));
    entry.crc = u32_at(14);
    entry.compressed_size = u32_at(18);
    entry.size = u32_at(22);
    const std::size_t name_length = u16_at(26);
    const std::size_t extra_length = u16_at(28);
    consume(kLocalHeaderSize);
    need(name_length);
    entry.name.assign(buffer_.data() + begin_, name_length);
    consume(name_length);
    need(extra_length);
    consume(extra_length);
    check_name(entry.name);
    check_method(entry.method, entry.name);
    if ((entry.flags & 1u) != 0) throw Error("zip: entry " + quoted(entry.name) + " is encrypted");
    if (entry.has_descriptor() && entry.method == static_cast<std::uint16_t>(Method::stored))
        throw Error("zip: stored entry " + quoted(entry.name) + " with a data descriptor cannot be read sequentially");
    if (!entry.has_descriptor() && entry.size > limits_.max_entry_size)
        throw Error("zip: entry " + quoted(entry.name) + " is too large (" + std::to_string(entry.size) + " bytes)");
    if (entry.method == static_cast<std::uint16_t>(Method::deflated)) {
        if (inflater_ == nullptr) inflater_ = new Inflater;
        else inflater_->reset();
    } else if (entry.size != entry.compressed_size) {
        throw Error("zip: stored entry " + quoted(entry.name) + " has different sizes");
    }
    remaining_input_ = entry.compressed_size;
    produced_ = 0;
    running_crc_ = static_cast<std::uint32_t>(::crc32(0L, Z_NULL, 0));
    current_ = entry;
    current_done_ = false;
    return entry;
}

std::size_t ZipInputStream::read(char* out, std::size_t max) {
    if (current_done_ || max == 0) return 0;
    const LocalEntry& entry = *current_;
    const std::uint64_t cap = entry.has_descriptor() ? limits_.max_entry_size : entry.size;
    std::size_t produced = 0;
    if (entry.method == static_cast<std::uint16_t>(Method::stored)) {
        if (remaining_input_ > 0) {
            if (begin_ == end_) need(1);
            produced = static_cast<std::size_t>(std::min<std::uint64_t>({max, end_ - begin_, remaining_input_}));
            std::memcpy(out, buffer_.data() + begin_, produced);
            consume(produced);
            remaining_input_ -= produced;
        }
    } else {
        z_stream& z = inflater_->z;
        const std::size_t room = std::min<std::size_t>(max, 1u << 30);
        while (produced == 0 && !inflater_->finished) {
            auto available = [&] {
                const std::size_t buffered = end_ - begin_;
                return entry.has_descriptor() ? buffered
                                              : static_cast<std::size_t>(std::min<std::uint64_t>(buffered, remaining_input_));
            };
            if (available() == 0 && (entry.has_descriptor() || remaining_input_ > 0)) need(1);
            const std::size_t offered = available();
            z.next_in = reinterpret_cast<const Bytef*>(buffer_.data() + begin_);
            z.avail_in = static_cast<uInt>(offered);
            z.next_out = reinterpret_cast<Bytef*>(out);
            z.avail_out = static_cast<uInt>(room);
            const int rc = inflate(&z, Z_NO_FLUSH);
            const std::size_t used = offered - z.avail_in;
            consume(used);
            if (!entry.has_descriptor()) remaining_input_ -= used;
            produced = room - z.avail_out;
            if (rc == Z_STREAM_END) inflater_->finished = true;
            else if (rc == Z_BUF_ERROR) throw Error("zip: deflate data of " + quoted(entry.name) + " is truncated");
            else if (rc != Z_OK) throw Error("zip: corrupt deflate data in " + quoted(entry.name));
        }
    }
    if (produced_ + produced > cap)
        throw Error("zip: entry " + quoted(entry.name) + " is longer than " + std::to_string(cap) + " bytes");
    produced_ += produced;
    running_crc_ = static_cast<std::uint32_t>(
        ::crc32(running_crc_, reinterpret_cast<const Bytef*>(out), static_cast<uInt>(produced)));
    const bool done = entry.method == static_cast<std::uint16_t>(Method::stored) ? remaining_input_ == 0
                                                                                : inflater_->finished;
    if (done && produced == 0) finish_entry();
    return produced;
}

void ZipInputStream::finish_entry() {
    if (current_done_) return;
    LocalEntry& entry = *current_;
    if (entry.has_descriptor()) {  // crc, sizes follow the data, with or without a signature
        need(4);
        if (u32_at(0) == kDescriptorSignature) consume(4);
        need(12);
        entry.crc = u32_at(0);
        entry.compressed_size = u32_at(4);
        entry.size = u32_at(8);
        consume(12);
    } else if (remaining_input_ != 0) {
        throw Error("zip: entry " + quoted(entry.name) + " has " + std::to_string(remaining_input_) +
                    " bytes after its deflate data");
    }
    current_done_ = true;
    if (produced_ != entry.size)
        throw Error("zip: entry " + quoted(entry.name) + " holds " + std::to_string(produced_) + " bytes, declared " +
                    std::to_string(entry.size));
    if (running_crc_ != entry.crc) throw Error("zip: CRC mismatch in " + quoted(entry.name));
}

void ZipInputStream::close_entry() {
    char scratch[512];  // drained in small steps, as the JDK's skip() does
    while (!current_done_) {
        if (read(scratch, sizeof scratch) == 0) finish_entry();
    }
}

std::optional<LocalEntry> ZipInputStream::next_entry() {
    close_entry();
    return read_header();
}

// ---- Writer -----------------------------------------------------------------------------------

void Writer::add(std::string_view name, std::string_view data, Method method) {
    if (name.empty() || name.size() > 0xffff) throw Error("zip: bad entry name");
    if (data.size() >= 0xffffffffu || out_.size() >= 0xffffffffu) throw Error("zip: writer does not do ZIP64");
    const std::string compressed = method == Method::deflated ? deflate_raw(data) : std::string();
    const std::string_view stored = method == Method::deflated ? std::string_view(compressed) : data;
    const std::uint32_t crc = crc32(data);
    const auto offset = static_cast<std::uint32_t>(out_.size());
    const auto name_length = static_cast<std::uint32_t>(name.size());
    auto common = [&](std::string& to) {  // version needed .. extra length: shared by both headers
        put16(to, 20);
        put16(to, 0);  // flags
        put16(to, static_cast<std::uint32_t>(method));
        put16(to, 0x5000);  // 10:00:00
        put16(to, 0x4cd5);  // 2018-06-21, when springfox 2.9.2 was cut
        put32(to, crc);
        put32(to, static_cast<std::uint32_t>(stored.size()));
        put32(to, static_cast<std::uint32_t>(data.size()));
        put16(to, name_length);
        put16(to, 0);
    };
    put32(out_, kLocalSignature);
    common(out_);
    out_.append(name);
    out_.append(stored);

    put32(central_, kCentralSignature);
    put16(central_, 20);  // made by: MS-DOS, version 2.0
    common(central_);
    put16(central_, 0);  // comment length
    put16(central_, 0);  // disk
    put16(central_, 0);  // internal attributes
    put32(central_, name.back() == '/' ? 0x10 : 0);
    put32(central_, offset);
    central_.append(name);
    ++count_;
}

void Writer::add_directory(std::string_view name) { add(name, {}, Method::stored); }

std::string Writer::finish() {
    if (count_ > 0xfffe) throw Error("zip: writer does not do ZIP64");
    const auto dir_offset = static_cast<std::uint32_t>(out_.size());
    out_ += central_;
    put32(out_, kEndSignature);
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, static_cast<std::uint32_t>(count_));
    put16(out_, static_cast<std::uint32_t>(count_));
    put32(out_, static_cast<std::uint32_t>(central_.size()));
    put32(out_, dir_offset);
    put16(out_, 0);
    std::string result = std::move(out_);
    out_.clear();
    central_.clear();
    count_ = 0;
    return result;
}

}  // namespace demo::zip
