// The little XML the object stores' APIs need (private to src/sidecar): finding elements by name
// in a response (S3's ListBucketResult, InitiateMultipartUploadResult and Error; Azure's
// EnumerationResults and Error) and escaping text for a request body (S3's
// CompleteMultipartUpload, Azure's BlockList). Not a general parser: it tolerates the XML
// declaration, comments, CDATA, namespace prefixes and attributes, and never fails — a
// malformed document just yields fewer elements.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace etcdw::sidecar::objxml {

// The raw content of every element named `name` (a namespace prefix is ignored), in document
// order; an element nested in a same-named one is part of the outer one's content. A
// self-closing element has empty content; an element without its end tag is dropped.
std::vector<std::string_view> Elements(std::string_view xml, std::string_view name);

// The character data of an element's content: entities and character references decoded,
// CDATA sections unwrapped, child tags and comments dropped.
std::string Text(std::string_view content);

// Text() of the first element named `name`, or nullopt when there is none.
std::optional<std::string> FirstText(std::string_view xml, std::string_view name);

// `text` with & < > " ' escaped, for element content and attribute values.
std::string Escape(std::string_view text);

}  // namespace etcdw::sidecar::objxml
