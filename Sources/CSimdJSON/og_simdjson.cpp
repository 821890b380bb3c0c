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

/// Parses into `document` with `parser`; never throws.
static int parse_into(simdjson::dom::parser &parser, simdjson::dom::document &document, const void *bytes, size_t length) {
    try {
        // An empty buffer may come with a null pointer; simdjson copies nothing from it then.
        static const uint8_t empty = 0;
        return parser.parse_into_document(document, bytes != nullptr ? static_cast<const uint8_t *>(bytes) : &empty, length, true)
            .error();
    } catch (...) {
        return simdjson::UNEXPECTED_ERROR;
    }
}

og_json_doc *og_json_parse(const void *bytes, size_t length, int *error_code) {
    std::unique_ptr<og_json_doc> result(new (std::nothrow) og_json_doc());
    if (!result) {
        *error_code = simdjson::MEMALLOC;
        return nullptr;
    }
    simdjson::dom::parser parser;
    *error_code = parse_into(parser, result->document, bytes, length);
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

int og_json_parse_into(og_json_doc *document, const void *bytes, size_t length) {
    if (!document->parser) return simdjson::UNEXPECTED_ERROR;
    // The padded copy simdjson needs, in a buffer of the document's own, so that its pages
    // can be given back after the parse (the parser's own copy is out of reach).
    if (document->padded_capacity < length || !document->padded) {
        document->padded.reset(simdjson::internal::allocate_padded_buffer(length));
        if (!document->padded) {
            document->padded_capacity = 0;
            return simdjson::MEMALLOC;
        }
        document->padded_capacity = length;
    }
    char *padded = document->padded.get();
    if (length > 0 && bytes != nullptr) std::memcpy(padded, bytes, length);
    std::memset(padded + length, 0, simdjson::SIMDJSON_PADDING);
    int status;
    try {
        status = document->parser->parse_into_document(
            document->document, reinterpret_cast<const uint8_t *>(padded), length, false).error();
    } catch (...) {
        status = simdjson::UNEXPECTED_ERROR;
    }
    release_pages(padded, document->padded_capacity + simdjson::SIMDJSON_PADDING);
    if (auto *implementation = document->parser->implementation.get()) {
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
