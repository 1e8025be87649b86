"""graphrun.dask on a LocalCluster of 2 worker processes (CTest dask_detect, label cpu).

A folder of the bundled shapes-val pictures and photos (some copied twice) plus one corrupt JPEG
runs through `graphrun --device cpu --model shapes --batch 2 --input DIR` (JSON Lines) and through
graphrun.dask.detect on the cluster, the same model, batch and CPU engine. Checked: one record per
file, in input order; for a list given in another order, each record is its own path's; every
record equals the CLI's line for that file - width, height, and each detection's class, class_id,
and its prob/objectness and box printed at the CLI's precision (%.6f, %.1f: the same CPU engine
and decoder give the same float32 values, so the printed digits must match exactly); the corrupt
file's error is the CLI's message and the others are processed; output_dir writes JSON Lines
partitions holding the same records. Skips (exit 77) with one line when dask or distributed is
missing (Debian: python3-dask python3-distributed). Distributed's NVML probe is configured by
the environment (DASK_DISTRIBUTED__DIAGNOSTICS__NVML=False where pynvml is broken): Dask reads
it itself, nothing here overrides it.

usage: dask_detect.py BUILD_DIR   (PYTHONPATH=python, GRAPHRUN_LIBRARY=the shared library)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile


def cli_lines(graphrun, folder):
    """The CLI's records by path (it exits 3: one file is corrupt)."""
    run = subprocess.run([graphrun, "--device", "cpu", "--model", "shapes", "--batch", "2",
                          "--threads", "2", "--input", folder],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 3, f"graphrun exit {run.returncode}, expected 3: {run.stderr}"
    return [json.loads(line) for line in run.stdout.splitlines()]


def same_record(mine, cli):
    """mine (graphrun.dask, full floats) printed as the CLI prints equals the CLI's line."""
    assert mine["input"] == cli["input"], (mine["input"], cli["input"])
    if "error" in cli:
        assert mine.get("error") == cli["error"], f"{cli['input']}: {mine} vs {cli}"
        return
    assert "error" not in mine, f"{mine['input']}: {mine['error']}"
    assert (mine["width"], mine["height"]) == (cli["width"], cli["height"]), mine["input"]
    assert len(mine["detections"]) == len(cli["detections"]), \
        f"{mine['input']}: {len(mine['detections'])} vs {len(cli['detections'])} detections"
    for d, c in zip(mine["detections"], cli["detections"]):
        assert (d["class"], d["class_id"]) == (c["class"], c["class_id"]), (d, c)
        for key, digits in (("prob", 6), ("objectness", 6), ("left", 1), ("top", 1),
                            ("right", 1), ("bottom", 1)):
            assert f"{d[key]:.{digits}f}" == f"{c[key]:.{digits}f}", \
                f"{mine['input']}: {key} {d[key]!r} vs the CLI's {c[key]!r}"


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
        import dask  # noqa: F401
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
        cli = cli_lines(graphrun_bin, folder)
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
            # JSON Lines partitions.
            out = os.path.join(root, "out")
            files = graphrun.dask.detect(folder, model="shapes", batch=2, device="cpu",
                                         npartitions=3, output_dir=out)
            assert files == [os.path.join(out, f"part-{i:05d}.jsonl") for i in range(3)], files
            written = [json.loads(line) for name in files for line in open(name)]
            assert written == records, "the partitions' lines differ from the records"
            assert sorted(os.listdir(out)) == [os.path.basename(f) for f in files]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"dask_detect: {len(cli)} files on 2 worker processes equal the CLI's JSON Lines "
          f"(the corrupt one reported), in order; JSON Lines partitions the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
