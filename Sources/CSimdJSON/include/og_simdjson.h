// A C interface to simdjson's DOM parser, for ObjectGraph's JSON mapping (JSONDocument.swift).
//
// The header is plain C so that Swift imports it without C++ interoperability; the C++ lives in
// og_simdjson.cpp. A parsed document is exposed as simdjson's tape (doc/tape.md in simdjson):
//
//   tape[0]            'r' << 56 | index of the final 'r' word; the root value starts at index 1
//   '[' and '{'        payload: low 32 bits = index just past the matching ']' or '}',
//                      bits 32..55 = element (or field) count, saturated at 0xFFFFFF
//   ']' and '}'        payload: index of the matching '[' or '{'
//   'l', 'u', 'd'      followed by one word holding the int64, uint64 or double bits
//   '"'                payload: offset into the string buffer, which holds a 4-byte
//                      little-endian length, the UTF-8 bytes (escapes decoded), then a NUL
//   't', 'f', 'n'      true, false, null
//
// The tag is the word's top byte, the payload its low 56 bits. Object fields are a key string
// followed by its value.

#ifndef OG_SIMDJSON_H
#define OG_SIMDJSON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A parsed JSON document: its tape and string buffer. Free with og_json_free.
typedef struct og_json_doc og_json_doc;

/// The simdjson error codes callers tell apart (simdjson::error_code values).
enum {
    /// No error.
    OG_JSON_SUCCESS = 0,
    /// The document is larger than simdjson can parse (4 GiB).
    OG_JSON_CAPACITY = 1,
    /// Memory for the document could not be allocated.
    OG_JSON_MEMALLOC = 2,
};

/// Parses `length` bytes at `bytes`. Any buffer will do: a large one (4 MiB or more) is read in
/// place when the padding simdjson reads past the end lies on its last page, and copied into
/// padded memory otherwise, as a small one always is. A large one's buffers are marked for
/// transparent huge pages of `huge_page_size` bytes (0: left as they come). Returns the
/// document, or NULL with simdjson's error code in `*error_code`. Never throws.
og_json_doc *og_json_parse(const void *bytes, size_t length, size_t huge_page_size, int *error_code);

/// An empty document with its own parser, for og_json_parse_into: parsing into the same
/// document again reuses its buffers (allocated and paged in once). NULL when out of memory.
og_json_doc *og_json_new(void);

/// Parses `length` bytes at `bytes` into `document`, replacing what it held, and returns
/// simdjson's error code (OG_JSON_SUCCESS when the tape is ready). Large inputs are read and
/// their buffers marked as og_json_parse does. Never throws.
int og_json_parse_into(og_json_doc *document, const void *bytes, size_t length, size_t huge_page_size);

/// simdjson's message for `code` (a static string).
const char *og_json_error_message(int code);

/// The nesting depth simdjson's parser accepts (arrays and objects inside each other).
size_t og_json_max_depth(void);

/// The document's tape; index 0 is the root 'r' word. Valid until og_json_free.
const uint64_t *og_json_tape(const og_json_doc *document);

/// The document's string buffer, which the tape's string words point into.
const uint8_t *og_json_string_buffer(const og_json_doc *document);

/// Frees a document from og_json_parse (NULL is ignored).
void og_json_free(og_json_doc *document);

#ifdef __cplusplus
}
#endif

#endif
