/* kvpool's C API: Mooncake Store's conventions (MooncakeDistributedStore)
 * for C callers and other languages' FFIs.
 *
 * Return values: 0 or a positive value on success, otherwise a negative
 * error code with Mooncake's numbering (KVPOOL_ERR_*; kvpool_error_name()
 * names any of them). Invalid arguments -- NULL pointers, negative sizes,
 * buffers outside every registered buffer in the zero-copy calls -- return
 * KVPOOL_ERR_INVALID_PARAMS and touch no memory. So does any call on a store
 * that is not set up, except the mount calls, which answer Mooncake's -1
 * for every failure but a NULL pointer (see kvpool_store_mount_segment).
 *
 * Batch calls fill results[i] for every key and return 0 when every key
 * succeeded, otherwise the first negative per-key code.
 *
 * A store is thread-safe: calls may run concurrently from many threads;
 * setup and close wait for the calls in flight. Link with -lkvpool_c.
 */
#ifndef KVPOOL_C_API_H_
#define KVPOOL_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The codes a caller most often tests; the full list is ErrorCode in
 * kvpool/status.h (same values). */
enum {
  KVPOOL_OK = 0,
  KVPOOL_ERR_INTERNAL = -1,
  KVPOOL_ERR_BUFFER_OVERFLOW = -10,
  KVPOOL_ERR_NO_AVAILABLE_HANDLE = -200,
  KVPOOL_ERR_INVALID_KEY = -400,
  KVPOOL_ERR_INVALID_PARAMS = -600,
  KVPOOL_ERR_REPLICA_IS_NOT_READY = -703,
  KVPOOL_ERR_OBJECT_NOT_FOUND = -704,
  KVPOOL_ERR_OBJECT_HAS_LEASE = -706,
  KVPOOL_ERR_TRANSFER_FAIL = -800,
  KVPOOL_ERR_RPC_FAIL = -900
};

/* Mooncake's SoftPinAction (same values). */
enum {
  KVPOOL_SOFT_PIN_PRESERVE = 0, /* as with_soft_pin says */
  KVPOOL_SOFT_PIN_ENABLE = 1,
  KVPOOL_SOFT_PIN_DISABLE = 2
};

/* Placement wishes of a put; NULL anywhere a config is taken means the
 * defaults (kvpool_replicate_config_init). */
typedef struct kvpool_replicate_config {
  int32_t replica_num;           /* >= 1 */
  int32_t with_soft_pin;         /* evicted only after unpinned objects */
  int32_t soft_pin_action;       /* KVPOOL_SOFT_PIN_* */
  int64_t soft_pin_ttl_ms;       /* < 0: master default; 0: no soft pin; > 0 */
  int32_t with_hard_pin;         /* never evicted */
  const char* preferred_segment; /* a node id ("host:port"), or NULL */
  const char* const* preferred_segments; /* then these, in order; or NULL */
  size_t num_preferred_segments;
} kvpool_replicate_config_t;

typedef struct kvpool_store kvpool_store_t;

void kvpool_replicate_config_init(kvpool_replicate_config_t* config);

/* NULL only when out of memory. */
kvpool_store_t* kvpool_store_create(void);
/* Closes the store if needed and frees it; NULL is a no-op. */
void kvpool_store_destroy(kvpool_store_t* store);

/* Mooncake's setup(): connects to the master at master_server_addr and, when
 * global_segment_size > 0, contributes that many bytes of DRAM from this
 * process (the segment's id is "local_hostname:port"). metadata_server,
 * protocol and rdma_devices are accepted and unused (bytes move over shared
 * memory on one host, TCP otherwise); any of them may be NULL. */
int kvpool_store_setup(kvpool_store_t* store, const char* local_hostname,
                       const char* metadata_server,
                       uint64_t global_segment_size, uint64_t local_buffer_size,
                       const char* protocol, const char* rdma_devices,
                       const char* master_server_addr);
/* setup(config_dict): n key/value string pairs, the keys of Mooncake's dict
 * form plus kvpool's (docs/c_api.md). */
int kvpool_store_setup_dict(kvpool_store_t* store, const char* const* keys,
                            const char* const* values, size_t n);
int kvpool_store_close(kvpool_store_t* store);
/* "host:port" of the hosted segment ("host:0" for a pure client) copied into
 * buf (NUL-terminated); returns its length, or BUFFER_OVERFLOW if cap is too
 * small. */
int kvpool_store_get_hostname(kvpool_store_t* store, char* buf, size_t cap);
/* 0 when the master answers and the hosted segment is mounted. */
int kvpool_store_health_check(kvpool_store_t* store);

