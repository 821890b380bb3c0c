// og_simdjson.h over simdjson's DOM parser (Debian's libsimdjson-dev).

#include "og_simdjson.h"

#include <memory>
#include <new>
#include <simdjson.h>

static_assert(OG_JSON_SUCCESS == simdjson::SUCCESS, "simdjson error codes moved");
static_assert(OG_JSON_CAPACITY == simdjson::CAPACITY, "simdjson error codes moved");
static_assert(OG_JSON_MEMALLOC == simdjson::MEMALLOC, "simdjson error codes moved");

/// A document outlives the parser that filled it: the parser's working buffers (structural
/// indexes, the padded copy of the input) are freed as soon as parsing ends.
///
/// A document made by og_json_new keeps its parser too, so that parsing into it again
/// (og_json_parse_into) reuses both sets of buffers.
struct og_json_doc {
    simdjson::dom::document document;
    std::unique_ptr<simdjson::dom::parser> parser;
};

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
    return parse_into(*document->parser, document->document, bytes, length);
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
