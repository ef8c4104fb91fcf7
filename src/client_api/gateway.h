// etcd's gRPC gateway: the client API as JSON over HTTP (POST /v3/kv/range {"key":"Zm9v"}), as
// etcd 3.4 serves it with grpc-gateway v1 (etcd's generated rpc.pb.gw.go routes, the JSONPb
// marshaler with OrigName: proto field names, 64-bit integers as strings, bytes as base64, enum
// names, zero values left out). A request is decoded into the method's protobuf request,
// serialized, and handed to the same unary method the gRPC server calls (MethodTable); its
// framed answer is decoded and written back as JSON, or its error as grpc-gateway's
// {"error","message","code"} with the HTTP status grpc-gateway maps the gRPC code to.
#pragma once

#include <google/protobuf/message.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "call_context.h"
#include "etcdw/common/status.h"
#include "http1_request.h"
#include "method_table.h"

namespace etcdw::client_api {

// What the gateway answers.
struct GatewayAnswer {
  enum Kind {
    kMessage,     // 200, the response message as JSON
    kGrpcError,   // the call's error; grpc-gateway streams it (chunked, with a gRPC trailer)
    kParseError,  // the request body is not the method's JSON: 400 code 3
    kNotFound,    // no route: Go's "Not Found\n" (text)
    kNotAllowed,  // a route asked with another method than POST: "Method Not Allowed\n" (text)
  };
  Kind kind = kMessage;
  int code = 200;  // the HTTP status
  std::string body;
};

// Whether `path` belongs to the gateway (etcd hands "/v3/" to it; "/v3beta/..." is rewritten to
// "/v3/..." first, as etcd's access controller does).
bool IsGatewayPath(std::string_view path);

// The HTTP status grpc-gateway v1 (1.9.5, etcd 3.4's) answers a gRPC code with.
int HttpStatusFromCode(Code code);

// grpc-gateway's error body: {"error":msg,"message":msg,"code":N}.
std::string GatewayErrorBody(const Status& st);

// The gateway's CallContext from the HTTP headers: the Authorization header is the auth token
// (grpc-gateway forwards it as metadata "authorization", which etcd reads); headers
// "Grpc-Metadata-<key>" are metadata <key> ("Grpc-Metadata-Hasleader: true").
CallContext GatewayCallContext(const Http1Request& req);

// Answers the unary gateway request `req` (IsGatewayPath) by calling `methods`; requests whose
// protobuf is over `max_message_bytes` are refused as the gRPC server refuses them. `done` is
// called once, from any thread.
void ServeGateway(const MethodTable& methods, size_t max_message_bytes, const Http1Request& req,
                  std::function<void(GatewayAnswer)> done);

// One streaming gateway call (/v3/watch, /v3/lease/keepalive, /v3/maintenance/snapshot) over
// HTTP/1.1, as grpc-gateway v1 runs them: the request body holds the client's messages as JSON
// values one after the other (a first one that does not parse refuses the call; the messages
// stop at a later one that does not), all sent, then the client's side closed; each response
// message is written as a line {"result":{...}}, an error as {"error":{"grpc_code",
// "http_code","message","http_status"}}. Owned and called by the connection's event loop.
class GatewayStream {
 public:
  // Whether `path` (under /v3/ or /v3beta/) is a streaming route.
  static bool IsStreamPath(std::string_view path);
  // Opens the stream `req` asks for (IsStreamPath; POST), its answers going to `sink`; on
  // refusal, nullptr and *refused (as the unary gateway answers).
  static std::unique_ptr<GatewayStream> Open(const MethodTable& methods, const Http1Request& req,
                                             std::shared_ptr<StreamSink> sink,
                                             GatewayAnswer* refused);
  ~GatewayStream();

  // The line the client gets for a framed response message / for the stream's end ("" when
  // it ended well).
  std::string ResultLine(std::string_view framed) const;
  static std::string EndLine(const Status& st);
  // The connection is gone.
  void Gone();

 private:
  GatewayStream() = default;
  std::unique_ptr<StreamCall> call_;
  std::unique_ptr<google::protobuf::Message> response_;  // the type of the answers
};

}  // namespace etcdw::client_api