/* Mooncake's mount_segment family: a hosting store (set up with
 * global_segment_size > 0) adds memory to the pool as further segments of
 * its node, each named by a UUID string, and takes it back (docs/c_api.md).
 * As in Mooncake (and the Python binding), every failure of these calls is
 * -1 (KVPOOL_ERR_INTERNAL; the reason is logged): a store that is not set
 * up or hosts no segment, a file that does not open read-write, an offset
 * that is not page-aligned, a range past the file's end, bytes already
 * mounted, a negative size, offset or grace period, an unknown id. Only
 * NULL pointers (store, path, id buffer, id list or an id in it) are
 * KVPOOL_ERR_INVALID_PARAMS, with nothing done. protocol and location are
 * accepted and unused; either may be NULL. */

/* Room for one segment id and its NUL (a UUID: 36 characters). */
enum { KVPOOL_SEGMENT_ID_SIZE = 37 };

/* [offset, offset + size) of the file at path (offset a multiple of the
 * page size) becomes a further segment, served over TCP only; its id is
 * copied into segment_id (cap >= KVPOOL_SEGMENT_ID_SIZE, else
 * KVPOOL_ERR_BUFFER_OVERFLOW with nothing mounted). A size of 0 mounts
 * nothing and returns 0 with segment_id "" (as Mooncake) once the file
 * opens and the offset is valid. The file is never removed or resized. */
int kvpool_store_mount_segment(kvpool_store_t* store, const char* path,
                               int64_t size, int64_t offset,
                               const char* protocol, const char* location,
                               char* segment_id, size_t cap);
/* size bytes rounded up to whole pages of new memory (a file under
 * /dev/shm, removed at unmount) as a further segment; its id into
 * segment_id as above, its size into *allocated_size (may be NULL). A size
 * <= 0 is -1. */
int kvpool_store_allocate_and_mount_segment(kvpool_store_t* store, int64_t size,
                                            const char* protocol,
                                            const char* location,
                                            char* segment_id, size_t cap,
                                            uint64_t* allocated_size);
/* Takes the n segments out of the pool (their values become misses) and
 * lets go of their memory; each id must come from mount_segment, resp.
 * allocate_and_mount_segment (each refuses the other's ids with -1, the
 * other ids of the list still go). 0, or the first error: -1 for an id that
 * is not one, the master's code when it cannot be told (that segment stays
 * mounted). grace_period_seconds >= 0 is accepted; kvpool unmounts at once.
 * close() unmounts every segment mounted so. */
int kvpool_store_unmount_segment(kvpool_store_t* store,
                                 const char* const* segment_ids, size_t n,
                                 int64_t grace_period_seconds);
int kvpool_store_unmount_and_free_segment(kvpool_store_t* store,
                                          const char* const* segment_ids,
                                          size_t n,
                                          int64_t grace_period_seconds);

/* Copies size bytes from value. An existing key is left as it is (0). */
int kvpool_store_put(kvpool_store_t* store, const char* key, const void* value,
                     int64_t size, const kvpool_replicate_config_t* config);
/* Replaces an existing key. */
int kvpool_store_upsert(kvpool_store_t* store, const char* key,
                        const void* value, int64_t size,
                        const kvpool_replicate_config_t* config);

/* Zero-copy forms: buf must lie inside a registered buffer. */
int kvpool_store_register_buffer(kvpool_store_t* store, void* buf,
                                 int64_t size);
int kvpool_store_unregister_buffer(kvpool_store_t* store, void* buf);
int kvpool_store_put_from(kvpool_store_t* store, const char* key,
                          const void* buf, int64_t size,
                          const kvpool_replicate_config_t* config);
int kvpool_store_batch_put_from(kvpool_store_t* store, const char* const* keys,
                                const void* const* bufs, const int64_t* sizes,
                                size_t n,
                                const kvpool_replicate_config_t* config,
                                int* results);
/* Bytes read, or a negative code (BUFFER_OVERFLOW when size is too small,
 * with nothing written). */
int64_t kvpool_store_get_into(kvpool_store_t* store, const char* key, void* buf,
                              int64_t size);
int kvpool_store_batch_get_into(kvpool_store_t* store, const char* const* keys,
                                void* const* bufs, const int64_t* sizes,
                                size_t n, int64_t* results);

/* 1 exists, 0 does not, -1 error. */
int kvpool_store_is_exist(kvpool_store_t* store, const char* key);
/* results[i] as kvpool_store_is_exist; returns 0 unless a key got -1 (then
 * -1) or the arguments are invalid. */
int kvpool_store_batch_is_exist(kvpool_store_t* store, const char* const* keys,
                                size_t n, int* results);
/* Bytes, or a negative code (OBJECT_NOT_FOUND). */
int64_t kvpool_store_get_size(kvpool_store_t* store, const char* key);

/* force: also when a reader holds a lease. */
int kvpool_store_remove(kvpool_store_t* store, const char* key, int force);
/* Objects removed, or a negative code. */
int64_t kvpool_store_remove_all(kvpool_store_t* store, int force);

/* "OBJECT_NOT_FOUND" for -704; "UNKNOWN_ERROR" for values not listed. Never
 * NULL; static storage. */
const char* kvpool_error_name(int code);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVPOOL_C_API_H_ */
