// Feeds the S3 response XML reader arbitrary documents, looking up the elements the S3 store
// reads, and round-trips text through Escape: an escaped string inside an element reads back as
// itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sidecar/s3_xml.h"

namespace {

namespace s3xml = etcdw::sidecar::s3xml;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "s3_xml_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  for (std::string_view name : {"Contents", "Key", "Error", "Code", "UploadId"}) {
    for (std::string_view content : s3xml::Elements(xml, name)) {
      if (content.data() < xml.data() ||
          content.data() + content.size() > xml.data() + xml.size()) {
        Fail("an element's content is not within the document");
      }
      (void)s3xml::Text(content);
    }
    (void)s3xml::FirstText(xml, name);
  }

  const std::string escaped = s3xml::Escape(xml);
  if (s3xml::Text(escaped) != xml) Fail("Text(Escape(x)) != x");
  const std::string doc =
      "<?xml version=\"1.0\"?><Error><Message>" + escaped + "</Message></Error>";
  const auto message = s3xml::FirstText(doc, "Message");
  if (!message || *message != xml) Fail("an escaped message does not read back");
  return 0;
}
