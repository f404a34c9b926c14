/* The C API end to end, compiled as C11: a kvpool-master started by this
 * test (its PID is stopped at the end), this process hosting a segment, and
 * every call of kvpool/c_api.h with its success and error conventions. */
#define _POSIX_C_SOURCE 200809L

#include "kvpool/c_api.h"

#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* ---- Mooncake's mount_segment family */

/* Lines of /proc/self/maps that map `path`. */
static int mappings_of(const char* path) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  char line[1024];
  int n = 0;
  const size_t len = strlen(path);
  while (fgets(line, sizeof(line), f)) {
    size_t l = strlen(line);
    while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == ' ')) --l;
    if (l >= len && memcmp(line + l - len, path, len) == 0) ++n;
  }
  fclose(f);
  return n;
}

/* Deterministic bytes, different per seed. */
static void fill(char* p, size_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = (char)(x >> 24);
  }
}

/* Offset of v (n bytes) in mem, on a 64-byte boundary; -1 if absent. */
static long long find_value(const unsigned char* mem, size_t size,
                            const char* v, size_t n) {
  for (size_t off = 0; off + n <= size; off += 64) {
    if (memcmp(mem + off, v, n) == 0) return (long long)off;
  }
  return -1;
}

static int all_bytes(const unsigned char* p, size_t n, unsigned char b) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != b) return 0;
  }
  return 1;
}

/* A hosting store whose own segment (1 MiB) cannot take a 2 MiB value
 * mounts a page-aligned range of a file under /dev/shm that this test
 * created and maps itself: such values land in the file, and another
 * client reads them byte-exact (over TCP: a caller's file is never shared
 * memory). Then every error code of the four calls. */
