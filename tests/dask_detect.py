"""graphrun.dask on a LocalCluster of 2 worker processes (CTest dask_detect, label cpu).

A folder of the bundled shapes-val pictures and photos (some copied twice) plus one corrupt JPEG
runs through `graphrun --device cpu --model shapes --batch 2 --input DIR` (JSON Lines) and through
graphrun.dask.detect on the cluster, the same model, batch and CPU engine. Checked: one record per
file, in input order; for a list given in another order, each record is its own path's; every
record equals the CLI's line for that file parsed (the library formats both: the same CPU engine
and decoder give the same float32 values, so the same text); the corrupt file's error is the CLI's
message and the others are processed; output_dir writes JSON Lines partitions that, end to end,
are the CLI's stdout byte for byte. Skips (exit 77) with one line when dask or distributed is
missing (Debian: python3-dask python3-distributed). Distributed's NVML probe is configured by
the environment (DASK_DISTRIBUTED__DIAGNOSTICS__NVML=False where pynvml is broken): Dask reads
it itself, nothing here overrides it.

usage: dask_detect.py BUILD_DIR   (PYTHONPATH=python, GRAPHRUN_LIBRARY=the shared library)
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile


def cli_output(graphrun, folder):
    """The CLI's JSON Lines, as bytes (it exits 3: one file is corrupt)."""
    run = subprocess.run([graphrun, "--device", "cpu", "--model", "shapes", "--batch", "2",
                          "--threads", "2", "--input", folder],
                         capture_output=True, check=False)
    assert run.returncode == 3, f"graphrun exit {run.returncode}, expected 3: {run.stderr!r}"
    return run.stdout


def same_record(mine, cli):
    """mine (graphrun.dask) is the CLI's line parsed: every field, every number."""
    assert mine == cli, f"{cli['input']}: {mine} vs the CLI's {cli}"


def make_folder(root):
    folder = os.path.join(root, "images")
    os.makedirs(folder)
    val = os.path.join("data", "shapes-val")
    for i, name in enumerate(["000.png", "001.png", "002.png"]):
        shutil.copy(os.path.join(val, name), os.path.join(folder, f"s{i}.png"))
        if i < 2:  # the same picture under a second name
            shutil.copy(os.path.join(val, name), os.path.join(folder, f"t{i}.png"))
    shutil.copy(os.path.join("data", "dog.jpg"), os.path.join(folder, "dog.jpg"))
    with open(os.path.join("data", "dog.jpg"), "rb") as f:
        head = f.read(600)  # a JPEG cut short: the decoder's error
    with open(os.path.join(folder, "corrupt.jpg"), "wb") as f:
        f.write(head)
    return folder


def main():
    try:
        import distributed  # noqa: F401
        import dask.bag  # noqa: F401
    except ImportError as exc:
        print(f"dask_detect: {exc.name} missing (apt-get install python3-dask "
              f"python3-distributed)")
        return 77
    import graphrun.dask
    from distributed import Client, LocalCluster

    graphrun_bin = os.path.join(sys.argv[1], "graphrun")
    root = tempfile.mkdtemp(prefix="dask_detect_")
    try:
        folder = make_folder(root)
        cli_text = cli_output(graphrun_bin, folder)
        cli = [json.loads(line) for line in cli_text.splitlines()]
        by_path = {r["input"]: r for r in cli}
        assert len(cli) == 7 and sum("error" in r for r in cli) == 1, cli
        with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster):
            # The folder: one record per file, in the CLI's (sorted) order.
            records = graphrun.dask.detect(folder, model="shapes", batch=2, device="cpu",
                                           npartitions=3).compute()
            assert [r["input"] for r in records] == [r["input"] for r in cli], \
                [r["input"] for r in records]
            for mine, theirs in zip(records, cli):
                same_record(mine, theirs)
            assert any(r["detections"] for r in records if "detections" in r), \
                "no detections at all: the comparison would be empty"
            # A list in another order: each record is its own path's.
            paths = [r["input"] for r in cli][::-1]
            reordered = graphrun.dask.detect(paths, model="shapes", batch=2, device="cpu",
                                             partition_size=3).compute()
            assert [r["input"] for r in reordered] == paths
            for mine in reordered:
                same_record(mine, by_path[mine["input"]])
            # The paths travel as one PathList per task (Dask walks a list in a graph element by
            # element: seconds for a large list), which pickles whole and reads as the list.
            bag = graphrun.dask.detect(paths, model="shapes", batch=2, device="cpu",
                                       partition_size=3)
            lists = [a for task in dict(bag.__dask_graph__()).values() if isinstance(task, tuple)
                     for a in task if isinstance(a, graphrun.dask.PathList)]
            assert [list(x) for x in lists] == [paths[i:i + 3] for i in range(0, 7, 3)], lists
            again = pickle.loads(pickle.dumps(lists[0]))
            assert (list(again), len(again), again[1]) == (paths[:3], 3, paths[1])
            # A dask.bag of paths keeps its partitions.
            from_bag = graphrun.dask.detect(dask.bag.from_sequence(paths, npartitions=2),
                                            model="shapes", batch=2, device="cpu")
            assert from_bag.npartitions == 2 and from_bag.compute() == reordered
            # JSON Lines partitions: the CLI's bytes, cut in three.
            out = os.path.join(root, "out")
            files = graphrun.dask.detect(folder, model="shapes", batch=2, device="cpu",
                                         npartitions=3, output_dir=out)
            assert files == [os.path.join(out, f"part-{i:05d}.jsonl") for i in range(3)], files
            parts = []
            for name in files:
                with open(name, "rb") as f:
                    parts.append(f.read())
            assert all(parts), [len(p) for p in parts]
            assert b"".join(parts) == cli_text, \
                "the partitions' bytes differ from the CLI's JSON Lines"
            assert sorted(os.listdir(out)) == [os.path.basename(f) for f in files]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"dask_detect: {len(cli)} files on 2 worker processes equal the CLI's JSON Lines "
          f"(the corrupt one reported), in order; the JSON Lines partitions are its bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
