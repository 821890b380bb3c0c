// og_simdjson.h over simdjson's DOM parser (Debian's libsimdjson-dev).

#include "og_simdjson.h"

#include <cstring>
#include <memory>
#include <new>
#include <simdjson.h>
#include <sys/mman.h>
#include <unistd.h>

static_assert(OG_JSON_SUCCESS == simdjson::SUCCESS, "simdjson error codes moved");
static_assert(OG_JSON_CAPACITY == simdjson::CAPACITY, "simdjson error codes moved");
static_assert(OG_JSON_MEMALLOC == simdjson::MEMALLOC, "simdjson error codes moved");

/// A document outlives the parser that filled it: the parser's working buffers (structural
/// indexes, the padded copy of the input) are freed as soon as parsing ends.
///
/// A document made by og_json_new keeps its parser too, so that parsing into it again
/// (og_json_parse_into) reuses both sets of buffers. Only the document's buffers (the tape and
/// the strings, which the mapping reads) stay paged in between parses: the working buffers (the
/// padded copy of the input, here the document's own, and the structural indexes) are
/// needed only while parsing, and their pages are given back as soon as it ends, so that a
/// kept parser holds about half the memory it would (for a 34 MiB document, about 45 MiB
/// less while the mapping runs and afterwards).
struct og_json_doc {
    simdjson::dom::document document;
    std::unique_ptr<simdjson::dom::parser> parser;
    std::unique_ptr<char[]> padded;
    size_t padded_capacity = 0;
};

