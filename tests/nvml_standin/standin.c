/*
 * A stand-in libnvidia-ml.so.1 for gputui's tests: the failures no real GPU gives on demand.
 *
 * nvidia-ml-py opens the library by name (CDLL("libnvidia-ml.so.1")), so a test that puts
 * the directory holding this build first on LD_LIBRARY_PATH of a gputui subprocess selects
 * it. It answers the entry points gputui calls with the readings of two idle H200 GPUs
 * (as recorded in tests/data/h200x2-trace.jsonl.gz: ~78 W of a 700 W limit, 345 MHz SM
 * clock, 143771 MiB, no process)
 * until the failure chosen by GPUTUI_STANDIN_NVML starts. The value is a comma-separated
 * list of:
 *
 *   ok                  no failure (the default)
 *   hang_init           nvmlInit never returns
 *   hang_read_after:N   the first N calls of nvmlDeviceGetUtilizationRates (one per GPU per
 *                       sample) return; from the next one on, every call that takes a device
 *                       never returns
 *   hang_read           hang_read_after:0: the first read of a sample never returns
 *   hang_shutdown       nvmlShutdown never returns
 *   lost                every call that takes a device returns GPU_IS_LOST (handles too)
 *   lost_after:N        as hang_read_after:N, but the calls return GPU_IS_LOST
 *   bad_name            GPU 0's name is not UTF-8
 *   init_error          nvmlInit fails with Unknown Error (a driver that is there but broken)
 *   no_driver           nvmlInit fails with Driver Not Loaded
 *   spin                both GPUs spin in a collective: util 100 %, no memory traffic, idle
 *                       power (the hang pattern the detector looks for)
 *   spin_gpu:G          only GPU G spins (its peer idles: the rank the other waits for)
 *
 * With GPUTUI_STANDIN_PIDS=P0,P1, GPU i runs process Pi (a real process a test started, e.g.
 * a rank of a gloo job), so gputui reads its command line and environment like a rank's.
 *
 * GPU health (each GPU is healthy unless one of these names it):
 *
 *   xid:G:N             GPU G raises Xid N once: the first nvmlEventSetWait on a set that
 *                       has GPU G registered returns it (then waits time out)
 *   ecc:G:N             GPU G has N volatile (and aggregate) uncorrected ECC errors
 *   remap_pending:G     GPU G has a row remap pending (one uncorrectable row remapped)
 *   lost_gpu:G          only GPU G answers GPU_IS_LOST, from the start (handles too)
 *   no_events           nvmlEventSetCreate answers Not Supported (a vGPU, MIG)
 *
 * Retired pages and NVLink answer Not Supported (an H100 VM without NVLink); the PCI bus
 * of GPU G is 0000:1G:00 (GPU 0 at PCI:0000:10:00, GPU 1 at PCI:0000:11:00).
 *
 *   busy_pid:N          GPU 0 runs process N (1 GiB), a job's rank for the probe to refuse
 *
 * With GPUTUI_STANDIN_LOG=FILE, the name of every entry point is appended to FILE as it is
 * entered (before any hang), so a test can tell which calls were made, and which never were.
 *
 * Like a real driver library, it serializes calls on one lock, and a call that never returns
 * holds it. Its destructor takes that lock too, so a process that exits the ordinary way
 * (running library destructors) while a call hangs never ends: the worst case gputui must
 * survive, which is why it leaves through _exit when a call is stuck.
 */
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct { int index; } gpu_t;
typedef gpu_t *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define NGPU 2
#define MIB (1024ULL * 1024ULL)
#define MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24)))

static gpu_t gpus[NGPU] = {{0}, {1}};
static const char *uuids[NGPU] = {
    "GPU-549afb26-e13b-c2a8-a9b1-fd78b6f5476a",
    "GPU-518262ad-7539-d871-723f-12b5d7ad6471",
};
static const unsigned int power_mw[NGPU] = {80276, 78139};
static const unsigned int temp_c[NGPU] = {38, 39};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int parsed, initialized, log_fd = -1;
static long util_reads;  /* calls of nvmlDeviceGetUtilizationRates so far */

static struct {
    int hang_init, hang_shutdown, lost, bad_name, init_error, no_driver, spin, spin_gpu;
    unsigned int pids[NGPU];
    long hang_read_after, lost_after;  /* -1: never */
    int xid_gpu, xid, ecc[NGPU], remap_pending[NGPU], lost_gpu, no_events;  /* gpu -1: none */
} mode;
static int xid_delivered;

