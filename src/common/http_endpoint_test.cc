#include "common/http_endpoint.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/raw_http_client.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using Clock = std::chrono::steady_clock;
using kvpool::testing::HttpStatus;
using kvpool::testing::RawHttpClient;
using kvpool::testing::WaitUntil;
using std::chrono::milliseconds;

constexpr char kMetrics[] = "kvpool_up 1\n";
constexpr char kStatus[] = "{\"ok\":true}";
constexpr auto kPatience = milliseconds(5000);

// Short enough that a test waits little, long enough for a loaded machine
// to connect 64 sockets well within it.
HttpLimits FastLimits() {
  HttpLimits l;
  l.read_timeout_ms = 300;
  l.write_timeout_ms = 1000;
  l.keep_alive_timeout_ms = 300;
  l.worker_threads = 4;
  return l;
}

// Peak RSS of this process in KiB, after resetting it when the kernel allows
// (clear_refs "5"), so that the next reading is the peak since this call.
long ResetPeakRssKb() {
  std::ofstream("/proc/self/clear_refs") << "5";
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}
long PeakRssKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::string Request(const std::string& method, const std::string& path,
                    const std::string& headers = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: test\r\n" + headers + "\r\n";
}

class HttpEndpointTest : public ::testing::Test {
 protected:
  void StartEndpoint(const HttpLimits& limits) {
    ep_ = std::make_unique<HttpEndpoint>([] { return std::string(kMetrics); },
                                         [] { return std::string(kStatus); },
                                         limits);
    ASSERT_TRUE(ep_->Start("127.0.0.1", 0).ok());
  }

  // On a fresh connection with generous client timeouts: the bound under
  // test is the server's.
  int GetStatus(const std::string& path, std::string* body = nullptr) {
    httplib::Client c("127.0.0.1", ep_->port());
    c.set_connection_timeout(10);
    c.set_read_timeout(10);
    auto r = c.Get(path.c_str());
    if (!r) return -1;
    if (body != nullptr) *body = r->body;
    return r->status;
  }

  // Sends `request` whole, half-closes as a polite client would, and returns
  // what the server answered before closing.
  RawHttpClient::Reply Exchange(const std::string& request) {
    RawHttpClient c(ep_->port());
    EXPECT_TRUE(c.connected());
    c.Send(request);
    c.FinishSending();
    return c.ReadUntilClose(kPatience);
  }

  std::unique_ptr<HttpEndpoint> ep_;
};

TEST_F(HttpEndpointTest, ServesMetricsStatusKeepAliveAndPipelining) {
  StartEndpoint(FastLimits());
  std::string body;
  ASSERT_EQ(GetStatus("/metrics", &body), 200);
  EXPECT_EQ(body.rfind(kMetrics, 0), 0u) << body;
  EXPECT_NE(body.find("kvpool_http_refused_total{reason=\"busy\"} 0"),
            std::string::npos)
      << body;
  ASSERT_EQ(GetStatus("/status", &body), 200);
  EXPECT_EQ(body, kStatus);

  // Two requests on one kept-alive connection.
  const uint64_t accepted = ep_->http_stats().accepted;
  httplib::Client c("127.0.0.1", ep_->port());
  c.set_keep_alive(true);
  for (int i = 0; i < 2; ++i) {
    auto r = c.Get("/status");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(ep_->http_stats().accepted, accepted + 1);

  // Pipelined: the second request arrives in the same segment as the first,
  // so it sits in the server's buffer while the first is answered.
  auto r = Exchange(Request("GET", "/status") +
                    Request("GET", "/status", "Connection: close\r\n"));
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(HttpStatus(r.data), 200);
  const size_t second = r.data.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << r.data;
  EXPECT_EQ(r.data.substr(r.data.size() - std::strlen(kStatus)), kStatus);
}

// (a) Many more slow clients than workers: each holds a worker for at most
// the read timeout, counted from accept, so a scrape behind all of them is
// answered within about one timeout. (httplib alone: per-recv timeouts on
// 8 workers, so 64 such clients delayed it by 36 s, and clients sending a
// byte a second delayed it for ever.)
TEST_F(HttpEndpointTest, SlowAndSilentClientsDoNotStarveMetrics) {
  const HttpLimits limits = FastLimits();
  StartEndpoint(limits);
  constexpr int kSlow = 64;  // 16 times the workers
  std::vector<std::unique_ptr<RawHttpClient>> slow;
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(std::make_unique<RawHttpClient>(ep_->port()));
    ASSERT_TRUE(slow.back()->connected());
    // Half send part of a request line and nothing more; half are silent.
    if (i % 2 == 0) {
      ASSERT_TRUE(slow.back()->Send("GET /metr"));
    }
  }
  ASSERT_TRUE(
      WaitUntil([&] { return ep_->http_stats().accepted >= uint64_t(kSlow); },
                kPatience));

  const auto start = Clock::now();
  std::string body;
  EXPECT_EQ(GetStatus("/metrics", &body), 200);
  const auto took = Clock::now() - start;
  EXPECT_LT(took, milliseconds(2 * limits.read_timeout_ms))
      << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  EXPECT_EQ(body.rfind(kMetrics, 0), 0u);

  for (int i = 0; i < kSlow; ++i) {
    auto r = slow[i]->ReadUntilClose(kPatience);
    EXPECT_TRUE(r.closed) << i;
    if (i % 2 == 0) {
      EXPECT_EQ(HttpStatus(r.data), 408) << i << ": " << r.data;
    } else {
      EXPECT_EQ(r.data, "") << i;
    }
  }
  EXPECT_EQ(ep_->http_stats().timed_out, uint64_t(kSlow));
}