static void test_mount(const char* master) {
  const int64_t mib = 1 << 20;
  const int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
  char path[128];
  snprintf(path, sizeof(path), "/dev/shm/kvpool-c-api-test-mount-%ld",
           (long)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  CHECK(fd >= 0);
  if (fd < 0) return;
  const size_t file_size = (size_t)(page + 8 * mib);
  CHECK_EQ(ftruncate(fd, (off_t)file_size), 0);
  unsigned char* mem =
      mmap(NULL, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(mem != MAP_FAILED);
  if (mem == MAP_FAILED) {
    unlink(path);
    return;
  }
  memset(mem, 0xAB, file_size);

  kvpool_store_t* host = kvpool_store_create();
  CHECK_EQ(kvpool_store_setup(host, "127.0.0.1", "", (uint64_t)mib,
                              (uint64_t)(4 * mib), "tcp", "", master),
           0);
  kvpool_store_t* reader = kvpool_store_create();
  CHECK_EQ(kvpool_store_setup(reader, "127.0.0.1", "", 0, 0, "tcp", "", master),
           0);
  char host_name[128];
  CHECK(kvpool_store_get_hostname(host, host_name, sizeof(host_name)) > 0);
  kvpool_replicate_config_t here;
  kvpool_replicate_config_init(&here);
  here.preferred_segment = host_name;
  const size_t big = (size_t)(2 * mib);
  char* values[3];
  for (int i = 0; i < 3; ++i) {
    values[i] = malloc(big);
    fill(values[i], big, (unsigned)i + 1);
  }
  char* dst = malloc((size_t)(4 * mib));
  CHECK_EQ(kvpool_store_register_buffer(reader, dst, 4 * mib), 0);
  CHECK_EQ(mappings_of(path), 1); /* this test's own */

  /* mount_segment: values land in the caller's file, read back elsewhere */
  char id[KVPOOL_SEGMENT_ID_SIZE];
  CHECK_EQ(kvpool_store_mount_segment(host, path, 8 * mib, page, "tcp", "", id,
                                      sizeof(id)),
           0);
  CHECK_EQ(strlen(id), 36); /* a UUID */
  CHECK_EQ(mappings_of(path), 2);
  const char* keys[3] = {"c-mnt-0", "c-mnt-1", "c-mnt-2"};
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(kvpool_store_put(host, keys[i], values[i], (int64_t)big, &here),
             0);
    CHECK(find_value(mem + page, (size_t)(8 * mib), values[i], big) >= 0);
    memset(dst, 0, big);
    CHECK_EQ(kvpool_store_get_into(reader, keys[i], dst, 4 * mib),
             (int64_t)big);
    CHECK(memcmp(dst, values[i], big) == 0);
  }
  CHECK(all_bytes(mem, (size_t)page, 0xAB)); /* outside the range */

  const char* ids[1] = {id};
  CHECK_EQ(kvpool_store_unmount_segment(host, ids, 1, 0), 0);
  CHECK_EQ(mappings_of(path), 1);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(kvpool_store_get_into(reader, keys[i], dst, 4 * mib),
             KVPOOL_ERR_OBJECT_NOT_FOUND);
    CHECK_EQ(kvpool_store_is_exist(reader, keys[i]), 0);
    CHECK_EQ(kvpool_store_get_size(reader, keys[i]),
             KVPOOL_ERR_OBJECT_NOT_FOUND);
  }
  /* The caller has its memory back: nothing is placed there any more (and
   * the store's own segment is too small). */
  memset(mem, 0, file_size);
  CHECK(kvpool_store_put(host, "c-mnt-again", values[0], (int64_t)big, &here) <
        0);
  CHECK(all_bytes(mem, file_size, 0));

  /* allocate_and_mount_segment: whole pages of new shared memory */
  char aid[KVPOOL_SEGMENT_ID_SIZE];
  uint64_t allocated = 0;
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(
               host, 4 * mib + 1, NULL, NULL, aid, sizeof(aid), &allocated),
           0);
  CHECK_EQ(allocated, 4 * mib + page);
  CHECK_EQ(strlen(aid), 36);
  /* In /dev/shm, or in the huge tmpfs the node mounted under it
   * (segment_huge_pages). */
  char shm_file[256];
  snprintf(shm_file, sizeof(shm_file),
           "/dev/shm/kvpool-huge-%ld-*/kvpool-%ld-%s-extra1", (long)getpid(),
           (long)getpid(), host_name);
  glob_t found;
  if (glob(shm_file, 0, NULL, &found) == 0 && found.gl_pathc == 1) {
    snprintf(shm_file, sizeof(shm_file), "%s", found.gl_pathv[0]);
  } else {
    snprintf(shm_file, sizeof(shm_file), "/dev/shm/kvpool-%ld-%s-extra1",
             (long)getpid(), host_name);
  }
  globfree(&found);
  struct stat st;
  CHECK_EQ(stat(shm_file, &st), 0);
  CHECK_EQ(st.st_size, 4 * mib + page);
  const size_t three = (size_t)(3 * mib);
  char* v3 = malloc(three);
  fill(v3, three, 9);
  CHECK_EQ(kvpool_store_put(host, "c-alloc", v3, (int64_t)three, &here), 0);
  memset(dst, 0, three);
  CHECK_EQ(kvpool_store_get_into(reader, "c-alloc", dst, 4 * mib),
           (int64_t)three);
  CHECK(memcmp(dst, v3, three) == 0);
  const char* aids[1] = {aid};
  CHECK_EQ(kvpool_store_unmount_segment(host, aids, 1, 0),
           KVPOOL_ERR_INTERNAL); /* not a mount_segment id */
  CHECK_EQ(kvpool_store_unmount_and_free_segment(host, aids, 1, 0), 0);
  CHECK_EQ(stat(shm_file, &st), -1); /* freed */
  CHECK_EQ(kvpool_store_get_into(reader, "c-alloc", dst, 4 * mib),
           KVPOOL_ERR_OBJECT_NOT_FOUND);
  CHECK_EQ(kvpool_store_unmount_and_free_segment(host, aids, 1, 0),
           KVPOOL_ERR_INTERNAL); /* gone already */

  /* NULL pointers: INVALID_PARAMS, nothing done */
  const char* null_id[1] = {NULL};
  CHECK_EQ(kvpool_store_mount_segment(NULL, path, mib, page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_mount_segment(host, NULL, mib, page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_mount_segment(host, path, mib, page, "tcp", "", NULL,
                                      sizeof(id)),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(NULL, mib, "tcp", "", aid,
                                                   sizeof(aid), &allocated),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(host, mib, "tcp", "", NULL,
                                                   sizeof(aid), &allocated),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_unmount_segment(NULL, ids, 1, 0),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_unmount_segment(host, NULL, 1, 0),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_unmount_segment(host, null_id, 1, 0),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_unmount_and_free_segment(NULL, aids, 1, 0),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_unmount_and_free_segment(host, NULL, 1, 0),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_unmount_and_free_segment(host, null_id, 1, 0),
           KVPOOL_ERR_INVALID_PARAMS);
  CHECK_EQ(kvpool_store_unmount_segment(host, NULL, 0, 0), 0); /* nothing */
  /* An id buffer too small: BUFFER_OVERFLOW before anything is mounted. */
  char small[8];
  CHECK_EQ(kvpool_store_mount_segment(host, path, mib, page, "tcp", "", small,
                                      sizeof(small)),
           KVPOOL_ERR_BUFFER_OVERFLOW);
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(host, mib, "tcp", "", small,
                                                   sizeof(small), &allocated),
           KVPOOL_ERR_BUFFER_OVERFLOW);
  CHECK_EQ(mappings_of(path), 1);

  /* A store that hosts no segment: not set up, or a pure client. -1. */
  kvpool_store_t* none = kvpool_store_create();
  CHECK_EQ(kvpool_store_mount_segment(none, path, mib, page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(strcmp(id, ""), 0);
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(none, mib, "tcp", "", aid,
                                                   sizeof(aid), &allocated),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_unmount_segment(none, ids, 1, 0), KVPOOL_ERR_INTERNAL);
  kvpool_store_destroy(none);
  CHECK_EQ(kvpool_store_mount_segment(reader, path, mib, page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL);
  allocated = 7;
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(reader, mib, "tcp", "", aid,
                                                   sizeof(aid), &allocated),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(allocated, 0);
  CHECK_EQ(kvpool_store_unmount_and_free_segment(reader, aids, 1, 0),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(strcmp(kvpool_error_name(KVPOOL_ERR_INTERNAL), "INTERNAL_ERROR"), 0);

  /* Bad files, ranges and sizes: -1 */
  char missing[160];
  snprintf(missing, sizeof(missing), "%s.missing", path);
  CHECK_EQ(kvpool_store_mount_segment(host, missing, mib, 0, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(
      kvpool_store_mount_segment(host, "", mib, 0, "tcp", "", id, sizeof(id)),
      KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_mount_segment(host, path, mib, 100, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL); /* unaligned offset */
  CHECK_EQ(kvpool_store_mount_segment(host, path, 9 * mib, page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL); /* past the end */
  CHECK_EQ(
      kvpool_store_mount_segment(host, path, -1, 0, "tcp", "", id, sizeof(id)),
      KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_mount_segment(host, path, mib, -page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(host, 0, "tcp", "", aid,
                                                   sizeof(aid), NULL),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(host, -5, "tcp", "", aid,
                                                   sizeof(aid), NULL),
           KVPOOL_ERR_INTERNAL);
  /* Zero bytes mount nothing and succeed, as in Mooncake, once the file
   * opens and the offset is valid. */
  strcpy(id, "stale");
  CHECK_EQ(kvpool_store_mount_segment(host, path, 0, page, NULL, NULL, id,
                                      sizeof(id)),
           0);
  CHECK_EQ(strcmp(id, ""), 0);
  CHECK_EQ(kvpool_store_mount_segment(host, missing, 0, 0, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(
      kvpool_store_mount_segment(host, path, 0, 100, "tcp", "", id, sizeof(id)),
      KVPOOL_ERR_INTERNAL);
  CHECK_EQ(mappings_of(path), 1);

  /* The same bytes twice are refused; the rest of the file is free. */
  char id1[KVPOOL_SEGMENT_ID_SIZE], id2[KVPOOL_SEGMENT_ID_SIZE];
  CHECK_EQ(kvpool_store_mount_segment(host, path, 4 * mib, page, "tcp", "", id1,
                                      sizeof(id1)),
           0);
  CHECK_EQ(kvpool_store_mount_segment(host, path, 4 * mib, page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_mount_segment(host, path, 2 * page, 0, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_mount_segment(host, path, 4 * mib, page + 4 * mib,
                                      "tcp", "", id2, sizeof(id2)),
           0);
  CHECK_EQ(mappings_of(path), 3);

  /* Unknown ids: -1, the other ids of the list still go. */
  const char* unknown[1] = {"not-a-uuid"};
  const char* zero_uuid[1] = {"00000000-0000-0000-0000-000000000001"};
  const char* mixed[2] = {"nope", id1};
  const char* ids1[1] = {id1};
  const char* ids2[1] = {id2};
  CHECK_EQ(kvpool_store_unmount_segment(host, unknown, 1, 0),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_unmount_segment(host, zero_uuid, 1, 0),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_unmount_and_free_segment(host, ids1, 1, 0),
           KVPOOL_ERR_INTERNAL); /* not an allocated one */
  CHECK_EQ(kvpool_store_unmount_segment(host, mixed, 2, 0),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_unmount_segment(host, ids1, 1, 0),
           KVPOOL_ERR_INTERNAL); /* gone already */
  CHECK_EQ(mappings_of(path), 2);
  /* A negative grace period is refused; any other is accepted (kvpool
   * unmounts at once). */
  CHECK_EQ(kvpool_store_unmount_segment(host, ids2, 1, -1),
           KVPOOL_ERR_INTERNAL);
  CHECK_EQ(kvpool_store_unmount_segment(host, ids2, 1, 5), 0);
  CHECK_EQ(kvpool_store_unmount_segment(host, ids2, 1, 0), KVPOOL_ERR_INTERNAL);
  CHECK_EQ(mappings_of(path), 1);
  CHECK_EQ(kvpool_store_health_check(host), 0);
  CHECK_EQ(kvpool_store_put(host, "c-after-errors", "ok", 2, NULL), 0);
  CHECK_EQ(kvpool_store_get_into(reader, "c-after-errors", dst, 4 * mib), 2);

  /* close() takes every mounted segment out and lets go of the file. */
  CHECK_EQ(kvpool_store_mount_segment(host, path, 4 * mib, page, "tcp", "", id,
                                      sizeof(id)),
           0);
  CHECK_EQ(kvpool_store_allocate_and_mount_segment(host, mib, "tcp", "", aid,
                                                   sizeof(aid), NULL),
           0);
  CHECK_EQ(mappings_of(path), 2);
  CHECK_EQ(kvpool_store_close(host), 0);
  CHECK_EQ(mappings_of(path), 1);
  CHECK_EQ(kvpool_store_mount_segment(host, path, mib, page, "tcp", "", id,
                                      sizeof(id)),
           KVPOOL_ERR_INTERNAL); /* closed */

  kvpool_store_destroy(host);
  CHECK_EQ(kvpool_store_unregister_buffer(reader, dst), 0);
  kvpool_store_destroy(reader);
  free(dst);
  free(v3);
  for (int i = 0; i < 3; ++i) free(values[i]);
  munmap(mem, file_size);
  CHECK_EQ(unlink(path), 0);
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
    test_mount(master);
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
