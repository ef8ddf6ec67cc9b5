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
 *   spin_gpu:G          only GPU G spins; the other is idle (a rank its peer waits for)
 *   busy                every GPU computes, as under a balanced training job: util 93-100 %,
 *                       memory util 35-60 %, 560-690 W, 1980 MHz, 60 GiB used, each figure
 *                       changing from one sample to the next (what a dashboard repaints)
 *
 * With GPUTUI_STANDIN_PIDS=P0,P1, GPU i runs process Pi (a real process a test started, e.g.
 * a rank of a gloo job), so gputui reads its command line and environment like a rank's.
 *
 * It also answers what other monitors ask of an H200 (nvitop, for the side-by-side cost
 * benchmark in bench/app_cpu.py): the power management limit, graphics processes (none),
 * persistence mode (on), compute mode (default), display (off), encoder and decoder (0 %),
 * the CUDA driver version, per-process utilization; fan speed and driver model answer Not
 * Supported, as on an H200 SXM under Linux.
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
 * Retired pages answer Not Supported (an H100 remaps rows instead); so does NVLink (an H100
 * VM without NVLink) unless GPUTUI_STANDIN_NVLINK says otherwise (below). The PCI bus of GPU G
 * is 0000:1G:00 (GPU 0 at PCI:0000:10:00, GPU 1 at PCI:0000:11:00).
 *
 *   nvlink_counter_na:C nvmlDeviceGetNvLinkErrorCounter answers Not Supported for counter C
 *                       (and GPUTUI_STANDIN_LOG gets a line "nvlink_counter_na_asked" each time)
 *   hang_nvlink         the first nvmlDeviceGetNvLinkErrorCounter call never returns
 *
 * The node's shape and its NVLinks, each from its own variable:
 *
 *   GPUTUI_STANDIN_GPUS=N           N GPUs (1-8; default 2), each an idle H200
 *   GPUTUI_STANDIN_NVLINK=L         each GPU has L NVLinks up (0-18; default 0: Not Supported)
 *   GPUTUI_STANDIN_NVLINK_COST_US=U each nvmlDeviceGetNvLinkErrorCounter call burns U us of
 *                                   the calling thread's CPU time, under the library's lock
 *                                   (default 800: what driver 580 charges per (counter, link)
 *                                   read on an H200)
 *   GPUTUI_STANDIN_NVLINK_CLIMB=G:L[:R]  link L of GPU G has its CRC flit errors climb by R a
 *                                   second (default 100, i.e. 6,000 a minute)
 *
 * Every link counts as a healthy H200 link does: 445 errors since boot (8,010 a GPU over 18
 * links: replay 100, recovery 1, CRC flit 300, CRC data 44) and 15 more a minute (replay 3,
 * CRC flit 12), counted from the first nvmlInit.
 *
 *   busy_pid:N          GPU 0 runs process N (1 GiB), a job's rank for the probe to refuse
 *   power_limit_after:N:W  after N calls of nvmlDeviceGetUtilizationRates (N/GPUs samples),
 *                       every GPU's enforced power limit is W watts instead of 700 (an
 *                       administrator's `nvidia-smi -pl W` while gputui runs)
 *   nvlink_down_after:N:L  after N calls of nvmlDeviceGetUtilizationRates, NVLink L of every
 *                       GPU is down (inactive); needs GPUTUI_STANDIN_NVLINK above L
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
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct { int index; } gpu_t;
typedef gpu_t *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
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

#define NGPU 8  /* at most; GPUTUI_STANDIN_GPUS picks how many are listed (default 2) */
#define NLINK 18  /* NVLinks per GPU at most (an H100/H200 has 18) */
#define MIB (1024ULL * 1024ULL)
#define MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24)))