// The read timeout bounds the whole request, not each recv: a client that
// keeps sending one byte every 50 ms is still cut off.
TEST_F(HttpEndpointTest, TrickledRequestIsCutOffAtTheReadTimeout) {
  const HttpLimits limits = FastLimits();
  StartEndpoint(limits);
  RawHttpClient c(ep_->port());
  ASSERT_TRUE(c.connected());
  const std::string request = Request("GET", "/metrics");
  const auto start = Clock::now();
  std::string got;
  bool closed = false;
  for (size_t i = 0; !closed && Clock::now() - start < kPatience; ++i) {
    if (!c.Send(request.substr(i % request.size(), 1))) break;
    auto part = c.ReadUntilClose(milliseconds(50));  // paces the bytes
    got += part.data;
    closed = part.closed;
  }
  const auto took = Clock::now() - start;
  if (!closed) got += c.ReadUntilClose(kPatience).data;
  EXPECT_EQ(HttpStatus(got), 408) << got;
  EXPECT_LT(took, milliseconds(2 * limits.read_timeout_ms));
  EXPECT_GE(took, milliseconds(limits.read_timeout_ms / 2));
}

// (b) A 64 MiB URL is refused after about 8 KiB, without the server keeping
// it: the library alone buffers the whole line first (peak RSS +128 MiB).
TEST_F(HttpEndpointTest, LongUriIsRefusedWithoutBuffering) {
  StartEndpoint(HttpLimits());
  ASSERT_EQ(GetStatus("/metrics"), 200);  // threads and arenas warm
  const long base_kb = ResetPeakRssKb();
  {
    RawHttpClient c(ep_->port());
    ASSERT_TRUE(c.connected());
    // The server stops reading the line at the limit and drops the rest.
    EXPECT_TRUE(c.Send("GET /"));
    EXPECT_TRUE(c.SendRepeated(std::string(64 << 10, 'a'), 1024));
    c.Send(" HTTP/1.1\r\nHost: test\r\n\r\n");
    c.FinishSending();
    auto r = c.ReadUntilClose(kPatience);
    EXPECT_EQ(HttpStatus(r.data), 414) << r.data.substr(0, 200);
    EXPECT_TRUE(r.closed);
  }
  EXPECT_LT(PeakRssKb() - base_kb, 16 << 10);

  // 1 MiB, sent in one piece.
  auto r = Exchange(Request("GET", "/" + std::string(1 << 20, 'b')));
  EXPECT_EQ(HttpStatus(r.data), 414);
  EXPECT_NE(r.data.find("request line longer than 8192 bytes"),
            std::string::npos);

  // Under the limit is served, and so is everything after the refusals.
  EXPECT_EQ(GetStatus("/metrics?pad=" + std::string(4000, 'c')), 200);
  EXPECT_EQ(GetStatus("/metrics"), 200);
  EXPECT_EQ(ep_->http_stats().refused, 2u);
}