static void parse_mode(void) {
    if (parsed) return;
    parsed = 1;
    mode.hang_read_after = mode.lost_after = -1;
    mode.xid_gpu = mode.lost_gpu = mode.spin_gpu = -1;
    const char *log = getenv("GPUTUI_STANDIN_LOG");
    if (log && *log) log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    const char *env = getenv("GPUTUI_STANDIN_NVML");
    char buf[256];
    strncpy(buf, env ? env : "ok", sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "hang_init")) mode.hang_init = 1;
        else if (!strcmp(tok, "hang_shutdown")) mode.hang_shutdown = 1;
        else if (!strcmp(tok, "hang_read")) mode.hang_read_after = 0;
        else if (!strncmp(tok, "hang_read_after:", 16)) mode.hang_read_after = atol(tok + 16);
        else if (!strcmp(tok, "lost")) mode.lost = 1;
        else if (!strncmp(tok, "lost_after:", 11)) mode.lost_after = atol(tok + 11);
        else if (!strcmp(tok, "bad_name")) mode.bad_name = 1;
        else if (!strcmp(tok, "init_error")) mode.init_error = 1;
        else if (!strcmp(tok, "no_driver")) mode.no_driver = 1;
        else if (!strcmp(tok, "no_events")) mode.no_events = 1;
        else if (!strncmp(tok, "xid:", 4)) {
            char *end = NULL;
            mode.xid_gpu = (int)strtol(tok + 4, &end, 10);
            mode.xid = (end && *end == ':') ? atoi(end + 1) : 0;
        } else if (!strncmp(tok, "ecc:", 4)) {
            char *end = NULL;
            long g = strtol(tok + 4, &end, 10);
            if (g >= 0 && g < NGPU && end && *end == ':') mode.ecc[g] = atoi(end + 1);
        } else if (!strncmp(tok, "remap_pending:", 14)) {
            long g = atol(tok + 14);
            if (g >= 0 && g < NGPU) mode.remap_pending[g] = 1;
        } else if (!strncmp(tok, "lost_gpu:", 9)) mode.lost_gpu = atoi(tok + 9);
        else if (!strcmp(tok, "spin")) mode.spin = 1;
        else if (!strncmp(tok, "spin_gpu:", 9)) mode.spin_gpu = atoi(tok + 9);
        else if (!strncmp(tok, "busy_pid:", 9)) mode.pids[0] = (unsigned int)atol(tok + 9);
    }
    const char *pids = getenv("GPUTUI_STANDIN_PIDS");
    for (int i = 0; pids && *pids && i < NGPU; i++) {
        mode.pids[i] = (unsigned int)strtoul(pids, (char **)&pids, 10);
        if (*pids == ',') pids++;
    }
}

/* Never returns, and keeps the lock: what a wedged driver call looks like from outside. */
static void hang(void) {
    for (;;) pause();
}

static void note(const char *fn) {
    if (log_fd < 0) return;
    char line[128];
    size_t n = strlen(fn);
    if (n > sizeof line - 2) n = sizeof line - 2;
    memcpy(line, fn, n);
    line[n] = '\n';
    if (write(log_fd, line, n + 1) < 0) { /* a test log: nothing to do */ }
}

#define ENTER() do { pthread_mutex_lock(&lock); parse_mode(); note(__func__); } while (0)
#define LEAVE(r) do { nvmlReturn_t r_ = (r); pthread_mutex_unlock(&lock); return r_; } while (0)

/* Every call that takes a device goes through here first (with the lock held). */
static nvmlReturn_t gate(nvmlDevice_t d) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (mode.lost || (mode.lost_after >= 0 && util_reads > mode.lost_after))
        return NVML_ERROR_GPU_IS_LOST;
    if (mode.hang_read_after >= 0 && util_reads > mode.hang_read_after) hang();
    if (d != &gpus[0] && d != &gpus[1]) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->index == mode.lost_gpu) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

#define DEVICE_CALL(d) do { ENTER(); nvmlReturn_t g_ = gate(d); if (g_) LEAVE(g_); } while (0)

__attribute__((destructor)) static void at_unload(void) {
    pthread_mutex_lock(&lock);  /* waits forever if a call hangs: see the header */
    pthread_mutex_unlock(&lock);
}

const char *nvmlErrorString(nvmlReturn_t r) {  /* no lock: pynvml calls it to print errors */
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    ENTER();
    if (mode.hang_init) hang();
    if (mode.no_driver) LEAVE(NVML_ERROR_DRIVER_NOT_LOADED);
    if (mode.init_error) LEAVE(NVML_ERROR_UNKNOWN);
    initialized++;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    ENTER();
    if (mode.hang_shutdown) hang();
    if (!initialized) LEAVE(NVML_ERROR_UNINITIALIZED);
    initialized--;
    LEAVE(NVML_SUCCESS);
}

static nvmlReturn_t copy_string(const char *s, char *out, unsigned int len) {
    if (!out || strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, s);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len) {
    ENTER();
    if (!initialized) LEAVE(NVML_ERROR_UNINITIALIZED);
    LEAVE(copy_string("580.159.04", version, len));
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    ENTER();
    if (!initialized) LEAVE(NVML_ERROR_UNINITIALIZED);
    *count = NGPU;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    DEVICE_CALL(&gpus[index < NGPU ? index : 0]);
    if (index >= NGPU) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *device = &gpus[index];
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) {
    DEVICE_CALL(d);
    LEAVE(copy_string(mode.bad_name && d->index == 0 ? "NVIDIA H200 \xff\xfe\xc3" : "NVIDIA H200",
                      name, len));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) {
    DEVICE_CALL(d);
    LEAVE(copy_string(uuids[d->index], uuid, len));
}