/// Gives the whole pages inside [start, start + length) back to the system; their contents
/// read as zeros afterwards, and the memory stays allocated. Buffers under 1 MiB are left as
/// they are: the many small documents a kept parser also serves (a list attribute's JSON, a
/// connection's key list, parsed once per object) would pay a system call and fresh pages each
/// time for memory that does not matter.
static void release_pages(void *start, size_t length) {
    if (start == nullptr || length < (size_t(1) << 20)) return;
    long page_size = sysconf(_SC_PAGESIZE);
    if (page_size <= 0) return;
    uintptr_t page = static_cast<uintptr_t>(page_size);
    uintptr_t begin = (reinterpret_cast<uintptr_t>(start) + page - 1) & ~(page - 1);
    uintptr_t end = (reinterpret_cast<uintptr_t>(start) + length) & ~(page - 1);
    if (end > begin) madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

/// Inputs from this size up get buffers allocated ahead of the parse and backed by huge pages
/// where the kernel offers them (see prepare_large).
static constexpr size_t large_input = size_t(4) << 20;

/// Asks for transparent huge pages of `huge` bytes (0: none) over the whole huge pages inside
/// [start, start + length). Where the kernel offers them only on request (`madvise` in
/// /sys/kernel/mm/transparent_hugepage/enabled, Debian's default), each huge page the parse
/// first writes then costs one fault instead of 512: for a 34 MiB document, the faults on the
/// tape, the strings and the structural indexes were about half of the parse.
static void advise_huge_pages(void *start, size_t length, size_t huge) {
    if (start == nullptr || huge == 0 || (huge & (huge - 1)) != 0) return;
    uintptr_t mask = uintptr_t(huge) - 1;
    uintptr_t begin = (reinterpret_cast<uintptr_t>(start) + mask) & ~mask;
    uintptr_t end = (reinterpret_cast<uintptr_t>(start) + length) & ~mask;
    if (end > begin) madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
}

/// For a large input, allocates the buffers simdjson would allocate inside the parse (the
/// document's tape and strings, the parser's structural indexes), as simdjson sizes them, and
/// advises huge pages of `huge` bytes over them before anything is written. They are written
/// from their start, as far as the document needs, so at most the last huge page touched in
/// each holds memory the parse does not use. Smaller inputs are left to simdjson. Returns
/// simdjson's error code.
static int prepare_large(simdjson::dom::parser &parser, simdjson::dom::document &document, size_t length, size_t huge) {
    if (length < large_input || length > parser.max_capacity()) return simdjson::SUCCESS;
    if (document.capacity() < length) {
        if (auto error = document.allocate(length)) return error;
        // The sizes simdjson's document::allocate gives them (or less: the advice only ever
        // covers memory inside the allocations).
        advise_huge_pages(document.tape.get(), (length + 3) * sizeof(uint64_t), huge);
        advise_huge_pages(document.string_buf.get(), 5 * length / 3, huge);
    }
    if (parser.capacity() < length) {
        if (auto error = parser.allocate(length, parser.max_depth())) return error;
        if (auto *implementation = parser.implementation.get()) {
            advise_huge_pages(implementation->structural_indexes.get(), length * sizeof(uint32_t), huge);
        }
    }
    return simdjson::SUCCESS;
}

/// Whether simdjson may read the input in place: it reads up to SIMDJSON_PADDING bytes past
/// the end (what they hold does not matter), which is safe when those bytes lie on the page
/// of the input's last byte, as simdjson's documentation shows ("Padding and Temporary
/// Copies"). Otherwise the input is copied into padded memory first. A large input saves the
/// copy and the fresh pages it would be written to; the last page is shared with its end in
/// all but about 1 input in 64.
static bool readable_past_end(const void *bytes, size_t length) {
    long page_size = sysconf(_SC_PAGESIZE);
    if (bytes == nullptr || length == 0 || page_size <= 0) return false;
    uintptr_t last = reinterpret_cast<uintptr_t>(bytes) + length - 1;
    return (last % uintptr_t(page_size)) + simdjson::SIMDJSON_PADDING < uintptr_t(page_size);
}

/// Parses into `document` with `parser`; never throws.
static int parse_into(
    simdjson::dom::parser &parser, simdjson::dom::document &document, const void *bytes, size_t length, size_t huge) {
    try {
        if (auto error = prepare_large(parser, document, length, huge)) return error;
        // An empty buffer may come with a null pointer; simdjson copies nothing from it then.
        static const uint8_t empty = 0;
        const uint8_t *input = bytes != nullptr ? static_cast<const uint8_t *>(bytes) : &empty;
        bool in_place = length >= large_input && readable_past_end(bytes, length);
        return parser.parse_into_document(document, input, length, !in_place).error();
    } catch (...) {
        return simdjson::UNEXPECTED_ERROR;
    }
}

og_json_doc *og_json_parse(const void *bytes, size_t length, size_t huge_page_size, int *error_code) {
    std::unique_ptr<og_json_doc> result(new (std::nothrow) og_json_doc());
    if (!result) {
        *error_code = simdjson::MEMALLOC;
        return nullptr;
    }
    simdjson::dom::parser parser;
    *error_code = parse_into(parser, result->document, bytes, length, huge_page_size);
    return *error_code == simdjson::SUCCESS ? result.release() : nullptr;
}

og_json_doc *og_json_new(void) {
    try {
        std::unique_ptr<og_json_doc> result(new (std::nothrow) og_json_doc());
        if (!result) return nullptr;
        result->parser.reset(new (std::nothrow) simdjson::dom::parser());
        if (!result->parser) return nullptr;
        return result.release();
    } catch (...) {
        return nullptr;
    }
}

int og_json_parse_into(og_json_doc *document, const void *bytes, size_t length, size_t huge_page_size) {
    if (!document->parser) return simdjson::UNEXPECTED_ERROR;
    simdjson::dom::parser &parser = *document->parser;
    if (length >= large_input && readable_past_end(bytes, length)) {
        // Read in place: no copy, so nothing of the document's own to give back but the
        // structural indexes.
        int status = parse_into(parser, document->document, bytes, length, huge_page_size);
        if (auto *implementation = parser.implementation.get()) {
            release_pages(implementation->structural_indexes.get(), implementation->capacity() * sizeof(uint32_t));
        }
        return status;
    }
    // The padded copy simdjson needs, in a buffer of the document's own, so that its pages
    // can be given back after the parse (the parser's own copy is out of reach).
    if (document->padded_capacity < length || !document->padded) {
        document->padded.reset(simdjson::internal::allocate_padded_buffer(length));
        if (!document->padded) {
            document->padded_capacity = 0;
            return simdjson::MEMALLOC;
        }
        document->padded_capacity = length;
        if (length >= large_input) advise_huge_pages(document->padded.get(), length, huge_page_size);
    }
    char *padded = document->padded.get();
    if (length > 0 && bytes != nullptr) std::memcpy(padded, bytes, length);
    std::memset(padded + length, 0, simdjson::SIMDJSON_PADDING);
    int status;
    try {
        status = prepare_large(parser, document->document, length, huge_page_size);
        if (status == simdjson::SUCCESS) {
            status = parser.parse_into_document(
                document->document, reinterpret_cast<const uint8_t *>(padded), length, false).error();
        }
    } catch (...) {
        status = simdjson::UNEXPECTED_ERROR;
    }
    release_pages(padded, document->padded_capacity + simdjson::SIMDJSON_PADDING);
    if (auto *implementation = parser.implementation.get()) {
        release_pages(implementation->structural_indexes.get(), implementation->capacity() * sizeof(uint32_t));
    }
    return status;
}

const char *og_json_error_message(int code) {
    if (code < 0 || code >= simdjson::NUM_ERROR_CODES) {
        return "unknown simdjson error";
    }
    return simdjson::error_message(static_cast<simdjson::error_code>(code));
}

size_t og_json_max_depth(void) { return simdjson::DEFAULT_MAX_DEPTH; }

const uint64_t *og_json_tape(const og_json_doc *document) { return document->document.tape.get(); }

const uint8_t *og_json_string_buffer(const og_json_doc *document) { return document->document.string_buf.get(); }

void og_json_free(og_json_doc *document) { delete document; }
