// A program of db_bench's shape (leveldb's fillrandom), for bench/xray_db_bench.cpp. SPDX-License-Identifier: MIT
//
// Each operation appends a log record (its crc, one write() to a file) and inserts the key into a
// skip-list memtable whose comparisons go through a comparator object: about 80 function calls per
// operation, as leveldb's write path makes 77. No tracetree in this file: built with XRay sleds only.
#include "db_shape.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include <unistd.h>

namespace db {

#define DB_NOINLINE __attribute__((noinline))

DB_NOINLINE char* EncodeVarint32(char* dst, std::uint32_t v) {
    auto* p = reinterpret_cast<unsigned char*>(dst);
    while (v >= 128) { *p++ = static_cast<unsigned char>(v | 128); v >>= 7; }
    *p++ = static_cast<unsigned char>(v);
    return reinterpret_cast<char*>(p);
}
DB_NOINLINE void PutVarint32(std::string* dst, std::uint32_t v) {
    char buf[5];
    dst->append(buf, static_cast<std::size_t>(EncodeVarint32(buf, v) - buf));
}
DB_NOINLINE void PutLengthPrefixedSlice(std::string* dst, const Slice& value) {
    PutVarint32(dst, static_cast<std::uint32_t>(value.size));
    dst->append(value.data, value.size);
}

DB_NOINLINE int BytewiseComparator::Compare(const Slice& a, const Slice& b) const { return a.compare(b); }

DB_NOINLINE std::uint32_t Random::Next() {
    seed = static_cast<std::uint32_t>((seed * 16807ULL) % 2147483647ULL);
    return seed;
}
DB_NOINLINE char* Arena::Allocate(std::size_t bytes) {
    if (bytes > left) {
        blocks.emplace_back(new char[4096]);
        next = blocks.back().get();
        left = 4096;
    }
    char* result = next;
    next += bytes;
    left -= bytes;
    return result;
}

DB_NOINLINE int SkipList::RandomHeight() {
    int levels = 1;
    while (levels < kMaxHeight && rnd.Next() % 4 == 0) ++levels;
    return levels;
}
DB_NOINLINE bool SkipList::KeyIsAfterNode(const char* key, Node* n) const { return n != nullptr && compare(n->key, key) < 0; }
DB_NOINLINE SkipList::Node* SkipList::FindGreaterOrEqual(const char* key, Node** prev) const {
    Node* x = head;
    int level = height - 1;
    while (true) {
        Node* next = x->next[level];
        if (KeyIsAfterNode(key, next)) {
            x = next;
        } else {
            if (prev != nullptr) prev[level] = x;
            if (level == 0) return next;
            --level;
        }
    }
}
DB_NOINLINE SkipList::Node* SkipList::NewNode(const char* key, int h) {
    char* mem = arena->Allocate(sizeof(Node) + sizeof(Node*) * static_cast<std::size_t>(h - 1));
    Node* n = reinterpret_cast<Node*>(mem);
    n->key = key;
    return n;
}
DB_NOINLINE void SkipList::Insert(const char* key) {
    Node* prev[kMaxHeight];
    FindGreaterOrEqual(key, prev);
    const int h = RandomHeight();
    if (h > height) {
        for (int i = height; i < h; ++i) prev[i] = head;
        height = h;
    }
    Node* x = NewNode(key, h);
    for (int i = 0; i < h; ++i) {
        x->next[i] = prev[i]->next[i];
        prev[i]->next[i] = x;
    }
}

DB_NOINLINE void MemTable::Add(std::uint64_t sequence, const Slice& key, const Slice& value) {
    char* buf = arena.Allocate(kKeySize);
    std::memcpy(buf, key.data, kKeySize);
    (void)sequence;
    (void)value;
    table.Insert(buf);
}

namespace {
struct CrcTable {
    std::uint32_t entries[256];
    CrcTable() {
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t crc = i;
            for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
            entries[i] = crc;
        }
    }
};
const CrcTable crc_table;
}  // namespace

DB_NOINLINE std::uint32_t crc32c::Extend(std::uint32_t crc, const char* data, std::size_t n) {
    crc = ~crc;
    for (std::size_t i = 0; i < n; ++i) crc = crc_table.entries[(crc ^ static_cast<unsigned char>(data[i])) & 0xff] ^ (crc >> 8);
    return ~crc;
}
DB_NOINLINE std::uint32_t crc32c::Mask(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8ul; }

DB_NOINLINE void WritableFile::Append(const Slice& data) { buffer.append(data.data, data.size); }
DB_NOINLINE void WritableFile::Flush() {
    if (fd >= 0 && ::write(fd, buffer.data(), buffer.size()) < 0) failed = true;
    buffer.clear();
}
DB_NOINLINE void LogWriter::EmitPhysicalRecord(const char* data, std::size_t n) {
    char header[7];
    const std::uint32_t crc = crc32c::Mask(crc32c::Extend(0, data, n));
    std::memcpy(header, &crc, 4);
    header[4] = static_cast<char>(n & 0xff);
    header[5] = static_cast<char>(n >> 8);
    header[6] = 1;
    file->Append(Slice{header, 7});
    file->Append(Slice{data, n});
    file->Flush();
}
DB_NOINLINE void LogWriter::AddRecord(const Slice& record) { EmitPhysicalRecord(record.data, record.size); }

DB_NOINLINE void WriteBatch::Put(const Slice& key, const Slice& value) {
    rep.push_back(1);
    PutLengthPrefixedSlice(&rep, key);
    PutLengthPrefixedSlice(&rep, value);
}
DB_NOINLINE void DB::MakeRoomForWrite() {
    if (mem->arena.blocks.size() > kMaxBlocks) {  // the memtable is full: a fresh one (leveldb: switch + compaction)
        delete mem;
        mem = new MemTable;
    }
}
DB_NOINLINE void DB::InsertInto(const WriteBatch& batch, std::uint64_t number) {
    // One Put per batch here: the key and value follow the tag, each with its length.
    const char* p = batch.rep.data() + 1;
    const Slice key{p + 1, static_cast<unsigned char>(p[0])};
    const Slice value{key.data + key.size + 1, static_cast<unsigned char>(key.data[key.size])};
    mem->Add(number, key, value);
}
DB_NOINLINE void DB::Write(const WriteBatch& batch) {
    MakeRoomForWrite();
    log.AddRecord(Slice{batch.rep.data(), batch.rep.size()});
    InsertInto(batch, ++sequence);
}
DB_NOINLINE void DB::Put(const Slice& key, const Slice& value) {
    WriteBatch batch;
    batch.Put(key, value);
    Write(batch);
}

}  // namespace db