// (c) Headers: 16 KiB in all, and the library's 8 KiB per line, both
// answered with 431 before the head is complete.
TEST_F(HttpEndpointTest, OversizedHeadersAreRefused) {
  StartEndpoint(FastLimits());
  auto pad = [](int lines, size_t bytes) {
    std::string h;
    for (int i = 0; i < lines; ++i) {
      h += "X-Pad-" + std::to_string(i) + ": " + std::string(bytes, 'p') +
           "\r\n";
    }
    return h;
  };
  auto r = Exchange(Request("GET", "/metrics", pad(20, 1000)));  // ~20 KiB
  EXPECT_EQ(HttpStatus(r.data), 431) << r.data;
  EXPECT_NE(r.data.find("headers longer than 16384 bytes"), std::string::npos);
  r = Exchange(Request("GET", "/metrics", pad(1, 9000)));  // one 9 KiB line
  EXPECT_EQ(HttpStatus(r.data), 431) << r.data;
  EXPECT_NE(r.data.find("header line longer than 8192 bytes"),
            std::string::npos);
  // A head that never ends is refused as soon as it passes the limit, not
  // when the client stops.
  RawHttpClient endless(ep_->port());
  ASSERT_TRUE(endless.Send("GET /metrics HTTP/1.1\r\n" + pad(17, 1000)));
  r = endless.ReadUntilClose(kPatience);
  EXPECT_EQ(HttpStatus(r.data), 431) << r.data;

  r = Exchange(Request("GET", "/status", pad(15, 1000)));  // ~15 KiB: fine
  EXPECT_EQ(HttpStatus(r.data), 200) << r.data;
  EXPECT_EQ(GetStatus("/metrics"), 200);
  EXPECT_EQ(ep_->http_stats().refused, 3u);
}

// (d) A silent connection is closed at the read timeout; a kept-alive one
// that goes idle, at the keep-alive timeout. The client sees EOF.
TEST_F(HttpEndpointTest, IdleConnectionsAreClosed) {
  const HttpLimits limits = FastLimits();
  StartEndpoint(limits);
  {
    RawHttpClient c(ep_->port());
    ASSERT_TRUE(c.connected());
    const auto start = Clock::now();
    auto r = c.ReadUntilClose(kPatience);
    const auto took = Clock::now() - start;
    EXPECT_TRUE(r.closed);
    EXPECT_FALSE(r.reset);
    EXPECT_EQ(r.data, "");
    EXPECT_GE(took, milliseconds(limits.read_timeout_ms / 2));
    EXPECT_LT(took, milliseconds(4 * limits.read_timeout_ms));
  }
  {
    RawHttpClient c(ep_->port());
    ASSERT_TRUE(c.Send(Request("GET", "/status")));
    const auto start = Clock::now();
    auto r = c.ReadUntilClose(kPatience);
    const auto took = Clock::now() - start;
    EXPECT_TRUE(r.closed);
    EXPECT_EQ(HttpStatus(r.data), 200);
    EXPECT_NE(r.data.find("Keep-Alive: timeout=0, max=100"), std::string::npos)
        << r.data;
    EXPECT_GE(took, milliseconds(limits.keep_alive_timeout_ms / 2));
    EXPECT_LT(took, milliseconds(4 * limits.keep_alive_timeout_ms));
  }
}

// An idle kept-alive connection gives its worker up as soon as another
// connection waits for one, long before its keep-alive timeout.
TEST_F(HttpEndpointTest, IdleKeepAliveYieldsItsWorker) {
  HttpLimits limits = FastLimits();
  limits.worker_threads = 1;
  limits.keep_alive_timeout_ms = 20000;
  StartEndpoint(limits);
  RawHttpClient idle(ep_->port());
  ASSERT_TRUE(idle.Send(Request("GET", "/status")));
  ASSERT_TRUE(
      WaitUntil([&] { return ep_->http_stats().requests == 1; }, kPatience));

  const auto start = Clock::now();
  EXPECT_EQ(GetStatus("/metrics"), 200);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  auto r = idle.ReadUntilClose(kPatience);
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(HttpStatus(r.data), 200);
}

