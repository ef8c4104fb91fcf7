#include "etcdw/member/request_checks.h"

#include <algorithm>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/url.h"

namespace etcdw::member {

Result<std::vector<std::string>> CheckPeerUrls(
    const google::protobuf::RepeatedPtrField<std::string>& peer_urls) {
  if (peer_urls.empty()) return errors::MemberBadURLs();
  std::vector<std::string> out;
  out.reserve(peer_urls.size());
  for (const std::string& u : peer_urls) {
    Result<common::Url> url = common::ParseUrl(u);
    if (!url.ok()) return errors::MemberBadURLs();
    out.push_back(url->ToString());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace etcdw::member