static gpu_t gpus[NGPU] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static const char *uuids[NGPU] = {
    "GPU-549afb26-e13b-c2a8-a9b1-fd78b6f5476a",
    "GPU-518262ad-7539-d871-723f-12b5d7ad6471",
    "GPU-7d0c64b3-1f2e-4a55-9c1e-0b8f4a2d3e62",
    "GPU-a3e51c90-6b7d-4e28-8f03-5c9d21e7b4a3",
    "GPU-0f9b2d47-c8a1-4d6e-b5f2-93e0a6c1d7b4",
    "GPU-c61e8a05-2d3f-4b9c-a7e4-f1b08d5c2e95",
    "GPU-e4a7b912-5c0d-4f63-8e1b-2d9f6a0c3b76",
    "GPU-3b8f0e6c-a4d2-4c17-9f5e-7a1c2b0d8e47",
};
static const unsigned int power_mw[NGPU] = {80276, 78139, 79012, 80554, 77893, 78620, 79347, 80101};
static const unsigned int temp_c[NGPU] = {38, 39, 38, 40, 37, 39, 38, 39};
static int ngpu = 2;  /* GPUs listed */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int parsed, initialized, log_fd = -1;
static long util_reads;  /* calls of nvmlDeviceGetUtilizationRates so far */

/* NVLink (see the header): links per GPU, the CPU each error-counter read costs, the link
   whose counters climb fast, and the time the counters count from (the first nvmlInit). */
static struct {
    int links;
    long cost_us;
    int climb_gpu, climb_link;
    double climb_per_s;
    int counter_na;  /* this counter answers Not Supported (-1: none) */
    double t0;
    int hang;  /* the first error-counter read never returns */
} nvl = {0, 800, -1, -1, 100.0, -1, -1.0, 0};

static struct {
    int hang_init, hang_shutdown, lost, bad_name, init_error, no_driver, spin, spin_gpu, busy;
    unsigned int pids[NGPU];
    long hang_read_after, lost_after, limit_after, down_after;  /* -1: never */
    unsigned int limit_w, down_link;
    int xid_gpu, xid, ecc[NGPU], remap_pending[NGPU], lost_gpu, no_events;  /* gpu -1: none */
} mode;
static int xid_delivered;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void parse_mode(void) {
    if (parsed) return;
    parsed = 1;
    mode.hang_read_after = mode.lost_after = mode.limit_after = mode.down_after = -1;
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
        else if (!strcmp(tok, "busy")) mode.busy = 1;
        else if (!strncmp(tok, "busy_pid:", 9)) mode.pids[0] = (unsigned int)atol(tok + 9);
        else if (!strncmp(tok, "nvlink_counter_na:", 18)) nvl.counter_na = atoi(tok + 18);
        else if (!strcmp(tok, "hang_nvlink")) nvl.hang = 1;
        else if (!strncmp(tok, "power_limit_after:", 18)) {
            char *end = NULL;
            mode.limit_after = strtol(tok + 18, &end, 10);
            mode.limit_w = (end && *end == ':') ? (unsigned int)atoi(end + 1) : 500;
        } else if (!strncmp(tok, "nvlink_down_after:", 18)) {
            char *end = NULL;
            mode.down_after = strtol(tok + 18, &end, 10);
            mode.down_link = (end && *end == ':') ? (unsigned int)atoi(end + 1) : 0;
        }
    }
    const char *n = getenv("GPUTUI_STANDIN_GPUS");
    if (n && *n) {
        ngpu = atoi(n);
        if (ngpu < 1) ngpu = 1;
        if (ngpu > NGPU) ngpu = NGPU;
    }
    const char *links = getenv("GPUTUI_STANDIN_NVLINK");
    if (links && *links) {
        nvl.links = atoi(links);
        if (nvl.links < 0) nvl.links = 0;
        if (nvl.links > NLINK) nvl.links = NLINK;
    }
    const char *cost = getenv("GPUTUI_STANDIN_NVLINK_COST_US");
    if (cost && *cost) nvl.cost_us = atol(cost) < 0 ? 0 : atol(cost);
    const char *climb = getenv("GPUTUI_STANDIN_NVLINK_CLIMB");
    if (climb && *climb) {
        char *end = NULL;
        nvl.climb_gpu = (int)strtol(climb, &end, 10);
        nvl.climb_link = (end && *end == ':') ? (int)strtol(end + 1, &end, 10) : -1;
        if (end && *end == ':') nvl.climb_per_s = strtod(end + 1, NULL);
    }
    const char *pids = getenv("GPUTUI_STANDIN_PIDS");
    for (int i = 0; pids && *pids && i < ngpu; i++) {
        mode.pids[i] = (unsigned int)strtoul(pids, (char **)&pids, 10);
        if (*pids == ',') pids++;
    }
}