// Beyond the workers and the queue, a connection is answered 503 at once.
TEST_F(HttpEndpointTest, FullQueueAnswers503) {
  HttpLimits limits = FastLimits();
  limits.read_timeout_ms = 20000;  // the silent ones must not time out here
  limits.worker_threads = 1;
  limits.max_queued_connections = 1;
  StartEndpoint(limits);
  RawHttpClient on_worker(ep_->port());
  ASSERT_TRUE(
      WaitUntil([&] { return ep_->http_stats().active == 1; }, kPatience));
  RawHttpClient queued(ep_->port());
  ASSERT_TRUE(
      WaitUntil([&] { return ep_->http_stats().queued == 1; }, kPatience));

  const auto start = Clock::now();
  auto r = Exchange(Request("GET", "/metrics"));
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_EQ(HttpStatus(r.data), 503) << r.data;
  EXPECT_NE(r.data.find("Retry-After: 1"), std::string::npos);
  EXPECT_EQ(ep_->http_stats().rejected_busy, 1u);

  // Once the silent one leaves, the queued one gets the worker.
  on_worker.Close();
  ASSERT_TRUE(queued.Send(Request("GET", "/status", "Connection: close\r\n")));
  r = queued.ReadUntilClose(kPatience);
  EXPECT_EQ(HttpStatus(r.data), 200) << r.data;
}

// The endpoint takes no bodies: 4 KiB at most, as sent, and nothing that
// httplib would inflate or frame other than by length or chunks.
TEST_F(HttpEndpointTest, BodiesAreBounded) {
  StartEndpoint(FastLimits());
  // Refused on the head alone: the client need not send the body.
  auto r = Exchange(Request("POST", "/status", "Content-Length: 5000\r\n"));
  EXPECT_EQ(HttpStatus(r.data), 413) << r.data;

  const std::string chunked_5000 =
      "1388\r\n" + std::string(5000, 'x') + "\r\n0\r\n\r\n";
  r = Exchange(Request("POST", "/status", "Transfer-Encoding: chunked\r\n") +
               chunked_5000);
  EXPECT_EQ(HttpStatus(r.data), 413) << r.data;
  r = Exchange(Request("POST", "/status",
                       "Content-Length: 4\r\nContent-Encoding: gzip\r\n") +
               "abcd");
  EXPECT_EQ(HttpStatus(r.data), 415) << r.data;
  r = Exchange(Request("POST", "/status", "Transfer-Encoding: gzip\r\n"));
  EXPECT_EQ(HttpStatus(r.data), 501) << r.data;
  r = Exchange(Request("POST", "/status",
                       "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n") +
               "abcd");
  EXPECT_EQ(HttpStatus(r.data), 400) << r.data;
  r = Exchange(Request("POST", "/status", "Content-Length: 4x\r\n") + "abcd");
  EXPECT_EQ(HttpStatus(r.data), 400) << r.data;
  EXPECT_EQ(ep_->http_stats().refused, 6u);

  // Within the cap the body is read and the request routed (no POST route:
  // 404), and a POST without a length has an empty body rather than one that
  // lasts until the client closes.
  r = Exchange(Request("POST", "/status", "Content-Length: 4\r\n") + "abcd");
  EXPECT_EQ(HttpStatus(r.data), 404) << r.data;
  RawHttpClient no_length(ep_->port());
  ASSERT_TRUE(no_length.Send(Request("POST", "/status")));
  r = no_length.ReadUntilClose(milliseconds(2000));
  EXPECT_EQ(HttpStatus(r.data), 404) << r.data;
  EXPECT_EQ(GetStatus("/metrics"), 200);
}

TEST_F(HttpEndpointTest, BadLimitsAndStopRightAfterStart) {
  HttpLimits bad;
  bad.worker_threads = 0;
  HttpEndpoint e([] { return std::string(); }, [] { return std::string(); },
                 bad);
  EXPECT_EQ(e.Start("127.0.0.1", 0).code(), ErrorCode::INVALID_PARAMS);
  // httplib's own stop() is lost if it comes before the accept thread runs.
  for (int i = 0; i < 20; ++i) {
    HttpEndpoint quick([] { return std::string(); },
                       [] { return std::string(); }, FastLimits());
    ASSERT_TRUE(quick.Start("127.0.0.1", 0).ok());
    quick.Stop();
  }
}

}  // namespace
}  // namespace kvpool
