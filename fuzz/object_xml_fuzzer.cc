// Feeds the object stores' response XML reader arbitrary documents, looking up the elements the
// S3 and ABS stores read, and round-trips text through Escape: an escaped string inside an element
// reads back as itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sidecar/object_xml.h"

namespace {

namespace objxml = etcdw::sidecar::objxml;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "object_xml_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  for (std::string_view name :
       {"Contents", "Key", "Error", "Code", "UploadId", "Blob", "Name", "NextMarker"}) {
    for (std::string_view content : objxml::Elements(xml, name)) {
      if (content.data() < xml.data() ||
          content.data() + content.size() > xml.data() + xml.size()) {
        Fail("an element's content is not within the document");
      }
      (void)objxml::Text(content);
    }
    (void)objxml::FirstText(xml, name);
  }

  const std::string escaped = objxml::Escape(xml);
  if (objxml::Text(escaped) != xml) Fail("Text(Escape(x)) != x");
  const std::string doc =
      "<?xml version=\"1.0\"?><Error><Message>" + escaped + "</Message></Error>";
  const auto message = objxml::FirstText(doc, "Message");
  if (!message || *message != xml) Fail("an escaped message does not read back");
  return 0;
}
