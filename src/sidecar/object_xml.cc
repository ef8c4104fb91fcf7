#include "object_xml.h"

#include <cstdint>

namespace etcdw::sidecar::objxml {

namespace {

constexpr size_t kNpos = std::string_view::npos;

struct Tag {
  size_t begin = 0;  // the '<'
  size_t end = 0;    // one past the '>'
  std::string_view name;
  bool closing = false;
  bool self_closing = false;
};

std::string_view LocalName(std::string_view name) {
  size_t colon = name.rfind(':');
  return colon == kNpos ? name : name.substr(colon + 1);
}

// The '>' ending a tag that starts at `lt`, skipping quoted attribute values.
size_t TagEnd(std::string_view xml, size_t lt) {
  char quote = 0;
  for (size_t i = lt + 1; i < xml.size(); ++i) {
    char c = xml[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      return i;
    }
  }
  return kNpos;
}

// The next element tag (start, end or empty-element) at or after `pos`, skipping the XML
// declaration, processing instructions, comments, CDATA sections and DOCTYPE.
std::optional<Tag> NextTag(std::string_view xml, size_t pos) {
  while (true) {
    size_t lt = xml.find('<', pos);
    if (lt == kNpos) return std::nullopt;
    std::string_view rest = xml.substr(lt);
    const char* close = nullptr;
    if (rest.starts_with("<!--")) {
      close = "-->";
    } else if (rest.starts_with("<![CDATA[")) {
      close = "]]>";
    } else if (rest.starts_with("<?")) {
      close = "?>";
    } else if (rest.starts_with("<!")) {
      close = ">";
    }
    if (close != nullptr) {
      size_t e = xml.find(close, lt + 2);
      if (e == kNpos) return std::nullopt;
      pos = e + std::string_view(close).size();
      continue;
    }
    size_t gt = TagEnd(xml, lt);
    if (gt == kNpos) return std::nullopt;
    Tag t;
    t.begin = lt;
    t.end = gt + 1;
    t.closing = lt + 1 < xml.size() && xml[lt + 1] == '/';
    size_t name_begin = lt + 1 + (t.closing ? 1 : 0);
    size_t name_end = xml.find_first_of(" \t\r\n/>", name_begin);
    t.name = xml.substr(name_begin, name_end - name_begin);
    t.self_closing = !t.closing && xml[gt - 1] == '/';
    return t;
  }
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes the reference "&...;" body `ref` (without '&' and ';'); false if unknown.
bool DecodeReference(std::string_view ref, std::string& out) {
  if (ref == "amp") return out += '&', true;
  if (ref == "lt") return out += '<', true;
  if (ref == "gt") return out += '>', true;
  if (ref == "quot") return out += '"', true;
  if (ref == "apos") return out += '\'', true;
  if (ref.size() < 2 || ref[0] != '#') return false;
  bool hex = ref[1] == 'x' || ref[1] == 'X';
  std::string_view digits = ref.substr(hex ? 2 : 1);
  if (digits.empty() || digits.size() > 8) return false;
  uint32_t cp = 0;
  for (char c : digits) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0) return false;
    cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
  }
  if (cp > 0x10FFFF) return false;
  AppendUtf8(out, cp);
  return true;
}

}  // namespace

std::vector<std::string_view> Elements(std::string_view xml, std::string_view name) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (auto tag = NextTag(xml, pos)) {
    pos = tag->end;
    if (tag->closing || LocalName(tag->name) != name) continue;
    if (tag->self_closing) {
      out.push_back(xml.substr(tag->end, 0));
      continue;
    }
    int depth = 1;
    size_t p = tag->end;
    while (depth > 0) {
      auto inner = NextTag(xml, p);
      if (!inner) return out;  // no end tag: the rest of the document is not trustworthy
      p = inner->end;
      if (inner->self_closing || LocalName(inner->name) != name) continue;
      depth += inner->closing ? -1 : 1;
      if (depth == 0) out.push_back(xml.substr(tag->end, inner->begin - tag->end));
    }
    pos = p;
  }
  return out;
}

std::string Text(std::string_view content) {
  std::string out;
  out.reserve(content.size());
  size_t i = 0;
  while (i < content.size()) {
    std::string_view rest = content.substr(i);
    if (rest.starts_with("<![CDATA[")) {
      size_t e = content.find("]]>", i + 9);
      if (e == kNpos) e = content.size();
      out.append(content.substr(i + 9, e - (i + 9)));
      i = e + 3;
    } else if (rest.starts_with("<!--")) {
      size_t e = content.find("-->", i + 4);
      i = e == kNpos ? content.size() : e + 3;
    } else if (content[i] == '<') {
      size_t e = TagEnd(content, i);
      i = e == kNpos ? content.size() : e + 1;
    } else if (content[i] == '&') {
      size_t semi = content.find(';', i + 1);
      if (semi != kNpos && semi - i <= 12 &&
          DecodeReference(content.substr(i + 1, semi - i - 1), out)) {
        i = semi + 1;
      } else {
        out += '&';
        ++i;
      }
    } else {
      out += content[i++];
    }
  }
  return out;
}

std::optional<std::string> FirstText(std::string_view xml, std::string_view name) {
  auto all = Elements(xml, name);
  if (all.empty()) return std::nullopt;
  return Text(all.front());
}

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace etcdw::sidecar::objxml
