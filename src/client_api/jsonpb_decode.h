// Request messages from JSON as etcd 3.4's gateway decodes them: golang/protobuf 1.3's
// jsonpb.Unmarshaler{AllowUnknownFields: true} over etcd's gogo-generated Go types, which
// leans on Go's encoding/json for every scalar. Field names are the proto names or their
// lowerCamelCase JSON names (the latter wins when both are given); 64-bit and 32-bit integers
// may be quoted; bytes are base64; enums are names or numbers; null leaves a field unset; unknown
// keys are ignored. The errors are Go's words: "json: cannot unmarshal number into Go value of
// type []uint8", "illegal base64 data at input byte 0", "unknown value \"FOO\" for enum
// etcdserverpb.RangeRequest_SortOrder" ...
#pragma once

#include <google/protobuf/message.h>

#include <string>
#include <string_view>

namespace etcdw::client_api {

// Decodes the JSON value `raw` (one valid value, as gojson::ReadFirstValue returns it) into
// `m`, which starts empty. Returns "" on success, otherwise the error text etcd's gateway
// answers with; `m` is then partly filled and must not be used.
std::string UnmarshalJsonPb(std::string_view raw, google::protobuf::Message* m);

}  // namespace etcdw::client_api
