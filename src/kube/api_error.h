// The Status of an API answer that is not a success, with the API's own words (client.h states
// the contract: the codes, and the message "<METHOD> <path>: <message> (HTTP <code>)").
#pragma once

#include <string>

#include "etcdw/common/status.h"

namespace etcdw::kube {

// The code for an HTTP status and the Status object's `reason` ("" when there is none).
Code CodeForHttpStatus(int http_status, const std::string& reason);

// `body` is the answer: a Status object's `message` is used when there is one, else the text
// itself (shortened), else the HTTP reason phrase.
Status ApiError(const std::string& method, const std::string& path, int http_status,
                const std::string& body);

}  // namespace etcdw::kube
