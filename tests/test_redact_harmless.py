"""What is not a secret comes through unchanged: a corpus of real-looking, harmless command
lines, environments and tool output from GPU nodes (torchrun and friends, NCCL/CUDA/SLURM
settings, paths with hashes, GPU UUIDs, gdb/strace/py-spy lines). Also: redacting twice
gives the same text as once, so a second pass at presentation changes nothing.
"""

from __future__ import annotations

import shlex

import pytest

from gputui.redact import redact_argv, redact_env, redact_text

COMMAND_LINES = [
    "torchrun --nnodes 2 --nproc-per-node 8 --rdzv-id 4711 --rdzv-backend c10d "
    "--rdzv-endpoint node17.cluster.local:29400 train.py --config configs/llama-7b.yaml "
    "--max-new-tokens 256 --pin-memory --bf16",
    "torchrun --standalone --nproc_per_node=4 -m trainer.main --lr 3e-4 --warmup-steps 2000 "
    "--global-batch-size 1024 --seq-len 4096 --tokenizer meta-llama/Llama-2-7b-hf",
    "python -m torch.distributed.run --master_addr 10.0.0.12 --master_port 29500 "
    "--node_rank 1 --nnodes 4 pretrain_gpt.py --tensor-model-parallel-size 8 "
    "--num-key-value-heads 8 --use-flash-attn",
    "/opt/conda/envs/train/bin/python -u /workspace/src/train.py --output_dir "
    "/checkpoints/run-20240101_123456-3x9k2j1a --save_steps 500 --report_to wandb",
    "deepspeed --num_gpus 8 --master_port 29501 train.py --deepspeed ds_config.json "
    "--gradient_checkpointing true",
    "accelerate launch --multi_gpu --num_processes 8 --mixed_precision bf16 finetune.py "
    "--use_auth_token --push_to_hub false",
    "srun --overlap --jobid 123456 -N 4 --ntasks-per-node=1 nvidia-smi",
    "mpirun -np 16 -H node1:8,node2:8 -x NCCL_IB_HCA=mlx5_0:1 -x NCCL_DEBUG=INFO "
    "-x LD_LIBRARY_PATH ./all_reduce_perf -b 8 -e 8G -f 2 -g 1",
    "nsys profile -o /tmp/prof-%p --trace cuda,nvtx,osrt python bench.py",
    "mkdir -p /scratch/run42/ckpt",
    "gcc -pthread -O2 -fPIC -I/usr/include/python3.11 -c x.c -o build/x.o",
    "python worker.py --rank 3 --world-size 8 --backend nccl --timeout 600 --seed 1234",
    "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model /models/"
    "models--meta-llama--Llama-2-7b-hf/snapshots/8cca527612d856d7d32bd94f8103728d614eb852 "
    "--tensor-parallel-size 2 --port 8000",
    "ssh -o BatchMode=yes -o ConnectTimeout=5 node3 nvidia-smi --query-gpu=uuid --format=csv",
    "python train.py --eos-token-id 2 --bos_token_id 1 --key-dim 64 --sort_by loss",
]

ENV = {
    "PATH": "/opt/conda/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/bin",
    "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/usr/local/nvidia/lib64",
    "PWD": "/workspace/runs/exp-17",
    "OLDPWD": "/workspace",
    "HOME": "/root",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    "NVIDIA_VISIBLE_DEVICES": (
        "GPU-8f2a3b4c-1d2e-3f4a-5b6c-7d8e9f0a1b2c,GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
    ),
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1",
    "NCCL_IB_PKEY": "0",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_SOCKET_IFNAME": "^lo,docker0",
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,NET",
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_RAS_ADDR": "localhost:28028",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/nccl_trace_rank_",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "8",
    "MASTER_ADDR": "10.0.0.12",
    "MASTER_PORT": "29500",
    "RANK": "3",
    "LOCAL_RANK": "3",
    "WORLD_SIZE": "16",
    "LOCAL_WORLD_SIZE": "8",
    "TORCHELASTIC_RUN_ID": "none",
    "SLURM_JOB_ID": "123456",
    "SLURM_JOB_PARTITION": "gpu-h200",
    "SLURM_STEP_NODELIST": "node[01-04]",
    "HF_HOME": "/data/hf",
    "HF_HUB_ENABLE_HF_TRANSFER": "1",
    "WANDB_PROJECT": "llama-pretrain",
    "WANDB_MODE": "offline",
    "WANDB_RUN_ID": "3x9k2j1a",
    "TRITON_CACHE_DIR": "/root/.triton/cache/4c6f1b2e9d8a7c6b5a4f3e2d1c0b9a8f",
    "SSH_AUTH_SOCK": "/tmp/ssh-XXXXk2LmQ9/agent.4242",
    "XDG_SESSION_ID": "c17",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
    "LS_COLORS": "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01",
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "CONDA_PREFIX": "/opt/conda/envs/train",
    "PYTHONPATH": "/workspace/src:/workspace/third_party/Megatron-LM",
    "LANG": "C.UTF-8",
    "TERM": "xterm-256color",
}

