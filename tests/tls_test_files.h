// Throwaway TLS material for tests, made with the openssl command line in a
// temporary directory that goes away with the object: a CA, a server
// certificate for 127.0.0.1 and localhost signed by it, a client
// certificate, and a second, unrelated CA (for "wrong CA" cases).
#ifndef KVPOOL_TESTS_TLS_TEST_FILES_H_
#define KVPOOL_TESTS_TLS_TEST_FILES_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kvpool {

class TlsTestFiles {
 public:
  TlsTestFiles() {
    // No gtest here: the transport benchmark uses it too.
    std::error_code tmp_ec;
    std::string tmpl = std::filesystem::temp_directory_path(tmp_ec).string() +
                       "/kvpool_tls_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
    const std::string ca_ext =
        " -addext basicConstraints=critical,CA:TRUE "
        "-addext keyUsage=critical,keyCertSign,cRLSign; ";
    const std::string script =
        "set -e; cd '" + dir_ + "'; openssl req -x509 " + ec +
        " -nodes -keyout ca.key -out ca.pem -days 1 -subj '/CN=kvpool test "
        "CA'" +
        ca_ext + "openssl req -x509 " + ec +
        " -nodes -keyout other_ca.key -out other_ca.pem -days 1 "
        "-subj '/CN=kvpool other CA'" +
        ca_ext + "openssl req " + ec +
        " -nodes -keyout server.key -out server.csr -subj '/CN=localhost'; "
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext; "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
        "-CAcreateserial -out server.pem -days 1 -extfile server.ext; "
        "openssl req " +
        ec +
        " -nodes -keyout client.key -out client.csr -subj '/CN=kvpool client'; "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
        "-CAcreateserial -out client.pem -days 1; "
        "chmod 600 *.key";
    ok_ = std::system(("(" + script + ") >/dev/null 2>&1").c_str()) == 0;
  }
  ~TlsTestFiles() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TlsTestFiles(const TlsTestFiles&) = delete;
  TlsTestFiles& operator=(const TlsTestFiles&) = delete;

  // False if the openssl command line is missing or failed.
  bool ok() const { return ok_; }
  // The path of one of: ca.pem, other_ca.pem, server.pem, server.key,
  // client.pem, client.key.
  std::string operator()(const std::string& name) const {
    return dir_ + "/" + name;
  }

 private:
  std::string dir_;
  bool ok_ = false;
};

}  // namespace kvpool

#endif  // KVPOOL_TESTS_TLS_TEST_FILES_H_
