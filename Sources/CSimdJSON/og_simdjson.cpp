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
struct og_json_doc {
    simdjson::dom::document document;
};

og_json_doc *og_json_parse(const void *bytes, size_t length, int *error_code) {
    try {
        std::unique_ptr<og_json_doc> result(new (std::nothrow) og_json_doc());
        if (!result) {
            *error_code = simdjson::MEMALLOC;
            return nullptr;
        }
        // An empty buffer may come with a null pointer; simdjson copies nothing from it then.
        static const uint8_t empty = 0;
        simdjson::dom::parser parser;
        simdjson::error_code error =
            parser.parse_into_document(result->document, bytes != nullptr ? static_cast<const uint8_t *>(bytes) : &empty, length, true)
                .error();
        *error_code = error;
        return error == simdjson::SUCCESS ? result.release() : nullptr;
    } catch (...) {
        *error_code = simdjson::UNEXPECTED_ERROR;
        return nullptr;
    }
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
