#include "gateway.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "etcdw/common/go_json.h"
#include "go_json_decode.h"
#include "grpc_wire.h"
#include "jsonpb_decode.h"

namespace etcdw::client_api {

namespace {

// A gateway route: its path under /v3/ and the gRPC method ("etcdserverpb.KV", "Range").
struct Route {
  std::string_view path;
  std::string_view service;
  std::string_view method;
};

// etcd 3.4's etcdserverpb/gw/rpc.pb.gw.go, unary methods. Where two methods share a path
// (Hash and HashKV on /v3/maintenance/hash), the first registered answers, as there.
constexpr Route kRoutes[] = {
    {"/v3/kv/range", "etcdserverpb.KV", "Range"},
    {"/v3/kv/put", "etcdserverpb.KV", "Put"},
    {"/v3/kv/deleterange", "etcdserverpb.KV", "DeleteRange"},
    {"/v3/kv/txn", "etcdserverpb.KV", "Txn"},
    {"/v3/kv/compaction", "etcdserverpb.KV", "Compact"},
    {"/v3/lease/grant", "etcdserverpb.Lease", "LeaseGrant"},
    {"/v3/lease/revoke", "etcdserverpb.Lease", "LeaseRevoke"},
    {"/v3/kv/lease/revoke", "etcdserverpb.Lease", "LeaseRevoke"},
    {"/v3/lease/timetolive", "etcdserverpb.Lease", "LeaseTimeToLive"},
    {"/v3/kv/lease/timetolive", "etcdserverpb.Lease", "LeaseTimeToLive"},
    {"/v3/lease/leases", "etcdserverpb.Lease", "LeaseLeases"},
    {"/v3/kv/lease/leases", "etcdserverpb.Lease", "LeaseLeases"},
    {"/v3/cluster/member/add", "etcdserverpb.Cluster", "MemberAdd"},
    {"/v3/cluster/member/remove", "etcdserverpb.Cluster", "MemberRemove"},
    {"/v3/cluster/member/update", "etcdserverpb.Cluster", "MemberUpdate"},
    {"/v3/cluster/member/list", "etcdserverpb.Cluster", "MemberList"},
    {"/v3/cluster/member/promote", "etcdserverpb.Cluster", "MemberPromote"},
    {"/v3/maintenance/alarm", "etcdserverpb.Maintenance", "Alarm"},
    {"/v3/maintenance/status", "etcdserverpb.Maintenance", "Status"},
    {"/v3/maintenance/defragment", "etcdserverpb.Maintenance", "Defragment"},
    {"/v3/maintenance/hash", "etcdserverpb.Maintenance", "Hash"},
    {"/v3/maintenance/transfer-leadership", "etcdserverpb.Maintenance", "MoveLeader"},
    {"/v3/auth/enable", "etcdserverpb.Auth", "AuthEnable"},
    {"/v3/auth/disable", "etcdserverpb.Auth", "AuthDisable"},
    {"/v3/auth/authenticate", "etcdserverpb.Auth", "Authenticate"},
    {"/v3/auth/user/add", "etcdserverpb.Auth", "UserAdd"},
    {"/v3/auth/user/get", "etcdserverpb.Auth", "UserGet"},
    {"/v3/auth/user/list", "etcdserverpb.Auth", "UserList"},
    {"/v3/auth/user/delete", "etcdserverpb.Auth", "UserDelete"},
    {"/v3/auth/user/changepw", "etcdserverpb.Auth", "UserChangePassword"},
    {"/v3/auth/user/grant", "etcdserverpb.Auth", "UserGrantRole"},
    {"/v3/auth/user/revoke", "etcdserverpb.Auth", "UserRevokeRole"},
    {"/v3/auth/role/add", "etcdserverpb.Auth", "RoleAdd"},
    {"/v3/auth/role/get", "etcdserverpb.Auth", "RoleGet"},
    {"/v3/auth/role/list", "etcdserverpb.Auth", "RoleList"},
    {"/v3/auth/role/delete", "etcdserverpb.Auth", "RoleDelete"},
    {"/v3/auth/role/grant", "etcdserverpb.Auth", "RoleGrantPermission"},
    {"/v3/auth/role/revoke", "etcdserverpb.Auth", "RoleRevokePermission"},
    // Streams (Watch, LeaseKeepAlive, Snapshot): routed, not served by the gateway yet.
    {"/v3/watch", "etcdserverpb.Watch", "Watch"},
    {"/v3/lease/keepalive", "etcdserverpb.Lease", "LeaseKeepAlive"},
    {"/v3/maintenance/snapshot", "etcdserverpb.Maintenance", "Snapshot"},
};

const Route* FindRoute(std::string_view path) {
  for (const Route& r : kRoutes) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

GatewayAnswer ErrorAnswer(GatewayAnswer::Kind kind, const Status& st) {
  return {kind, HttpStatusFromCode(st.code()), GatewayErrorBody(st)};
}

// The route's method, or nullptr for "/v3beta/..." rewritten as "/v3/..." that has none.
const google::protobuf::MethodDescriptor* MethodOf(const Route& route) {
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
      std::string(route.service) + "." + std::string(route.method));
}

std::string V3Path(std::string_view path) {
  std::string p(path);
  if (p.rfind("/v3beta/", 0) == 0) p.replace(0, 8, "/v3/");
  return p;
}

// Decodes the request message at the start of `body` into `m` as grpc-gateway's decoder does
// (one json.Decoder.Decode, then jsonpb): OK with *end past it, or the error's text. A body of
// only white space (io.EOF) is OK with *end 0 and `m` untouched.
bool DecodeRequest(std::string_view body, google::protobuf::Message* m, size_t* end,
                   std::string* error) {
  const gojson::FirstValue first = gojson::ReadFirstValue(body);
  *end = first.end;
  if (first.result == gojson::FirstValue::kError) {
    *error = first.error;
    return false;
  }
  if (first.result == gojson::FirstValue::kNone) return true;
  *error = UnmarshalJsonPb(first.value, m);
  return error->empty();
}

// `m` as JSONPb{OrigName: true} writes it; false on failure.
bool EncodeJson(const google::protobuf::Message& m, std::string* out) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  return google::protobuf::util::MessageToJsonString(m, out, opts).ok();
}

// Parses the framed answer `framed` into `m`.
bool ParseFramed(std::string_view framed, google::protobuf::Message* m) {
  return framed.size() >= kMessagePrefixBytes &&
         m->ParseFromArray(framed.data() + kMessagePrefixBytes,
                           static_cast<int>(framed.size() - kMessagePrefixBytes));
}

}  // namespace

