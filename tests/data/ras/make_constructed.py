# ruff: noqa: UP031 - printf formats on purpose: they are NCCL's own, copied from its C source
"""Write the constructed multi-rank RAS answers of this folder (see README.md).

Each answer is printed with the format strings of NCCL's src/ras/client_support.cc
(`rasClientRunInit`, `rasClientRunComms`, `jsonWriteHeader`, `jsonStartCommunicator`,
`jsonWriteRankData`, `jsonWriteMissingRank`, `jsonWriteFooter`), for situations that need
2+ GPUs to capture. Run it from anywhere: `python tests/data/ras/make_constructed.py`.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
OPS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
HASH = 0x5A5605DC3A5F6DA2


def text_head(nodes, per_node, procs, gpus, comm_s):
    return (
        "NCCL version 2.28.9 compiled with CUDA 13.0\n"
        "CUDA runtime version 13000, driver version 13000\n\n"
        "Job summary\n===========\n\n"
        "  Nodes  Processes         GPUs  Processes     GPUs\n"
        "(total)   per node  per process    (total)  (total)\n"
        "%7d  %9d  %11d  %9d  %7d\n"
        % (nodes, per_node, 1, procs, gpus)
        + "\nCommunicators... (%.3fs)\n=============\n\n" % comm_s
        + "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
    )


def row(g, comms, nodes, per_node, per_comm, in_group, status, errors):
    return "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\n" % (
        g,
        comms,
        nodes,
        per_node,
        per_comm,
        in_group,
        status,
        errors,
    )


def gpu(pid, host, dev):
    return "GPU %d managed by process %d on node %s" % (dev, pid, host)


def json_answer(ranks, missing=(), size=None, comm_s=0.004, timeouts=0):
    out = [
        "{\n",
        '  "nccl_version": "%s",\n' % "2.28.9",
        '  "cuda_runtime_version": %d,\n' % 13000,
        '  "cuda_driver_version": %d,\n' % 13000,
        '  "timestamp": "%s",\n' % "2026-11-23 11:52:10",
        '  "communicators_count": %d,\n' % 1,
        '  "communicators": [\n',
        "    {\n",
        '      "hash": "0x%x",\n' % HASH,
        '      "secondary_hash": "0x%x:0x%x",\n' % (0x7E1C59CD1DF6176E, 0xBBF00FD5CBDBEF1E),
        '      "size": %d,\n' % (size or len(ranks) + len(missing)),
        '      "ranks_count": %d,\n' % len(ranks),
        '      "missing_ranks_count": %d,\n' % len(missing),
        '      "ranks": [\n',
    ]
    for i, r in enumerate(ranks):
        if i:
            out.append(",\n")
        out += [
            "        {\n",
            '          "rank": %d,\n' % r["rank"],
            '          "host": "%s",\n' % r["host"],
            '          "pid": %d,\n' % r["pid"],
            '          "cuda_dev": %d,\n' % r["dev"],
            '          "nvml_dev": %d,\n' % r["dev"],
            '          "status": {\n',
            '            "init_state": %d,\n' % r.get("init", 0),
            '            "async_error": %d,\n' % r.get("async", 0),
            '            "finalize_called": %s,\n' % "false",
            '            "destroy_flag": %s,\n' % "false",
            '            "abort_flag": %s\n' % ("true" if r.get("abort") else "false"),
            "          },\n",
            '          "collective_counts": {\n',
        ]
        for k, op in enumerate(OPS):
            out.append('            "%s": %d' % (op, r["counts"].get(op, 0)))
            out.append("," if k < len(OPS) - 1 else "")
            out.append("\n")
        out += ["          }\n", "        }"]
    out.append("\n      ],\n")
    out.append('      "missing_ranks": [\n')
    for i, r in enumerate(missing):
        if i:
            out.append(",\n")
        out += [
            "        {\n",
            '          "rank": %d,\n' % r["rank"],
            '          "host": "%s",\n' % r["host"],
            '          "pid": %d,\n' % r["pid"],
            '          "cuda_dev": %d,\n' % r["dev"],
            '          "nvml_dev": %d,\n' % r["dev"],
            '          "status": {\n',
            '            "unresponsive": %s,\n' % "true",
            '            "considered_dead": %s\n' % ("true" if r.get("dead") else "false"),
            "          }\n",
            "        }",
        ]
    out += ["\n      ]\n", "    }"]
    out += ["\n  ],\n", '  "ras": {\n', '    "collection_time_sec": %.3f,\n' % comm_s]
    out += ['    "timeouts_count": %d\n' % timeouts, "  }\n", "}\n"]
    return "OK\n" + "".join(out)


# A 2-node job, 2 ranks per node: ranks 0,1 on 10.0.0.1 (GPUs 0,1), ranks 2,3 on 10.0.0.2.
RANKS = [
    {"rank": 0, "host": "10.0.0.1", "pid": 907, "dev": 0},
    {"rank": 1, "host": "10.0.0.1", "pid": 908, "dev": 1},
    {"rank": 2, "host": "10.0.0.2", "pid": 5150, "dev": 0},
    {"rank": 3, "host": "10.0.0.2", "pid": 5151, "dev": 1},
]


def with_counts(allreduce: dict[int, int], bcast: dict[int, int] | None = None, **extra):
    out = []
    for r in RANKS:
        counts = {"AllReduce": allreduce[r["rank"]], "Broadcast": (bcast or {}).get(r["rank"], 1)}
        out.append({**r, "counts": counts, **extra.get(str(r["rank"]), {})})
    return out


def main() -> None:
    files = {}
    # 1. Rank 1 is alive but launches nothing: the others reached AllReduce 813, it 812.
    files["behind-4rank.txt"] = (
        text_head(2, 2, 4, 4, 0.012)
        + row(0, 1, 2, "2", 4, 4, "RUNNING", "MISMATCH")
        + "\nErrors\n======\n\n"
        + "Warnings\n========\n\n"
        + "#0-0 (%016x) MISMATCH\n" % HASH
        + "  Communicator ranks have different %s operation counts\n" % "AllReduce"
        + "  %d ranks have launched up to operation %d\n" % (3, 813)
        + "  Rank %d has launched up to operation %d -- %s\n" % (1, 812, gpu(908, "10.0.0.1", 1))
        + "\n"
    )
    files["behind-4rank.json"] = json_answer(with_counts({0: 813, 1: 812, 2: 813, 3: 813}))
    # 2. Rank 3's process died: RAS declared it dead after 60 s without contact.
    files["dead-4rank.txt"] = (
        text_head(2, 2, 4, 4, 0.004)
        + row(0, 1, 2, "1-2", 4, 3, "RUNNING", "INCOMPLETE")
        + "\nErrors\n======\n\n"
        + "DEAD\n  %d job process%s considered dead (unreachable via the RAS network)\n"
        % (1, " is")
        + "  Process %d on node %s managing GPU%s %s\n" % (5151, "10.0.0.2", "", "1")
        + "\n"
        + "#0-0 (%016x) INCOMPLETE\n  Missing communicator data from %d rank%s\n" % (HASH, 1, "")
        + "  Rank %d -- GPU %s managed by process %d on node %s\n" % (3, "1", 5151, "10.0.0.2")
        + "\n"
        + "Warnings\n========\n\n"
    )
    alive = [r for r in with_counts({0: 813, 1: 813, 2: 813, 3: 812}) if r["rank"] != 3]
    files["dead-4rank.json"] = json_answer(alive, missing=[{**RANKS[3], "dead": True}])
    # 3. Rank 2 reports an asynchronous error (ncclRemoteError = 6): its peer went away.
    files["asyncerror-4rank.txt"] = (
        text_head(2, 2, 4, 4, 0.003)
        + row(0, 1, 2, "2", 4, 4, "RUNNING", "ERROR")
        + "\nErrors\n======\n\n"
        + "#0-0 (%016x) ERROR\n" % HASH
        + "  Asynchronous error%s on %d rank%s\n" % ("", 1, "")
        + "  Rank %d reported %s -- %s\n" % (2, "Remote process error", gpu(5150, "10.0.0.2", 0))
        + "\n"
        + "Warnings\n========\n\n"
    )
    files["asyncerror-4rank.json"] = json_answer(
        with_counts({0: 813, 1: 813, 2: 813, 3: 813}, **{"2": {"async": 6}})
    )
    # 4. Ranks entered different collectives: 0,2,3 launched AllReduce 813, rank 1 launched
    #    Broadcast 2 instead (and never AllReduce 813).
    files["mismatch-4rank.json"] = json_answer(
        with_counts({0: 813, 1: 812, 2: 813, 3: 813}, {0: 1, 1: 2, 2: 1, 3: 1})
    )
    files["mismatch-4rank.txt"] = (
        text_head(2, 2, 4, 4, 0.010)
        + row(0, 1, 2, "2", 4, 4, "RUNNING", "MISMATCH")
        + "\nErrors\n======\n\n"
        + "Warnings\n========\n\n"
        + "#0-0 (%016x) MISMATCH\n" % HASH
        + "  Communicator ranks have different %s operation counts\n" % "Broadcast"
        + "  %d ranks have launched up to operation %d\n" % (3, 1)
        + "  Rank %d has launched up to operation %d -- %s\n" % (1, 2, gpu(908, "10.0.0.1", 1))
        + "\n"
        + "  Communicator ranks have different %s operation counts\n" % "AllReduce"
        + "  %d ranks have launched up to operation %d\n" % (3, 813)
        + "  Rank %d has launched up to operation %d -- %s\n" % (1, 812, gpu(908, "10.0.0.1", 1))
        + "\n"
    )
    # 5. The excerpt in NCCL's docs (docs/.../ras.rst, "Sample Output"), in the wording of
    #    NCCL < 2.26, where counts were not yet broken down per collective type.
    listed = [0, 2, 3, 4, 5, 7]
    files["docs-32rank.txt"] = (
        text_head(4, 8, 32, 32, 0.0)
        + row(0, 1, 4, "8", 32, 32, "RUNNING", "MISMATCH")
        + "\nWarnings\n========\n\n"
        + "#0-0 (27a079b828ff1a75) MISMATCH\n"
        + "  Communicator ranks have different collective operation counts\n"
        + "  26 ranks have launched up to operation 6650\n"
        + "  6 ranks have launched up to operation 6649\n"
        + "".join(
            "  Rank %d -- GPU %d managed by process %d on node 172.16.64.210\n" % (r, r, 483072 + r)
            for r in listed
        )
        + "\n"
    )
    for name, text in files.items():
        (HERE / name).write_text(text)
        print("wrote", name)


if __name__ == "__main__":
    main()
