#include "azurite.h"

#include <cstdlib>
#include <filesystem>

#include "etcdw/common/hash.h"
#include "servers.h"
#include "shared_key.h"

namespace etcdw::testing {

std::string Azurite::Binary() {
  const char* env = std::getenv("ETCDW_AZURITE");
  return env != nullptr && *env != '\0' ? env : ETCDW_AZURITE;
}

Azurite::~Azurite() { proc_.Kill(); }

bool Azurite::Start() {
  const std::string binary = Binary();
  if (!std::filesystem::exists(binary)) {
    WriteFile(dir_.File("azurite.log"),
              "azurite-blob not found at \"" + binary +
                  "\": run scripts/install-deps.sh or set ETCDW_AZURITE\n");
    return false;
  }
  port_ = FreePort();
  // --location: its data in this test's temporary directory (Azurite refuses
  // --inMemoryPersistence together with a location, and without one it writes to the working
  // directory); --disableProductStyleUrl:
  // the account is always the path's first segment; --skipApiVersionCheck: a newer x-ms-version
  // than this Azurite knows is not refused (the store sends one it knows);
  // --disableTelemetry: nothing is sent anywhere.
  const std::vector<std::string> argv = {binary,
                                         "--blobHost",
                                         "127.0.0.1",
                                         "--blobPort",
                                         std::to_string(port_),
                                         "--location",
                                         dir_.File("workspace"),
                                         "--disableProductStyleUrl",
                                         "--skipApiVersionCheck",
                                         "--disableTelemetry",
                                         "--debug",
                                         dir_.File("debug.log")};
  std::filesystem::create_directories(dir_.File("workspace"));
  if (!proc_.Start(argv, dir_.File("azurite.log"),
                   {std::string("AZURITE_ACCOUNTS=") + kAccount + ":" + kKey})) {
    return false;
  }
  return WaitUntil([&] { return !proc_.Running() || PortOpen(port_); }, std::chrono::seconds(30)) &&
         proc_.Running();
}

std::string Azurite::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/" + kAccount;
}

Result<common::HttpResponse> Azurite::Send(const std::string& method, const std::string& resource,
                                           const std::string& query) const {
  namespace sharedkey = sidecar::sharedkey;
  const std::string path = std::string("/") + kAccount + "/" + resource;
  sharedkey::Request r{method,
                       path,
                       query,
                       {{"x-ms-date", sharedkey::HttpDate(std::chrono::system_clock::now())},
                        {"x-ms-version", sharedkey::kApiVersion}},
                       0};
  r.headers.emplace_back("Authorization",
                         sharedkey::Sign(r, kAccount, *common::Base64Decode(kKey)).authorization);
  auto client = common::HttpClient::Create({});
  if (!client.ok()) return client.status();
  common::HttpClientRequest req;
  req.method = method;
  req.host_port = "127.0.0.1:" + std::to_string(port_);
  req.target = path + "?" + query;
  req.headers = r.headers;
  return (*client)->Send(req);
}

bool Azurite::CreateContainer(const std::string& name) const {
  auto made = Send("PUT", name, "restype=container");
  return made.ok() && made->status == 201;
}

std::string Azurite::log() const {
  std::string text = ReadFile(dir_.File("azurite.log"));
  const std::string debug = ReadFile(dir_.File("debug.log"));
  // The debug log says why a signature was refused; its last part is enough.
  if (!debug.empty())
    text += "\n--- debug log (end) ---\n" +
            debug.substr(debug.size() > 20000 ? debug.size() - 20000 : 0);
  return text;
}

}  // namespace etcdw::testing