bool IsGatewayPath(std::string_view path) {
  return path.substr(0, 4) == "/v3/" || path.substr(0, 8) == "/v3beta/";
}

int HttpStatusFromCode(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kCanceled:
      return 408;
    case Code::kUnknown:
      return 500;
    case Code::kInvalidArgument:
      return 400;
    case Code::kDeadlineExceeded:
      return 504;
    case Code::kNotFound:
      return 404;
    case Code::kAlreadyExists:
      return 409;
    case Code::kPermissionDenied:
      return 403;
    case Code::kUnauthenticated:
      return 401;
    case Code::kResourceExhausted:
      return 429;
    case Code::kFailedPrecondition:
      return 412;  // grpc-gateway 1.9.5's; later versions answer 400
    case Code::kAborted:
      return 409;
    case Code::kOutOfRange:
      return 400;
    case Code::kUnimplemented:
      return 501;
    case Code::kInternal:
      return 500;
    case Code::kUnavailable:
      return 503;
    case Code::kDataLoss:
      return 500;
  }
  return 500;
}

std::string GatewayErrorBody(const Status& st) {
  const std::string msg = common::GoJsonQuote(st.message());
  return "{\"error\":" + msg + ",\"message\":" + msg +
         ",\"code\":" + std::to_string(static_cast<int>(st.code())) + "}";
}