/* A figure of a busy GPU that changes from one sample to the next: lo..hi, stepped by the
   sample count (one nvmlDeviceGetUtilizationRates per GPU per sample) and the GPU. */
static unsigned int wobble(int gpu, unsigned int lo, unsigned int hi, unsigned int salt) {
    unsigned long x = (unsigned long)(util_reads / (ngpu ? ngpu : 1)) * 2654435761UL;
    x ^= (unsigned long)(gpu + 1) * 40503UL + salt * 97UL;
    x ^= x >> 13;
    return lo + (unsigned int)(x % (hi - lo + 1));
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
    if (d < &gpus[0] || d >= &gpus[ngpu]) return NVML_ERROR_INVALID_ARGUMENT;
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
    case NVML_ERROR_NOT_FOUND: return "Not Found";
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
    if (nvl.t0 < 0) nvl.t0 = now_s();
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
    *count = (unsigned int)ngpu;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    DEVICE_CALL(&gpus[index < (unsigned int)ngpu ? index : 0]);
    if (index >= (unsigned int)ngpu) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
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
    m->used = RESERVED + (mode.busy ? wobble(d->index, 61000, 61400, 5) * MIB : MIB);  /* v1 counts the driver's reservation as used */
    m->free = m->total - m->used;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    DEVICE_CALL(d);
    if (m->version != MEMORY_V2_VERSION) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m->total = TOTAL;
    m->reserved = RESERVED;
    m->used = mode.busy ? wobble(d->index, 61000, 61400, 5) * MIB : MIB;
    m->free = m->total - m->reserved - m->used;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    ENTER();
    util_reads++;  /* counted before the gate: call N+1 is the one that fails */
    nvmlReturn_t g = gate(d);
    if (g) LEAVE(g);
    u->gpu = (mode.spin || (int)d->index == mode.spin_gpu) ? 100
             : mode.busy                                      ? wobble(d->index, 93, 100, 1)
                                                              : 0;
    u->memory = mode.busy ? wobble(d->index, 35, 60, 2) : 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_CALL(d);
    *mw = mode.busy ? wobble(d->index, 560000, 690000, 3) : power_mw[d->index];
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_CALL(d);
    *mw = (mode.limit_after >= 0 && util_reads > mode.limit_after) ? mode.limit_w * 1000 : 700000;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t) {
    DEVICE_CALL(d);
    if (sensor != 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *t = mode.busy ? wobble(d->index, 62, 66, 4) : temp_c[d->index];
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    DEVICE_CALL(d);
    switch (type) {
    case 0: *mhz = mode.busy ? 1980 : 345; break;   /* graphics */
    case 1: *mhz = mode.busy ? 1980 : 345; break;   /* SM */
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
    *r = mode.busy ? 0 : 1;  /* none, or GPU idle */
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

/* ---------------------------------------------------------------- what nvitop also asks */

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *mw) {
    DEVICE_CALL(d);
    *mw = 700000;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                      nvmlProcessInfo_t *infos) {
    (void)infos;
    DEVICE_CALL(d);
    *count = 0;  /* no graphics contexts on a compute node */
    LEAVE(NVML_SUCCESS);
}

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *s,
                                             unsigned int *count, unsigned long long last) {
    (void)last;
    DEVICE_CALL(d);
    unsigned int pid = mode.pids[d->index];
    if (!pid) LEAVE(NVML_ERROR_NOT_FOUND);  /* no sample since `last` */
    if (!s || *count < 1) {
        *count = 1;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    *count = 1;
    s[0].pid = pid;
    s[0].timeStamp = (unsigned long long)(now_s() * 1e6);
    s[0].smUtil = mode.busy ? wobble(d->index, 93, 100, 1) : 0;
    s[0].memUtil = mode.busy ? wobble(d->index, 35, 60, 2) : 0;
    s[0].encUtil = s[0].decUtil = 0;
    LEAVE(NVML_SUCCESS);
}

static nvmlReturn_t one_uint(nvmlDevice_t d, unsigned int *out, unsigned int v) {
    nvmlReturn_t g = gate(d);
    if (g) return g;
    *out = v;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, unsigned int *on) {
    ENTER();
    LEAVE(one_uint(d, on, 1));
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, unsigned int *m) {
    ENTER();
    LEAVE(one_uint(d, m, 0));  /* default */
}

nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t d, unsigned int *on) {
    ENTER();
    LEAVE(one_uint(d, on, 0));
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *us) {
    ENTER();
    *us = 167000;
    LEAVE(one_uint(d, u, 0));
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *us) {
    ENTER();
    *us = 167000;
    LEAVE(one_uint(d, u, 0));
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned int *pct) {
    (void)pct;
    DEVICE_CALL(d);
    LEAVE(NVML_ERROR_NOT_SUPPORTED);  /* an SXM module has no fan of its own */
}

nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t d, int *current, int *pending) {
    (void)current, (void)pending;
    DEVICE_CALL(d);
    LEAVE(NVML_ERROR_NOT_SUPPORTED);  /* Windows only */
}
nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t d, int *current, int *pending) {
    return nvmlDeviceGetDriverModel_v2(d, current, pending);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    ENTER();
    if (!initialized) LEAVE(NVML_ERROR_UNINITIALIZED);
    *version = 13000;
    LEAVE(NVML_SUCCESS);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    return nvmlSystemGetCudaDriverVersion_v2(version);
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
    DEVICE_CALL(d);
    if (!nvl.links) LEAVE(NVML_ERROR_NOT_SUPPORTED);  /* a VM's GPU without NVLink */
    if (link >= (unsigned int)nvl.links) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *active = !(mode.down_after >= 0 && util_reads > mode.down_after && link == mode.down_link);
    LEAVE(NVML_SUCCESS);
}

