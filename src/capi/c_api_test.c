/* The C API end to end, compiled as C11: a kvpool-master started by this
 * test (its PID is stopped at the end), this process hosting a segment, and
 * every call of kvpool/c_api.h with its success and error conventions. */
#define _POSIX_C_SOURCE 200809L

#include "kvpool/c_api.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_failures = 0;
static pid_t g_master = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                  \
  do {                                                                  \
    long long va_ = (long long)(a), vb_ = (long long)(b);               \
    if (va_ != vb_) {                                                   \
      fprintf(stderr, "%s:%d: CHECK_EQ failed: %s = %lld, %s = %lld\n", \
              __FILE__, __LINE__, #a, va_, #b, vb_);                    \
      ++g_failures;                                                     \
    }                                                                   \
  } while (0)

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void stop_master(void) {
  if (g_master > 0) {
    kill(g_master, SIGTERM);
    waitpid(g_master, NULL, 0);
    g_master = 0;
  }
}

/* Starts kvpool-master on a free loopback port; returns the port, 0 on
 * failure. The master writes its port to a file once it listens. */
static int start_master(const char* dir) {
  char port_file[512], arg[600];
  snprintf(port_file, sizeof(port_file), "%s/master.port", dir);
  snprintf(arg, sizeof(arg), "--port_file=%s", port_file);
  g_master = fork();
  if (g_master == 0) {
    char* argv[] = {KVPOOL_BIN_DIR "/kvpool-master", "--rpc_port=0",
                    "--metrics_port=-1", arg, NULL};
    execv(argv[0], argv);
    _exit(127);
  }
  if (g_master < 0) return 0;
  for (int i = 0; i < 2000; ++i) { /* up to 20 s */
    FILE* f = fopen(port_file, "r");
    if (f) {
      int port = 0;
      int ok = fscanf(f, "%d", &port);
      fclose(f);
      if (ok == 1 && port > 0) return port;
    }
    if (waitpid(g_master, NULL, WNOHANG) == g_master) return 0;
    sleep_ms(10);
  }
  return 0;
}

static void test_before_setup(void) {
  kvpool_store_t* s = kvpool_store_create();
  CHECK(s != NULL);
  CHECK_EQ(kvpool_store_put(s, "k", "v", 1, NULL), KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_get_size(s, "k"), KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_is_exist(s, "k"), -1);
  CHECK_EQ(
      kvpool_store_setup(NULL, "localhost", "", 0, 0, "tcp", "", "127.0.0.1:1"),
      KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_setup(s, NULL, "", 0, 0, "tcp", "", "127.0.0.1:1"),
           KVPOOL_ERR_INVALID_PARAMS);
  kvpool_store_destroy(s);
  kvpool_store_destroy(NULL);
}

static void test_unreachable_master(void) {
  kvpool_store_t* s = kvpool_store_create();
  /* Port 1 on loopback: nothing listens there. */
  int rc = kvpool_store_setup(s, "localhost", "P2PHANDSHAKE", 0, 0, "tcp", "",
                              "127.0.0.1:1");
  CHECK(rc < 0);
  CHECK(strcmp(kvpool_error_name(rc), "UNKNOWN_ERROR") != 0);
  kvpool_store_destroy(s);
}

static void test_store(const char* master) {
  kvpool_store_t* s = kvpool_store_create();
  CHECK_EQ(kvpool_store_setup(s, "127.0.0.1", "http://unused/metadata",
                              32u << 20, 1u << 20, "rdma", "mlx5_0", master),
           0);
  CHECK_EQ(kvpool_store_health_check(s), 0);

  char host[128];
  int len = kvpool_store_get_hostname(s, host, sizeof(host));
  CHECK(len > (int)strlen("127.0.0.1:"));
  CHECK(strncmp(host, "127.0.0.1:", 10) == 0);
  CHECK(strcmp(host, "127.0.0.1:0") != 0); /* hosting: a real data port */
  CHECK_EQ(kvpool_store_get_hostname(s, host, 4), KVPOOL_ERR_BUFFER_OVERFLOW);

  /* put / size / exist / upsert */
  CHECK_EQ(kvpool_store_put(s, "c-k1", "hello", 5, NULL), 0);
  CHECK_EQ(kvpool_store_put(s, "c-k1", "other", 5, NULL), 0); /* kept */
  CHECK_EQ(kvpool_store_get_size(s, "c-k1"), 5);
  CHECK_EQ(kvpool_store_is_exist(s, "c-k1"), 1);
  CHECK_EQ(kvpool_store_is_exist(s, "c-missing"), 0);
  CHECK_EQ(kvpool_store_get_size(s, "c-missing"), KVPOOL_ERR_OBJECT_NOT_FOUND);
  CHECK_EQ(kvpool_store_upsert(s, "c-k1", "hello, world", 12, NULL), 0);
  CHECK_EQ(kvpool_store_get_size(s, "c-k1"), 12);
  CHECK_EQ(kvpool_store_put(s, "c-neg", "x", -1, NULL),
           KVPOOL_ERR_INVALID_PARAMS);

  /* zero copy */
  const int64_t cap = 1 << 16;
  char* buf = malloc((size_t)cap);
  char* unreg = malloc(64);
  CHECK_EQ(kvpool_store_register_buffer(s, buf, -5), KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_register_buffer(s, buf, cap), 0);
  CHECK_EQ(kvpool_store_get_into(s, "c-k1", buf, cap), 12);
  CHECK(memcmp(buf, "hello, world", 12) == 0);
  CHECK_EQ(kvpool_store_get_into(s, "c-k1", buf, 4),
           KVPOOL_ERR_BUFFER_OVERFLOW);
  CHECK_EQ(kvpool_store_get_into(s, "c-k1", unreg, 64),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_get_into(s, "c-k1", buf, -1),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_get_into(s, "c-k1", buf + cap - 8, 64),
           KVPOOL_ERR_INVALID_PARAMS); /* runs past the registered end */
  CHECK_EQ(kvpool_store_get_into(s, "c-missing", buf, cap),
           KVPOOL_ERR_OBJECT_NOT_FOUND);
  memset(buf, 'z', 1000);
  CHECK_EQ(kvpool_store_put_from(s, "c-zero", buf, 1000, NULL), 0);
  CHECK_EQ(kvpool_store_put_from(s, "c-unreg", unreg, 64, NULL),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_is_exist(s, "c-unreg"), 0);

  /* batches: four keys, one of them with a bad size */
  const char* keys[4] = {"c-b0", "c-b1", "c-b2", "c-b3"};
  const void* src[4];
  void* dst[4];
  int64_t sizes[4];
  for (int i = 0; i < 4; ++i) {
    memset(buf + i * 1024, 'a' + i, 1024);
    src[i] = buf + i * 1024;
    dst[i] = buf + 8192 + i * 1024;
    sizes[i] = 100 * (i + 1);
  }
  int put_results[4];
  sizes[3] = -1;
  CHECK_EQ(
      kvpool_store_batch_put_from(s, keys, src, sizes, 4, NULL, put_results),
      KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(put_results[0], 0);
  CHECK_EQ(put_results[3], KVPOOL_ERR_INVALID_PARAMS);
  sizes[3] = 400;
  CHECK_EQ(
      kvpool_store_batch_put_from(s, keys, src, sizes, 4, NULL, put_results),
      0);
  int64_t get_results[4];
  int64_t caps[4] = {1024, 1024, 1024, 1024};
  CHECK_EQ(kvpool_store_batch_get_into(s, keys, dst, caps, 4, get_results), 0);
  for (int i = 0; i < 4; ++i) {
    CHECK_EQ(get_results[i], 100 * (i + 1));
    CHECK(memcmp(dst[i], src[i], (size_t)get_results[i]) == 0);
  }
  const char* probe[3] = {"c-b0", "c-nope", "c-b3"};
  int exist[3] = {-9, -9, -9};
  CHECK_EQ(kvpool_store_batch_is_exist(s, probe, 3, exist), 0);
  CHECK_EQ(exist[0], 1);
  CHECK_EQ(exist[1], 0);
  CHECK_EQ(exist[2], 1);
  CHECK_EQ(kvpool_store_batch_is_exist(s, NULL, 3, exist),
           KVPOOL_ERR_INVALID_PARAMS);

  /* placement on this process's segment, pinned */
  kvpool_replicate_config_t rc;
  kvpool_replicate_config_init(&rc);
  CHECK_EQ(rc.replica_num, 1);
  rc.preferred_segment = host;
  rc.with_hard_pin = 1;
  CHECK_EQ(kvpool_store_put(s, "c-pinned", "p", 1, &rc), 0);
  rc.soft_pin_action = 7;
  CHECK_EQ(kvpool_store_put(s, "c-bad-rc", "p", 1, &rc),
           KVPOOL_ERR_INVALID_PARAMS);
  rc.soft_pin_action = KVPOOL_SOFT_PIN_ENABLE;
  rc.replica_num = 0;
  CHECK_EQ(kvpool_store_put(s, "c-bad-rc", "p", 1, &rc),
           KVPOOL_ERR_INVALID_PARAMS);

  /* remove: the gets above hold a read lease on c-k1 */
  CHECK_EQ(kvpool_store_remove(s, "c-k1", 0), KVPOOL_ERR_OBJECT_HAS_LEASE);
  CHECK_EQ(kvpool_store_remove(s, "c-k1", 1), 0);
  CHECK_EQ(kvpool_store_is_exist(s, "c-k1"), 0);
  CHECK_EQ(kvpool_store_remove(s, "c-k1", 0), KVPOOL_ERR_OBJECT_NOT_FOUND);
  int64_t removed = kvpool_store_remove_all(s, 1);
  CHECK_EQ(removed, 6); /* c-zero, c-b0..3, c-pinned */
  CHECK_EQ(kvpool_store_is_exist(s, "c-b0"), 0);

  CHECK_EQ(kvpool_store_unregister_buffer(s, buf), 0);
  CHECK_EQ(kvpool_store_unregister_buffer(s, buf), KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_close(s), 0);
  CHECK_EQ(kvpool_store_put(s, "c-after", "x", 1, NULL),
           KVPOOL_ERR_INVALID_PARAMS);
  kvpool_store_destroy(s);
  free(buf);
  free(unreg);
}

static void test_setup_dict(const char* master) {
  kvpool_store_t* s = kvpool_store_create();
  const char* keys[] = {"local_hostname",        "metadata_server",
                        "global_segment_size",   "local_buffer_size",
                        "master_server_address", "protocol"};
  const char* values[] = {"127.0.0.1", "P2PHANDSHAKE", "0",
                          "1MiB",      master,         "tcp"};
  CHECK_EQ(kvpool_store_setup_dict(s, keys, values, 6), 0);
  char host[128];
  CHECK(kvpool_store_get_hostname(s, host, sizeof(host)) > 0);
  CHECK(strcmp(host, "127.0.0.1:0") == 0); /* a pure client */
  const char* bad[] = {"local_hostname", "global_segment_size"};
  const char* bad_values[] = {"127.0.0.1", "lots"};
  CHECK_EQ(kvpool_store_setup_dict(s, bad, bad_values, 2),
           KVPOOL_ERR_INVALID_PARAMS);
  kvpool_store_destroy(s);
}

int main(void) {
  char dir[] = "/tmp/kvpool-c-api-test-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_before_setup();
  test_unreachable_master();
  int port = start_master(dir);
  CHECK(port > 0);
  if (port > 0) {
    char master[64];
    snprintf(master, sizeof(master), "127.0.0.1:%d", port);
    test_store(master);
    test_setup_dict(master);
  }
  stop_master();
  char path[600];
  snprintf(path, sizeof(path), "%s/master.port", dir);
  unlink(path);
  rmdir(dir);
  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("c_api_test OK\n");
  return 0;
}