CallContext GatewayCallContext(const Http1Request& req) {
  CallContext ctx;
  if (const std::string* t = req.Header("grpc-metadata-token")) ctx.token = *t;
  if (!ctx.token) {
    if (const std::string* a = req.Header("authorization")) ctx.token = *a;
  }
  if (const std::string* h = req.Header("grpc-metadata-hasleader"))
    ctx.require_leader = *h == "true";
  return ctx;
}

void ServeGateway(const MethodTable& methods, size_t max_message_bytes, const Http1Request& req,
                  std::function<void(GatewayAnswer)> done) {
  const Route* route = FindRoute(V3Path(req.path));
  if (!route) return done({GatewayAnswer::kNotFound, 404, "Not Found\n"});
  if (req.method != "POST") return done({GatewayAnswer::kNotAllowed, 405, "Method Not Allowed\n"});
  const std::string grpc_path =
      "/" + std::string(route->service) + "/" + std::string(route->method);
  const MethodTable::UnaryMethod* method = methods.Find(grpc_path);
  // The protobuf types of the method, from the descriptors compiled in with etcd's .proto.
  const google::protobuf::MethodDescriptor* md = MethodOf(*route);
  if (!method || !md || md->client_streaming() || md->server_streaming()) {
    // As the gRPC server answers a method it does not serve (Unimplemented, 501).
    return done(ErrorAnswer(GatewayAnswer::kGrpcError, UnknownMethod(methods, grpc_path)));
  }
  auto* factory = google::protobuf::MessageFactory::generated_factory();
  std::unique_ptr<google::protobuf::Message> request(
      factory->GetPrototype(md->input_type())->New());
  // Like grpc-gateway's decoder: the body's first JSON value; an empty body is an empty request;
  // fields the message does not have are ignored.
  size_t end = 0;
  if (std::string error; !DecodeRequest(req.body, request.get(), &end, &error)) {
    return done(ErrorAnswer(GatewayAnswer::kParseError, Status(Code::kInvalidArgument, error)));
  }
  const std::string payload = request->SerializeAsString();
  const CallStats stats = method->stats;
  stats.method->started.Add();
  if (auto checked = SingleMessage(FrameBytes(payload), max_message_bytes); !checked.ok()) {
    stats.Handled(checked.status());
    return done(ErrorAnswer(GatewayAnswer::kGrpcError, checked.status()));
  }
  stats.Received(payload.size());
  std::shared_ptr<google::protobuf::Message> response(
      factory->GetPrototype(md->output_type())->New());
  method->call(GatewayCallContext(req), payload,
               [stats, response, done = std::move(done)](const Status& st, std::string framed) {
                 if (st.ok()) stats.Sent(framed);
                 stats.Handled(st);
                 if (!st.ok()) return done(ErrorAnswer(GatewayAnswer::kGrpcError, st));
                 std::string out;
                 if (!ParseFramed(framed, response.get()) || !EncodeJson(*response, &out)) {
                   return done(ErrorAnswer(GatewayAnswer::kGrpcError,
                                           Status(Code::kInternal, "malformed response")));
                 }
                 done({GatewayAnswer::kMessage, 200, std::move(out)});
               });
}

bool GatewayStream::IsStreamPath(std::string_view path) {
  const Route* route = FindRoute(V3Path(path));
  const google::protobuf::MethodDescriptor* md = route ? MethodOf(*route) : nullptr;
  return md && (md->client_streaming() || md->server_streaming());
}