/* Burns `us` microseconds of this thread's CPU time: the driver's cost of one counter read
   (CPU time, not wall time, so a loaded machine charges the same CPU per read). */
static void burn_cpu(long us) {
    struct timespec a, b;
    if (us <= 0 || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a)) return;
    do {
        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b)) return;
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000L < us);
}

/* A healthy link: 8,010 errors since boot summed over a GPU's 18 links (what healthy 4 x
   H200 GPUs read: 7,300-8,400) and 15 more a minute per link (270 a GPU); the climbing link
   adds GPUTUI_STANDIN_NVLINK_CLIMB's rate to its CRC flit errors. */
nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned int link, int counter,
                                             unsigned long long *value) {
    static const unsigned long long base[4] = {100, 1, 300, 44};  /* replay, recovery, flit, data */
    static const double per_min[4] = {3.0, 0.0, 12.0, 0.0};
    DEVICE_CALL(d);
    if (!nvl.links) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    if (link >= (unsigned int)nvl.links) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (nvl.hang) hang();  /* with the lock held: every other call waits too */
    if (counter == nvl.counter_na) {
        note("nvlink_counter_na_asked");  /* a test counts how often the n/a one was asked */
        LEAVE(NVML_ERROR_NOT_SUPPORTED);
    }
    if (counter < 0 || counter > 3) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    burn_cpu(nvl.cost_us);
    double s = now_s() - nvl.t0;
    double v = (double)base[counter] + per_min[counter] * s / 60.0;
    if (counter == 2 && d->index == nvl.climb_gpu && (int)link == nvl.climb_link)
        v += nvl.climb_per_s * s;
    *value = (unsigned long long)v;
    LEAVE(NVML_SUCCESS);
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
    if (!xid_delivered && g >= 0 && g < ngpu && set->registered[g]) {
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