TOOL_LINES = [
    # py-spy
    'Thread 23005 (idle): "MainThread"',
    "    all_reduce (torch/distributed/distributed_c10d.py:2806)",
    "    wait_for_the_data_loader (blocked.py:27)",
    "    get_password (secrets.py:12)",
    "    forward (token_embedding.py:88)",
    "Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)",
    # gdb
    '* 1    Thread 0x7f34383c6b80 (LWP 23005) "python" 0x00007f3437d1a26f in __GI___poll '
    "(fds=0x7fff63b2f7f8, nfds=1, timeout=60000) at ../sysdeps/unix/sysv/linux/poll.c:29",
    "#0  __futex_abstimed_wait_common64 (private=<optimized out>, cancel=true, "
    "abstime=0x7f343761d9f0, op=137, expected=0, futex_word=0x7f3430000bf0) at "
    "./nptl/futex-internal.c:57",
    "#1  __futex_abstimed_wait_common (futex_word=futex_word@entry=0x7f3430000bf0, "
    "expected=expected@entry=0, clockid=clockid@entry=1, abstime=abstime@entry=0x7f343761d9f0, "
    "private=<optimized out>, cancel=cancel@entry=true) at ./nptl/futex-internal.c:87",
    "#6  0x00007f34380a93fc in PyThread_acquire_lock_timed (lock=lock@entry=0x7f3430000bf0, "
    "microseconds=microseconds@entry=10000, intr_flag=intr_flag@entry=1) at "
    "Python/thread_pthread.h:483",
    "#12 0x00007f0c in ncclDevKernel_AllReduce_Sum_f32_RING_LL () from "
    "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
    "#3  0x00007f in c10d::ProcessGroupNCCL::WorkNCCL::synchronize() () from "
    "/opt/conda/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so",
    'Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".',
    # strace
    "[pid 23006] 13:54:18.379548 futex(0x7f3430000bf0, FUTEX_WAIT_BITSET_PRIVATE, 0, "
    "{tv_sec=1920, tv_nsec=997037771}, FUTEX_BITSET_MATCH_ANY) = -1 ETIMEDOUT "
    "(Connection timed out)",
    "13:54:18.404716 rt_sigaction(SIGPIPE, {sa_handler=SIG_DFL, sa_mask=[], "
    "sa_flags=SA_RESTORER|SA_ONSTACK, sa_restorer=0x7f3437c5a050}, NULL, 8) = 0",
    '13:54:18.401 openat(AT_FDCWD, "/proc/self/status", O_RDONLY|O_CLOEXEC) = 8',
    '13:54:18.402 execve("/usr/bin/nvidia-smi", ["nvidia-smi", "topo", "-m"], 0x7ffd /* 20 '
    "vars */) = 0",
    '13:54:18.403 write(2, "NCCL INFO Channel 00/32 : 0 1 2 3\\n", 35) = 35',
    '13:54:18.404 sendmsg(57, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base="\\0\\0\\0\\1",'
    " iov_len=4}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 4",
    # nvidia-smi
    "GPU0     X      NV18    0-47    0               N/A",
    "GPU-8f2a3b4c-1d2e-3f4a-5b6c-7d8e9f0a1b2c  MIG-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
    # numbers, versions, hashes
    "step 1200 loss 1.8342 lr 2.9e-4 tokens/s 412345 grad_norm 0.97",
    "commit 8cca527612d856d7d32bd94f8103728d614eb852 on torch 2.6.0+cu124",
]


@pytest.mark.parametrize("line", COMMAND_LINES)
def test_harmless_command_lines_come_through_unchanged(line):
    assert redact_text(line) == line
    argv = shlex.split(line)
    assert redact_argv(argv) == argv


def test_a_harmless_environment_comes_through_unchanged():
    assert redact_env(ENV) == ENV


@pytest.mark.parametrize("line", TOOL_LINES)
def test_harmless_tool_output_comes_through_unchanged(line):
    assert redact_text(line) == line


SECRET_LINES = [
    "python t.py -p s1 --pw s2 -ps3 --api-key=s4 PASS=s5 -u a:s6",
    "postgres://u:p@ss/w0rd@db:5432/x?token=s7&sslmode=require",
    '{"password": "s8", "nested": {"api_key": "s9"}}',
    'write(3, "\\1\\2token=s10\\n", 12) = 12',
    'execve("/bin/x", ["x", "-ps11", "--password", "s12"], 0x1 /* 2 vars */) = 0',
    '#1 f (password=0x55 "s13", url=0x56 "redis://:s14@h:1") at f.c:1',
    "Authorization: Bearer s15abcdefghij",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    "key ghp_abcdefghijklmnopqrstuvwxyz0123456789 and Xk9mQ2vL7rT4wZ8bYt6Re3Wq",
]


@pytest.mark.parametrize("line", SECRET_LINES)
def test_redacting_twice_changes_nothing_more(line):
    once = redact_text(line)
    assert once != line
    assert redact_text(once) == once
