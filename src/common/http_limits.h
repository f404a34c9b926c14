// Limits on kvpool's HTTP servers (the /metrics and /status endpoint of master
// and nodes, the router's API). Every field has a default, so callers name
// only what they change. docs/security.md lists what a client sees at each.
#ifndef KVPOOL_COMMON_HTTP_LIMITS_H_
#define KVPOOL_COMMON_HTTP_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace kvpool {

struct HttpLimits {
  // The request line: method, URI and version (the URI is nearly all of it).
  // Longer: 414. Debian's cpp-httplib 0.11.4 is a compiled library that
  // refuses request lines over 8192 bytes itself, so larger values have no
  // effect; the point of checking here is to refuse without first buffering
  // the whole line, which the library does.
  size_t max_request_line_bytes = 8 << 10;
  // All header lines together. Larger: 431. The same library also refuses any
  // single header line over 8192 bytes (with 400); it is checked here too, so
  // a client gets 431 for either.
  size_t max_header_bytes = 16 << 10;
  // A body's bytes as sent (a chunked body's framing counts). Larger: 413.
  // Small by default: the status endpoint has no route that takes a body.
  size_t max_body_bytes = 4 << 10;

  // Time for one whole request, head and body, to arrive; the first request
  // on a connection counts from accept, so time spent queued for a worker
  // counts too. A client that is silent or sends byte by byte holds a worker
  // for at most this long. Then: 408 if part of a request came, else close.
  int read_timeout_ms = 5000;
  // Time for one whole response to be taken by the client; then close.
  int write_timeout_ms = 5000;

  // Requests per connection, and how long an idle connection is kept open
  // between them. An idle connection is also closed, and a response carries
  // "Connection: close", whenever another connection waits for a worker:
  // idle clients must not hold workers someone else needs.
  size_t keep_alive_max_requests = 100;
  int keep_alive_timeout_ms = 5000;

  // httplib serves each connection on one worker thread. Connections beyond
  // the workers wait in a queue (still under read_timeout_ms); beyond the
  // queue they get 503 at once, which is both an early signal to the operator
  // and a bound on the file descriptors a flood can hold.
  size_t worker_threads = 8;
  size_t max_queued_connections = 256;
  // The kernel's queue of connections not yet accepted (the compiled library
  // uses 5, which loses connections to a burst); capped by net.core.somaxconn.
  int listen_backlog = 128;
};

// What the limits did, for tests and for operators (the status endpoint
// appends these to /metrics, the router to /stats).
struct HttpServerStats {
  uint64_t accepted = 0;       // connections taken from the kernel
  uint64_t rejected_busy = 0;  // 503: every worker and queue slot in use
  uint64_t refused = 0;        // 4xx for a limit: 414, 431, 413, 415, ...
  uint64_t timed_out = 0;      // a read or write deadline passed
  uint64_t requests = 0;       // requests handed to the handlers
  uint64_t active = 0;         // connections on a worker now
  uint64_t queued = 0;         // connections waiting for a worker now
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_HTTP_LIMITS_H_