static const unsigned long long TOTAL = 143771ULL * MIB, RESERVED = 614ULL * MIB;

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    DEVICE_CALL(d);
    m->total = TOTAL;
    m->used = RESERVED + MIB;  /* v1 counts the driver's reservation as used */
    m->free = m->total - m->used;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    DEVICE_CALL(d);
    if (m->version != MEMORY_V2_VERSION) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m->total = TOTAL;
    m->reserved = RESERVED;
    m->used = MIB;
    m->free = m->total - m->reserved - m->used;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    ENTER();
    util_reads++;  /* counted before the gate: call N+1 is the one that fails */
    nvmlReturn_t g = gate(d);
    if (g) LEAVE(g);
    u->gpu = mode.spin || d->index == mode.spin_gpu ? 100 : 0;
    u->memory = 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_CALL(d);
    *mw = power_mw[d->index];
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_CALL(d);
    *mw = 700000;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t) {
    DEVICE_CALL(d);
    if (sensor != 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *t = temp_c[d->index];
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    DEVICE_CALL(d);
    switch (type) {
    case 0: *mhz = 345; break;   /* graphics */
    case 1: *mhz = 345; break;   /* SM */
    case 2: *mhz = 3201; break;  /* memory */
    default: LEAVE(NVML_ERROR_NOT_SUPPORTED);
    }
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, int *pstate) {
    DEVICE_CALL(d);
    *pstate = 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r) {
    DEVICE_CALL(d);
    *r = 1;  /* GPU idle */
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r) {
    return nvmlDeviceGetCurrentClocksEventReasons(d, r);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                     nvmlProcessInfo_t *infos) {
    DEVICE_CALL(d);
    unsigned int pid = mode.pids[d->index];
    if (!pid) {
        *count = 0;  /* idle GPUs: no process */
        LEAVE(NVML_SUCCESS);
    }
    if (!infos || *count < 1) {
        *count = 1;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    *count = 1;
    infos[0].pid = pid;
    infos[0].usedGpuMemory = 1024 * MIB;
    infos[0].gpuInstanceId = infos[0].computeInstanceId = 0xFFFFFFFF;
    LEAVE(NVML_SUCCESS);
}

/* ---------------------------------------------------------------- GPU health */

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    DEVICE_CALL(d);
    memset(p, 0, sizeof *p);
    p->domain = 0;
    p->bus = 0x10 + (unsigned int)d->index;
    p->device = 0;
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
                                         unsigned long long *count) {
    (void)counter;
    DEVICE_CALL(d);
    *count = type == 1 ? (unsigned long long)mode.ecc[d->index] : 0;  /* 1: uncorrected */
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
    DEVICE_CALL(d);
    *corr = 0;
    *unc = (unsigned int)mode.remap_pending[d->index];
    *pending = (unsigned int)mode.remap_pending[d->index];
    *failure = 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending) {
    (void)pending;
    DEVICE_CALL(d);
    LEAVE(NVML_ERROR_NOT_SUPPORTED);  /* H100 remaps rows instead */
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned int *value) {
    DEVICE_CALL(d);
    *value = 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, unsigned int *active) {
    (void)link; (void)active;
    DEVICE_CALL(d);
    LEAVE(NVML_ERROR_NOT_SUPPORTED);  /* a VM's GPU without NVLink */
}

typedef struct { int registered[NGPU]; } event_set_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

static event_set_t the_set;

nvmlReturn_t nvmlEventSetCreate(event_set_t **set) {
    ENTER();
    if (!initialized) LEAVE(NVML_ERROR_UNINITIALIZED);
    if (mode.no_events) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    memset(&the_set, 0, sizeof the_set);
    *set = &the_set;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
    DEVICE_CALL(d);
    *types = 0xff9f;  /* what the H100 answered */
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, event_set_t *set) {
    (void)types;
    DEVICE_CALL(d);
    set->registered[d->index] = 1;
    LEAVE(NVML_SUCCESS);
}

/* Waits without the lock held, as the driver does: other calls go on meanwhile. */
nvmlReturn_t nvmlEventSetWait_v2(event_set_t *set, nvmlEventData_t *data, unsigned int ms) {
    ENTER();
    if (!initialized) LEAVE(NVML_ERROR_UNINITIALIZED);
    int g = mode.xid_gpu;
    if (!xid_delivered && g >= 0 && g < NGPU && set->registered[g]) {
        xid_delivered = 1;
        memset(data, 0, sizeof *data);
        data->device = &gpus[g];
        data->eventType = 0x8;  /* nvmlEventTypeXidCriticalError */
        data->eventData = (unsigned long long)mode.xid;
        LEAVE(NVML_SUCCESS);
    }
    pthread_mutex_unlock(&lock);
    usleep(ms * 1000U);
    return NVML_ERROR_TIMEOUT;
}
nvmlReturn_t nvmlEventSetWait(event_set_t *set, nvmlEventData_t *data, unsigned int ms) {
    return nvmlEventSetWait_v2(set, data, ms);
}

nvmlReturn_t nvmlEventSetFree(event_set_t *set) {
    (void)set;
    ENTER();
    LEAVE(NVML_SUCCESS);
}
