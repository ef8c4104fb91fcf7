// Checks of cluster requests that depend on the request alone, made before they are proposed, as
// etcd 3.4's ClusterServer makes them. Pure functions: no member state.
#pragma once

#include <google/protobuf/repeated_field.h>

#include <string>
#include <vector>

#include "etcdw/common/status.h"

namespace etcdw::member {

// The peer URLs of a MemberAdd or MemberUpdate request, as etcd reads them (types.NewURLs): each
// must parse by common::ParseUrl (blanks around it trimmed, scheme http or https, host:port, no
// path); none given, or any that does not parse, is MemberBadURLs. The URLs are returned written
// as "scheme://host:port" and sorted (NewURLs sorts them), as the member records and answers them.
Result<std::vector<std::string>> CheckPeerUrls(
    const google::protobuf::RepeatedPtrField<std::string>& peer_urls);

}  // namespace etcdw::member