std::unique_ptr<GatewayStream> GatewayStream::Open(const MethodTable& methods,
                                                   const Http1Request& req,
                                                   std::shared_ptr<StreamSink> sink,
                                                   GatewayAnswer* refused) {
  const Route* route = FindRoute(V3Path(req.path));
  const google::protobuf::MethodDescriptor* md = route ? MethodOf(*route) : nullptr;
  if (!md) {
    *refused = {GatewayAnswer::kNotFound, 404, "Not Found\n"};
    return nullptr;
  }
  if (req.method != "POST") {
    *refused = {GatewayAnswer::kNotAllowed, 405, "Method Not Allowed\n"};
    return nullptr;
  }
  const std::string grpc_path =
      "/" + std::string(route->service) + "/" + std::string(route->method);
  const MethodTable::OpenStream* open = methods.FindStream(grpc_path);
  if (!open) {
    *refused = ErrorAnswer(GatewayAnswer::kGrpcError, UnknownMethod(methods, grpc_path));
    return nullptr;
  }
  // The client's messages: the body's JSON values up to the first that does not parse (the
  // first one refuses the call), as grpc-gateway's decoding loop.
  auto* factory = google::protobuf::MessageFactory::generated_factory();
  std::vector<std::string> messages;
  std::string_view body = req.body;
  while (true) {
    std::unique_ptr<google::protobuf::Message> m(factory->GetPrototype(md->input_type())->New());
    size_t end = 0;
    std::string error;
    if (!DecodeRequest(body, m.get(), &end, &error)) {
      if (messages.empty()) {
        // Not a gRPC status there: grpc-gateway answers it as Unknown (500, code 2).
        *refused = ErrorAnswer(GatewayAnswer::kParseError, Status(Code::kUnknown, error));
        return nullptr;
      }
      break;
    }
    if (end == 0) break;  // io.EOF: the client's messages are all in
    messages.push_back(m->SerializeAsString());
    body.remove_prefix(end);
    // A server stream (Snapshot) takes one request message.
    if (!md->client_streaming()) break;
  }
  if (!md->client_streaming() && messages.empty()) messages.emplace_back();
  std::unique_ptr<GatewayStream> gs(new GatewayStream());
  gs->response_.reset(factory->GetPrototype(md->output_type())->New());
  gs->call_ = (*open)(GatewayCallContext(req), std::move(sink));
  if (gs->call_) {
    for (const std::string& m : messages) gs->call_->OnMessage(m);
    gs->call_->OnHalfClose();
  }
  return gs;
}

GatewayStream::~GatewayStream() { Gone(); }

void GatewayStream::Gone() {
  if (call_) {
    std::unique_ptr<StreamCall> call = std::move(call_);
    call->OnGone();
  }
}

std::string GatewayStream::ResultLine(std::string_view framed) const {
  std::unique_ptr<google::protobuf::Message> m(response_->New());
  std::string json;
  if (!ParseFramed(framed, m.get()) || !EncodeJson(*m, &json)) {
    return EndLine(Status(Code::kInternal, "malformed response"));
  }
  return "{\"result\":" + json + "}\n";
}

std::string GatewayStream::EndLine(const Status& st) {
  if (st.ok()) return "";
  const int http = HttpStatusFromCode(st.code());
  static constexpr std::pair<int, std::string_view> kTexts[] = {
      {400, "Bad Request"},         {401, "Unauthorized"},      {403, "Forbidden"},
      {404, "Not Found"},           {408, "Request Timeout"},   {409, "Conflict"},
      {412, "Precondition Failed"}, {429, "Too Many Requests"}, {501, "Not Implemented"},
      {503, "Service Unavailable"}, {504, "Gateway Timeout"}};
  std::string_view text = "Internal Server Error";
  for (const auto& [code, t] : kTexts) {
    if (code == http) text = t;
  }
  return "{\"error\":{\"grpc_code\":" + std::to_string(static_cast<int>(st.code())) +
         ",\"http_code\":" + std::to_string(http) +
         ",\"message\":" + common::GoJsonQuote(st.message()) +
         ",\"http_status\":" + common::GoJsonQuote(text) + "}}";
}

}  // namespace etcdw::client_api
